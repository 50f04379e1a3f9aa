//! `openloop`: an open-loop, constant-throughput HTTP/1.1 load generator on one thread (see
//! `loadtests::openloop`). Writes the JSON report to `--out` or stdout and a one-line summary
//! on stderr; exits 0 when the run completed, errors or not, and 2 for bad arguments or an
//! unreachable target.

use std::process::ExitCode;

use clap::Parser;
use loadtests::openloop::{self, Config};

/// Sends `GET` to the target at a fixed rate whatever the answers do; latency runs from each
/// request's scheduled time, so waiting for a busy connection counts.
#[derive(Debug, Parser)]
#[command(name = "openloop", version)]
struct Args {
    /// http://HOST:PORT/PATH to request.
    #[arg(long)]
    target: String,
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// Keep-alive connections, opened before the clock starts; request k goes to k % C.
    #[arg(long)]
    connections: usize,
    /// Measured seconds, after the warm-up.
    #[arg(long)]
    duration_s: f64,
    /// Seconds at the same rate before the measured time, not recorded.
    #[arg(long, default_value_t = 0.0)]
    warmup_s: f64,
    /// A request not answered this long after its scheduled time is a timeout.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Write the JSON report here (default: stdout).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg =
        match Config::new(&args.target, args.rate, args.connections, args.duration_s, args.warmup_s, args.timeout_ms) {
            Ok(cfg) => cfg,
            Err(e) => return fail(&e.to_string()),
        };
    let report = match openloop::run(&cfg) {
        Ok(report) => report,
        Err(e) => return fail(&e.to_string()),
    };
    let json = match serde_json::to_string_pretty(&report) {
        Ok(json) => json,
        Err(e) => return fail(&format!("cannot encode the report: {e}")),
    };
    match &args.out {
        Some(path) => {
            if let Err(e) = std::fs::write(path, json + "\n") {
                return fail(&format!("cannot write {}: {e}", path.display()));
            }
        }
        None => println!("{json}"),
    }
    eprintln!("{}", report.summary());
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("openloop: {message}");
    ExitCode::from(2)
}
