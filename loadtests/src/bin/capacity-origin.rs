//! `capacity-origin`: an origin with a fixed capacity (or none), for the overload benchmark.
//!
//! `--mode pool` (the default): at most `--capacity` requests in service at once, `--service-ms`
//! each, the rest queued FIFO without bound; `--halve-at-s` halves the capacity that long after
//! the first request. `--mode load-dependent`: no limit, each request takes `--service-ms` plus
//! `--per-inflight-ms` for every other request in service when it starts. `--mode noisy`: no
//! limit, service times log-normal with median `--service-ms` and p99/p50 `--p99-ratio`, drawn
//! from `--seed`. `GET /__stats` (JSON) and `GET /__reset` bypass the capacity. Prints the bound
//! address on one line of stdout, then serves until SIGINT or SIGTERM. Logs nothing per request.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use loadtests::capacity::{CapacityConfig, CapacityOrigin, Mode};

/// An HTTP/1.1 origin that serves at most N requests at once, M ms each, FIFO queue behind (or,
/// in the other modes, everything at once with a load-dependent or noisy service time).
#[derive(Debug, Parser)]
#[command(name = "capacity-origin", version)]
struct Args {
    /// Address to listen on; port 0 lets the kernel choose.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// How the origin serves.
    #[arg(long, value_enum, default_value_t = ModeArg::Pool)]
    mode: ModeArg,
    /// Requests in service at once (pool mode).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    capacity: u32,
    /// Service time of each request, in milliseconds (the time without load in load-dependent
    /// mode, the median in noisy mode).
    #[arg(long, default_value_t = 40)]
    service_ms: u64,
    /// Halve the capacity this many seconds after the first request (after start or
    /// `GET /__reset`; pool mode).
    #[arg(long)]
    halve_at_s: Option<f64>,
    /// Load-dependent mode: milliseconds added per other request in service at the start.
    #[arg(long, default_value_t = 0.2)]
    per_inflight_ms: f64,
    /// Noisy mode: p99 / p50 of the service time (at least 1).
    #[arg(long, default_value_t = 3.0)]
    p99_ratio: f64,
    /// Noisy mode: seed of the service-time draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Pool,
    LoadDependent,
    Noisy,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match config(&args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("capacity-origin: {e}");
            return ExitCode::FAILURE;
        }
    };
    let origin = match CapacityOrigin::spawn(&args.listen, cfg) {
        Ok(origin) => origin,
        Err(e) => {
            eprintln!("capacity-origin: cannot serve on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    loadtests::announce_and_serve(origin.addr())
}

fn config(args: &Args) -> Result<CapacityConfig, String> {
    let halve_after =
        args.halve_at_s.map(Duration::try_from_secs_f64).transpose().map_err(|e| format!("--halve-at-s: {e}"))?;
    let mode = match args.mode {
        ModeArg::Pool => Mode::Pool,
        ModeArg::LoadDependent => {
            let per_inflight = Duration::try_from_secs_f64(args.per_inflight_ms / 1000.0)
                .map_err(|e| format!("--per-inflight-ms: {e}"))?;
            Mode::LoadDependent { per_inflight }
        }
        ModeArg::Noisy => {
            if !(args.p99_ratio.is_finite() && args.p99_ratio >= 1.0) {
                return Err(format!("--p99-ratio must be a number of at least 1, not {}", args.p99_ratio));
            }
            Mode::Noisy { p99_ratio: args.p99_ratio, seed: args.seed }
        }
    };
    if !mode.limits_concurrency() && halve_after.is_some() {
        return Err(format!("--halve-at-s needs --mode pool (mode {} has no capacity)", mode.name()));
    }
    Ok(CapacityConfig {
        capacity: args.capacity as usize,
        service: Duration::from_millis(args.service_ms),
        halve_after,
        mode,
    })
}
