//! The normalised summary of one suite run: what `summary.json` holds and what the markdown
//! report and the plots are drawn from. Every figure a file may lack is an `Option`; a ratio is
//! `None` when its reference proxy (or the figure) is missing.

use serde::{Deserialize, Serialize};

/// Median, minimum and maximum over a scenario's rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    /// A single measurement.
    pub fn one(value: f64) -> Self {
        Self { median: value, min: value, max: value }
    }
}

/// A figure divided by the same figure of nginx and of HAProxy in the same scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Ratios {
    pub vs_nginx: Option<f64>,
    pub vs_haproxy: Option<f64>,
}

/// Everything `bench-report summarize` found in one suite directory.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub meta: Meta,
    /// What is missing or suspect (files, proxies, short runs), one sentence each.
    pub notes: Vec<String>,
    /// h1-small, h1-16k, h1-large, https, h1-vhosts, latency: those whose file was read, in that order.
    pub http: Vec<HttpScenario>,
    pub tls_h2: Option<TlsH2>,
    pub openloop: Option<OpenLoop>,
    pub overload: Option<Overload>,
    /// The CPU scenarios round by round against that round's better peer, in report order.
    pub paired: Vec<super::paired::PairedRow>,
    pub targets: Vec<super::targets::Target>,
}

/// Where and when the run happened, from the first scenario file read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Meta {
    pub dir: String,
    pub command: Option<String>,
    pub timestamp: Option<String>,
    pub commit: Option<String>,
    pub dirty: Option<bool>,
    pub machine: Option<serde_json::Value>,
    /// The scenario files read, in order.
    pub files: Vec<String>,
}

/// One wrk-driven HTTP scenario (`h1-small` format).
#[derive(Debug, Clone, Serialize)]
pub struct HttpScenario {
    pub scenario: String,
    pub timestamp: Option<String>,
    pub rows: Vec<HttpRow>,
}

/// One proxy in an HTTP scenario. Latencies are microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRow {
    pub proxy: String,
    pub rounds: Option<u64>,
    pub rps: Option<Stat>,
    pub cpu_us_per_req: Option<Stat>,
    /// The proxy's CPU time over the origin's in the same run (the origin serves one request per
    /// proxied request, so this cancels what slows the whole machine between runs).
    pub cpu_per_origin: Option<Stat>,
    pub p50_us: Option<Stat>,
    pub p99_us: Option<Stat>,
    pub errors: Option<u64>,
    pub rps_ratio: Ratios,
    pub cpu_ratio: Ratios,
    /// Latency scenario only: this proxy's medians minus `direct`'s.
    pub added: Option<AddedLatency>,
}

/// Latency a proxy adds to the direct path (one connection, one request at a time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AddedLatency {
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p50_vs_nginx: Option<f64>,
    pub p99_vs_nginx: Option<f64>,
}

/// The tls-h2 scenario.
#[derive(Debug, Clone, Serialize)]
pub struct TlsH2 {
    pub timestamp: Option<String>,
    pub rows: Vec<TlsRow>,
}

/// One proxy in tls-h2. Idle memory is PSS KiB per held connection. The h2c figures (cleartext
/// HTTP/2 with prior knowledge, the h2 load without TLS) are `None` in files from before the
/// h2c test.
#[derive(Debug, Clone, Serialize)]
pub struct TlsRow {
    pub proxy: String,
    pub handshake_per_s: Option<Stat>,
    pub handshake_cpu_us: Option<Stat>,
    pub h2_per_s: Option<Stat>,
    pub h2_cpu_us: Option<Stat>,
    /// As [`HttpRow::cpu_per_origin`], for the h2 and h2c loads.
    pub h2_cpu_per_origin: Option<Stat>,
    pub h2_failed: Option<u64>,
    pub h2c_per_s: Option<Stat>,
    pub h2c_cpu_us: Option<Stat>,
    pub h2c_cpu_per_origin: Option<Stat>,
    pub h2c_failed: Option<u64>,
    pub idle_tls_kib: Option<Stat>,
    pub idle_tls_opened: Option<f64>,
    pub idle_plain_kib: Option<Stat>,
    pub idle_plain_opened: Option<f64>,
    pub handshake_cpu_ratio: Ratios,
    pub h2_cpu_ratio: Ratios,
    pub h2c_cpu_ratio: Ratios,
    pub idle_tls_ratio: Ratios,
    pub idle_plain_ratio: Ratios,
}

/// The open-loop scenario: latency at fixed fractions of each proxy's own peak.
#[derive(Debug, Clone, Serialize)]
pub struct OpenLoop {
    pub timestamp: Option<String>,
    pub rows: Vec<OpenLoopRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpenLoopRow {
    pub proxy: String,
    pub peak_rps: Option<f64>,
    /// Sorted by fraction.
    pub points: Vec<OpenLoopPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OpenLoopPoint {
    pub fraction: f64,
    pub rate: Option<f64>,
    pub achieved_rps: Option<f64>,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub errors: Option<u64>,
    pub valid: Option<bool>,
}

/// The overload scenario; counts summed over a proxy's valid rounds, latencies their median.
#[derive(Debug, Clone, Serialize)]
pub struct Overload {
    pub timestamp: Option<String>,
    pub rows: Vec<OverloadRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OverloadRow {
    pub proxy: String,
    pub rounds: usize,
    /// Requests served within their deadline, % of what the origin could serve.
    pub goodput_pct: Option<f64>,
    pub classes: Vec<OverloadClass>,
}

/// One request class of one proxy. Latencies of successful requests, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadClass {
    pub class: String,
    pub offered: Option<u64>,
    pub succeeded: Option<u64>,
    pub ok_pct: Option<f64>,
    pub shed: Option<u64>,
    pub rate_limited: Option<u64>,
    pub timed_out: Option<u64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub unloaded_p50_ms: Option<f64>,
    pub unloaded_p99_ms: Option<f64>,
}

/// `value / reference`, or `None` when either is missing or the reference is not positive.
pub fn ratio(value: Option<f64>, reference: Option<f64>) -> Option<f64> {
    match (value, reference) {
        (Some(v), Some(r)) if r > 0.0 && v.is_finite() && r.is_finite() => Some(v / r),
        _ => None,
    }
}

/// Ratios of `value` to the nginx and HAProxy rows' values, found with `key`.
pub fn ratios<R>(
    value: Option<f64>,
    rows: &[R],
    proxy: impl Fn(&R) -> &str,
    key: impl Fn(&R) -> Option<f64>,
) -> Ratios {
    let of = |name: &str| rows.iter().find(|r| proxy(r) == name).and_then(&key);
    Ratios { vs_nginx: ratio(value, of("nginx")), vs_haproxy: ratio(value, of("haproxy")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_needs_both_and_a_positive_reference() {
        assert_eq!(ratio(Some(8.0), Some(10.0)), Some(0.8));
        assert_eq!(ratio(None, Some(10.0)), None);
        assert_eq!(ratio(Some(8.0), None), None);
        assert_eq!(ratio(Some(8.0), Some(0.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
    }

    #[test]
    fn ratios_against_the_reference_rows() {
        let rows = [("nginx", Some(20.0)), ("gw", Some(10.0)), ("haproxy", None)];
        let r = ratios(Some(10.0), &rows, |r| r.0, |r| r.1);
        assert_eq!(r, Ratios { vs_nginx: Some(0.5), vs_haproxy: None });
    }
}
