//! `capacity-origin`: an origin with a fixed capacity, for the overload benchmark.
//!
//! At most `--capacity` requests in service at once, `--service-ms` each, the rest queued FIFO
//! without bound; `--halve-at-s` halves the capacity that long after the first request.
//! `GET /__stats` (JSON) and `GET /__reset` bypass the capacity. Prints the bound address on one
//! line of stdout, then serves until SIGINT or SIGTERM. Logs nothing per request.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use loadtests::capacity::{CapacityConfig, CapacityOrigin};

/// An HTTP/1.1 origin that serves at most N requests at once, M ms each, FIFO queue behind.
#[derive(Debug, Parser)]
#[command(name = "capacity-origin", version)]
struct Args {
    /// Address to listen on; port 0 lets the kernel choose.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Requests in service at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    capacity: u32,
    /// Service time of each request, in milliseconds.
    #[arg(long, default_value_t = 40)]
    service_ms: u64,
    /// Halve the capacity this many seconds after the first request (after start or
    /// `GET /__reset`).
    #[arg(long)]
    halve_at_s: Option<f64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let halve_after = match args.halve_at_s.map(Duration::try_from_secs_f64).transpose() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("capacity-origin: --halve-at-s: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = CapacityConfig {
        capacity: args.capacity as usize,
        service: Duration::from_millis(args.service_ms),
        halve_after,
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
