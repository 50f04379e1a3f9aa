//! `h2load` output: the summary after `finished in`.

use serde::Serialize;

use super::parse::{count_in, duration_us, line_after, percent, ParseError};

const TOOL: &str = "h2load";

/// One h2load run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct H2loadReport {
    /// `TLSv1.3`, absent over h2c.
    pub tls_protocol: Option<String>,
    /// `h2`, `h2c`, `http/1.1`.
    pub application_protocol: Option<String>,
    pub finished_in_us: f64,
    pub requests_per_sec: f64,
    pub total: u64,
    pub started: u64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    pub status_2xx: u64,
    pub status_3xx: u64,
    pub status_4xx: u64,
    pub status_5xx: u64,
    /// `time for request` row, microseconds; `None` if h2load printed none.
    pub time_for_request: Option<H2loadTimes>,
}

/// A timing row: min, max, mean, standard deviation (microseconds), % within one deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct H2loadTimes {
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub sd_us: f64,
    pub within_sd_pct: f64,
}

/// Parses one h2load run's output. Fails without the `finished in`, `requests:` and
/// `status codes:` lines (h2load prints none of them when it could not connect).
pub fn parse_h2load(text: &str) -> Result<H2loadReport, ParseError> {
    let finished = line_after(text, "finished in ")
        .ok_or_else(|| ParseError::new(TOOL, "no `finished in` line (did it connect?)"))?;
    let bad_finished = || ParseError::new(TOOL, format!("bad `finished in {finished}` line"));
    let mut parts = finished.split(", ");
    let finished_in_us = parts.next().and_then(duration_us).ok_or_else(bad_finished)?;
    let requests_per_sec =
        parts.next().and_then(|p| p.strip_suffix(" req/s")).and_then(|p| p.parse().ok()).ok_or_else(bad_finished)?;
    let requests = line_after(text, "requests: ").ok_or_else(|| ParseError::new(TOOL, "no `requests:` line"))?;
    let count = |label: &str| {
        count_in(requests, label, false)
            .ok_or_else(|| ParseError::new(TOOL, format!("no `{label}` count in `requests: {requests}`")))
    };
    let statuses =
        line_after(text, "status codes: ").ok_or_else(|| ParseError::new(TOOL, "no `status codes:` line"))?;
    let status = |label: &str| {
        count_in(statuses, label, false)
            .ok_or_else(|| ParseError::new(TOOL, format!("no `{label}` count in `status codes: {statuses}`")))
    };
    Ok(H2loadReport {
        tls_protocol: line_after(text, "TLS Protocol: ").map(|p| p.trim().to_owned()),
        application_protocol: line_after(text, "Application protocol: ").map(|p| p.trim().to_owned()),
        finished_in_us,
        requests_per_sec,
        total: count("total")?,
        started: count("started")?,
        done: count("done")?,
        succeeded: count("succeeded")?,
        failed: count("failed")?,
        errored: count("errored")?,
        timeout: count("timeout")?,
        status_2xx: status("2xx")?,
        status_3xx: status("3xx")?,
        status_4xx: status("4xx")?,
        status_5xx: status("5xx")?,
        time_for_request: time_for_request(text)?,
    })
}

