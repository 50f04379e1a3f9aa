//! Load-test tooling for the gateway.
//!
//! - [`origin`]: a small, strict, blocking HTTP/1.1 origin server whose behaviour is chosen per
//!   request by its path. The gateway's end-to-end tests and the benchmarks use it as the
//!   upstream; it also misbehaves on request, for the gateway's upstream-strictness tests.
//! - [`capacity`]: an origin with a fixed capacity (a worker pool with a FIFO queue), for the
//!   overload benchmark.
//! - [`openloop`]: a constant-throughput load generator on one thread (raw epoll), latency from
//!   the schedule, for microsecond latencies.
//! - [`overload`]: an open-loop load generator with request classes, for the overload benchmark.
//! - [`abuse`]: abusive clients and the report of the abuse-RSS benchmark.
//!
//! The benchmark scripts live in `loadtests/bench/` and write their reports to
//! `loadtests/results/`; see `loadtests/README.md`.

pub mod abuse;
pub mod capacity;
pub mod openloop;
pub mod origin;
pub mod overload;
pub mod suite;

pub use origin::{pattern, Origin, OriginConfig, ReceivedRequest};

/// For the server binaries: prints the bound address on stdout, then serves until the default
/// SIGINT/SIGTERM disposition ends the process. Returns only if stdout cannot be written.
pub fn announce_and_serve(addr: std::net::SocketAddr) -> std::process::ExitCode {
    use std::io::Write;
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{addr}").and_then(|()| stdout.flush()).is_err() {
        return std::process::ExitCode::FAILURE;
    }
    loop {
        std::thread::park();
    }
}
