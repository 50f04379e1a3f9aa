//! An open-loop, constant-throughput HTTP/1.1 load generator (wrk2-style, without coordinated
//! omission), for microsecond latencies.
//!
//! One thread drives `connections` keep-alive connections over raw epoll. Request `k` is due
//! `k / rate` seconds after the start and goes to connection `k % connections`; a connection
//! sends its next request as soon as that request is due and the previous answer is read (no
//! pipelining). **Latency runs from the scheduled time** to the end of the answer, so a request
//! that waited for its connection counts that wait, and a slow server cannot hide its delay by
//! slowing the generator. The generator checks itself: the lag between the scheduled and the
//! actual send of requests whose connection was free must stay small (see [`report`]), else the
//! run is reported invalid.
//!
//! A request not answered within the timeout of its scheduled time is a timeout: if it was sent,
//! its connection is closed and reopened; if it was still waiting for its connection it is not
//! sent at all. Every scheduled request thus ends answered, or as a connect, read or timeout
//! error, at most one timeout after the end of the schedule.

mod conn;
mod engine;
mod framing;
mod poller;
pub mod report;
mod schedule;

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub use framing::{FrameError, Response, ResponseReader};
pub use report::{Errors, Latency, Report, SendLag};
pub use schedule::Schedule;

/// Upper bounds on the arguments (beyond them a run is a mistake, not a benchmark).
pub const MAX_RATE: f64 = 10_000_000.0;
pub const MAX_CONNECTIONS: usize = 100_000;
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// Where requests go: `GET {path}` with `Host: {host}` to `addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
    /// Path and query, `/` when the URL has none.
    pub path: String,
}

/// One run, with every argument checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The URL as given, for the report.
    pub url: String,
    pub target: Target,
    /// Requests per second.
    pub rate: f64,
    pub connections: usize,
    /// Measured time, after the warm-up.
    pub duration: Duration,
    /// Time at the same rate before the measured time, not recorded.
    pub warmup: Duration,
    /// Per request, from its scheduled time.
    pub timeout: Duration,
}