/// `time for request:       23us      1.20ms       279us       113us    79.94%`.
fn time_for_request(text: &str) -> Result<Option<H2loadTimes>, ParseError> {
    let Some(row) = line_after(text, "time for request:") else {
        return Ok(None);
    };
    let bad = || ParseError::new(TOOL, format!("bad `time for request:{row}` line"));
    let words: Vec<&str> = row.split_whitespace().collect();
    let [min, max, mean, sd, pct] = words.as_slice() else {
        return Err(bad());
    };
    Ok(Some(H2loadTimes {
        min_us: duration_us(min).ok_or_else(bad)?,
        max_us: duration_us(max).ok_or_else(bad)?,
        mean_us: duration_us(mean).ok_or_else(bad)?,
        sd_us: duration_us(sd).ok_or_else(bad)?,
        within_sd_pct: percent(pct).ok_or_else(bad)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h2c_run() {
        let r = parse_h2load(include_str!("fixtures/h2load-h2c.txt")).unwrap();
        assert_eq!(r.application_protocol.as_deref(), Some("h2c"));
        assert_eq!(r.tls_protocol, None);
        assert!((r.finished_in_us - 197_810.0).abs() < 1e-6);
        assert_eq!(r.requests_per_sec, 101_109.17);
        assert_eq!((r.total, r.started, r.done, r.succeeded), (20_000, 20_000, 20_000, 20_000));
        assert_eq!((r.failed, r.errored, r.timeout), (0, 0, 0));
        assert_eq!((r.status_2xx, r.status_3xx, r.status_4xx, r.status_5xx), (20_000, 0, 0, 0));
        let t = r.time_for_request.unwrap();
        assert_eq!((t.min_us, t.max_us, t.mean_us, t.sd_us, t.within_sd_pct), (23.0, 1200.0, 279.0, 113.0, 79.94));
    }

    #[test]
    fn h2c_run_for_a_duration() {
        // h2load 1.52 against a plain listener with prior knowledge (tls-h2.sh's h2c test).
        let r = parse_h2load(include_str!("fixtures/h2load-h2c-duration.txt")).unwrap();
        assert_eq!((r.application_protocol.as_deref(), r.tls_protocol.as_deref()), (Some("h2c"), None));
        assert_eq!((r.finished_in_us, r.requests_per_sec), (3_000_000.0, 100_569.33));
        assert_eq!((r.total, r.started, r.done, r.succeeded), (301_708, 302_220, 301_708, 301_708));
        assert_eq!((r.failed, r.errored, r.timeout, r.status_2xx), (0, 0, 0, 301_708));
        assert_eq!(r.time_for_request.unwrap().mean_us, 5060.0);
        // What tls-h2.sh compares: `"\(.application_protocol) \(.tls_protocol)"` is "h2c null".
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            (&json["application_protocol"], &json["tls_protocol"]),
            (&serde_json::json!("h2c"), &serde_json::Value::Null)
        );
    }

    #[test]
    fn tls_run_for_a_duration() {
        let r = parse_h2load(include_str!("fixtures/h2load-tls.txt")).unwrap();
        assert_eq!(r.tls_protocol.as_deref(), Some("TLSv1.3"));
        assert_eq!(r.application_protocol.as_deref(), Some("h2"));
        assert_eq!(r.finished_in_us, 2_000_000.0);
        assert_eq!(r.requests_per_sec, 168_028.5);
        assert_eq!((r.total, r.started, r.succeeded), (336_057, 336_089, 336_057));
        assert_eq!(r.time_for_request.unwrap().max_us, 5580.0);
    }

    #[test]
    fn failures_are_counted() {
        let r = parse_h2load(include_str!("fixtures/h2load-h2c-failures.txt")).unwrap();
        assert_eq!((r.total, r.started, r.done, r.succeeded), (20_000, 4028, 4024, 4000));
        assert_eq!((r.failed, r.errored, r.timeout), (16_000, 16_000, 0));
    }

    #[test]
    fn bad_input_is_an_error_message() {
        let e = parse_h2load("starting benchmark...\nconnect to 127.0.0.1 failed\n").unwrap_err();
        assert_eq!(e.to_string(), "h2load output: no `finished in` line (did it connect?)");
        let text = include_str!("fixtures/h2load-h2c.txt");
        let e = parse_h2load(&text.replace("0 errored, ", "")).unwrap_err();
        assert!(e.message.starts_with("no `errored` count"), "{e}");
        let e = parse_h2load(&text.replace("101109.17 req/s", "fast")).unwrap_err();
        assert!(e.message.starts_with("bad `finished in"), "{e}");
        let e = parse_h2load(&text.replace("279us", "279")).unwrap_err();
        assert!(e.message.starts_with("bad `time for request"), "{e}");
    }
}
