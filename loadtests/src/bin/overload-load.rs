//! `overload-load`: an open-loop load generator with request classes, for the overload
//! benchmark. Writes a JSON report (see `loadtests::overload::Report`) and prints a one-line
//! summary per class on stderr.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use loadtests::overload::{self, Arrivals, LoadConfig, Mix};

/// Sends `GET /<class>` at a fixed total rate, whatever the answers do; latency is measured
/// from each request's scheduled time.
#[derive(Debug, Parser)]
#[command(name = "overload-load", version)]
struct Args {
    /// Where to send: http://HOST:PORT.
    #[arg(long)]
    target: String,
    /// Requests per second, all classes together.
    #[arg(long)]
    rate: f64,
    /// Seconds of scheduled requests (the run then waits for the last answers).
    #[arg(long)]
    duration_s: f64,
    /// Classes and their weights; each class is requested on `/<class>`.
    #[arg(long, default_value = "critical=10,normal=30,sheddable=60")]
    mix: Mix,
    /// Client timeout per request, from its scheduled send time, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// How requests are spread over time.
    #[arg(long, value_enum, default_value_t = ArrivalsArg::Uniform)]
    arrivals: ArrivalsArg,
    /// Seed of the class choice (and of Poisson gaps).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads, one keep-alive connection each; default: rate x (timeout + 0.25 s) + 16.
    #[arg(long)]
    workers: Option<usize>,
    /// Also report requests scheduled before and after this second separately.
    #[arg(long)]
    split_at_s: Option<f64>,
    /// Also write every scheduled request here, as CSV (class, scheduled and latency ms, outcome).
    #[arg(long)]
    records: Option<std::path::PathBuf>,
    /// Write the JSON report here (default: stdout).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ArrivalsArg {
    Uniform,
    Poisson,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("overload-load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let (target, host) = overload::parse_target(&args.target)?;
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        return Err("--rate must be above 0".into());
    }
    let duration = Duration::try_from_secs_f64(args.duration_s).map_err(|e| format!("--duration-s: {e}"))?;
    let split_at =
        args.split_at_s.map(Duration::try_from_secs_f64).transpose().map_err(|e| format!("--split-at-s: {e}"))?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let cfg = LoadConfig {
        target,
        host,
        rate: args.rate,
        duration,
        mix: args.mix,
        timeout,
        arrivals: match args.arrivals {
            ArrivalsArg::Uniform => Arrivals::Uniform,
            ArrivalsArg::Poisson => Arrivals::Poisson,
        },
        seed: args.seed,
        workers: args.workers.unwrap_or_else(|| overload::default_workers(args.rate, timeout)).max(1),
        split_at,
    };
    let mut records = match &args.records {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?),
        None => None,
    };
    let report = overload::run_recorded(&cfg, records.as_mut().map(|f| f as &mut dyn std::io::Write))
        .map_err(|e| format!("cannot run: {e}"))?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| format!("cannot encode the report: {e}"))?;
    match &args.out {
        Some(path) => std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => println!("{json}"),
    }
    for (name, c) in &report.classes {
        eprintln!(
            "overload-load: {name}: offered {} ok {} shed {} 429 {} timed out {} errors {} p50 {} ms p99 {} ms",
            c.offered,
            c.succeeded,
            c.shed,
            c.rate_limited,
            c.timed_out,
            c.errors,
            c.ok_ms.p50.map_or("-".into(), |v| format!("{v:.1}")),
            c.ok_ms.p99.map_or("-".into(), |v| format!("{v:.1}")),
        );
    }
    if report.generator.overloaded > 0 {
        eprintln!(
            "overload-load: WARNING: {} requests not sent (no worker free): the run is not valid",
            report.generator.overloaded
        );
    }
    Ok(())
}