/// A bad argument, with a message that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Why a run could not be made (errors during a run are counted in the report instead).
#[derive(Debug)]
pub enum RunError {
    /// A connection opened before the start failed: nothing was measured.
    Unreachable { addr: SocketAddr, source: io::Error },
    /// The generator's own machinery failed (epoll, the clock).
    Io(io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Unreachable { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
            RunError::Io(e) => write!(f, "generator failure: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

impl Config {
    /// Checks the arguments as the command line gives them.
    pub fn new(
        url: &str,
        rate: f64,
        connections: usize,
        duration_s: f64,
        warmup_s: f64,
        timeout_ms: u64,
    ) -> Result<Config, ConfigError> {
        let target = parse_target(url)?;
        if !(rate > 0.0 && rate <= MAX_RATE) {
            return Err(ConfigError(format!("--rate {rate}: must be above 0 and at most {MAX_RATE}")));
        }
        if !(1..=MAX_CONNECTIONS).contains(&connections) {
            return Err(ConfigError(format!("--connections {connections}: must be 1 to {MAX_CONNECTIONS}")));
        }
        if !(duration_s > 0.0 && duration_s <= MAX_SECONDS) {
            return Err(ConfigError(format!("--duration-s {duration_s}: must be above 0 and at most {MAX_SECONDS}")));
        }
        if !(0.0..=MAX_SECONDS).contains(&warmup_s) {
            return Err(ConfigError(format!("--warmup-s {warmup_s}: must be 0 to {MAX_SECONDS}")));
        }
        if !(1..=3_600_000).contains(&timeout_ms) {
            return Err(ConfigError(format!("--timeout-ms {timeout_ms}: must be 1 to 3600000")));
        }
        Ok(Config {
            url: url.to_string(),
            target,
            rate,
            connections,
            duration: Duration::from_secs_f64(duration_s),
            warmup: Duration::from_secs_f64(warmup_s),
            timeout: Duration::from_millis(timeout_ms),
        })
    }

    /// The request every connection sends.
    pub fn request(&self) -> Vec<u8> {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: loadtests-openloop\r\n\r\n",
            self.target.path, self.target.host
        )
        .into_bytes()
    }
}

/// Opens the connections, runs the schedule on this thread and reports. Fails only if a
/// connection cannot be opened before the start, or the generator itself fails.
pub fn run(cfg: &Config) -> Result<Report, RunError> {
    engine::Engine::connect(cfg)?.run()
}

/// Parses `http://host[:port][/path[?query]]`, resolving the host.
pub fn parse_target(url: &str) -> Result<Target, ConfigError> {
    let bad = |why: &str| ConfigError(format!("--target '{url}': {why}"));
    let rest = url.strip_prefix("http://").ok_or_else(|| bad("must start with http:// (no TLS)"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    if authority.is_empty() || authority.contains('@') {
        return Err(bad("needs a host (and no user info)"));
    }
    if path.bytes().any(|b| b.is_ascii_control() || b == b' ') || path.contains('#') {
        return Err(bad("the path has spaces, control characters or a fragment"));
    }
    let has_port = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && (!host.starts_with('[') || host.ends_with(']')) => {
            port.parse::<u16>().map_err(|_| bad("invalid port"))?;
            true
        }
        _ => false,
    };
    let with_port = if has_port { authority.to_string() } else { format!("{authority}:80") };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| bad(&format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| bad("the host has no address"))?;
    Ok(Target { addr, host: authority.to_string(), path })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> Result<Config, ConfigError> {
        Config::new(url, 1000.0, 4, 1.0, 0.0, 2000)
    }

    #[test]
    fn targets() {
        let t = parse_target("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((t.host.as_str(), t.path.as_str()), ("127.0.0.1:8080", "/a/b?x=1"));
        let t = parse_target("http://127.0.0.1:9").unwrap();
        assert_eq!(t.path, "/");
        assert_eq!(parse_target("http://127.0.0.1:9?q").unwrap().path, "/?q");
        let t = parse_target("http://[::1]:81/x").unwrap();
        assert_eq!((t.addr, t.host.as_str()), ("[::1]:81".parse().unwrap(), "[::1]:81"));
        assert_eq!(parse_target("http://127.0.0.1/").unwrap().addr.port(), 80);
        assert_eq!(parse_target("http://[::1]/").unwrap().addr.port(), 80);
    }

    #[test]
    fn bad_targets_name_the_argument() {
        for url in [
            "https://127.0.0.1/",
            "127.0.0.1:80",
            "http://",
            "http:///x",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:x/",
            "http://u@127.0.0.1/",
            "http://127.0.0.1/a b",
            "http://127.0.0.1/#f",
            "http://no-such-host.invalid/",
        ] {
            let e = parse_target(url).unwrap_err();
            assert!(e.0.starts_with(&format!("--target '{url}'")), "{url}: {e}");
        }
    }

    #[test]
    fn argument_ranges() {
        let ok = cfg("http://127.0.0.1:1/x").unwrap();
        assert_eq!(ok.duration, Duration::from_secs(1));
        assert_eq!(ok.timeout, Duration::from_secs(2));
        assert_eq!(ok.request(), b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUser-Agent: loadtests-openloop\r\n\r\n");
        let u = "http://127.0.0.1:1/";
        let cases = [
            (Config::new(u, 0.0, 4, 1.0, 0.0, 2000), "--rate"),
            (Config::new(u, f64::NAN, 4, 1.0, 0.0, 2000), "--rate"),
            (Config::new(u, f64::INFINITY, 4, 1.0, 0.0, 2000), "--rate"),
            (Config::new(u, 100.0, 0, 1.0, 0.0, 2000), "--connections"),
            (Config::new(u, 100.0, 4, 0.0, 0.0, 2000), "--duration-s"),
            (Config::new(u, 100.0, 4, -1.0, 0.0, 2000), "--duration-s"),
            (Config::new(u, 100.0, 4, 1e12, 0.0, 2000), "--duration-s"),
            (Config::new(u, 100.0, 4, 1.0, -0.5, 2000), "--warmup-s"),
            (Config::new(u, 100.0, 4, 1.0, f64::NAN, 2000), "--warmup-s"),
            (Config::new(u, 100.0, 4, 1.0, 0.0, 0), "--timeout-ms"),
        ];
        for (result, arg) in cases {
            let e = result.unwrap_err();
            assert!(e.0.starts_with(arg), "{e} should name {arg}");
        }
        assert!(Config::new(u, 0.5, 1, 0.001, 10.0, 1).is_ok());
    }
}
