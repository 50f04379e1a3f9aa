//! `origin`: the test origin server as a process, for benchmarks and manual runs.
//!
//! Prints the bound address on one line of stdout, then serves until SIGINT or SIGTERM.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use loadtests::{Origin, OriginConfig};

/// A strict HTTP/1.1 origin whose answer is chosen by the request path (see loadtests/README.md).
#[derive(Debug, Parser)]
#[command(name = "origin", version)]
struct Args {
    /// Address to listen on; port 0 lets the kernel choose.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: String,
    /// Status of the default answer.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(200..=599))]
    status: u16,
    /// Length of the default body (`ok` repeated and cut to this length).
    #[arg(long, default_value_t = 2)]
    body_size: usize,
    /// Delay added before every answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Close every connection after one answer.
    #[arg(long)]
    no_keep_alive: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = OriginConfig {
        status: args.status,
        body_size: args.body_size,
        latency: Duration::from_millis(args.latency_ms),
        keep_alive: !args.no_keep_alive,
    };
    let origin = match Origin::spawn(&args.listen, cfg) {
        Ok(origin) => origin,
        Err(e) => {
            eprintln!("origin: cannot serve on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    loadtests::announce_and_serve(origin.addr())
}
