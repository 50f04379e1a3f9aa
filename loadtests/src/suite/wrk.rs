//! `wrk --latency` output, with the `RESULT key=value ...` line our lua `done` hook prints
//! (`loadtests/bench/h1-small.sh`, `write_wrk_script`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::parse::{count_in, duration_us, line_after, metric, percent, size_bytes, ParseError};

const TOOL: &str = "wrk";

/// One wrk run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WrkReport {
    pub url: Option<String>,
    pub threads: Option<u64>,
    pub connections: Option<u64>,
    /// Per-request latency, microseconds.
    pub latency: Option<ThreadStat>,
    /// Requests per second per thread.
    pub req_per_sec: Option<ThreadStat>,
    /// `--latency` distribution: (percentile, microseconds), in the order printed.
    pub distribution: Vec<LatencyPoint>,
    pub requests: u64,
    pub duration_us: f64,
    pub bytes_read: f64,
    pub socket_errors: SocketErrors,
    /// Answers with a status other than 2xx or 3xx.
    pub non_2xx_3xx: u64,
    pub requests_per_sec: f64,
    pub transfer_per_sec_bytes: Option<f64>,
    /// The `RESULT` line's fields, exact integers; `None` without the lua hook.
    pub result: Option<BTreeMap<String, i64>>,
}

/// One `Thread Stats` row: average, standard deviation, maximum, % within one deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThreadStat {
    pub avg: f64,
    pub stdev: f64,
    pub max: f64,
    pub within_stdev_pct: f64,
}

/// One line of the `Latency Distribution`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyPoint {
    pub percentile: f64,
    pub us: f64,
}

/// `Socket errors:`; all zero when wrk printed no such line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SocketErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

/// Parses one wrk run's output. Fails without the `N requests in T, S read` and
/// `Requests/sec:` lines (wrk prints `unable to connect ...` instead when nothing answered).
pub fn parse_wrk(text: &str) -> Result<WrkReport, ParseError> {
    if let Some(line) = text.lines().find(|l| l.starts_with("unable to connect")) {
        return Err(ParseError::new(TOOL, format!("no run: {}", line.trim())));
    }
    let (requests, elapsed_us, bytes_read) = totals(text)?;
    let requests_per_sec = line_after(text, "Requests/sec:")
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| ParseError::new(TOOL, "no `Requests/sec:` line"))?;
    let (threads, connections) = threads_and_connections(text);
    let socket_errors = match line_after(text, "Socket errors:") {
        Some(list) => SocketErrors {
            connect: count_in(list, "connect", true).unwrap_or(0),
            read: count_in(list, "read", true).unwrap_or(0),
            write: count_in(list, "write", true).unwrap_or(0),
            timeout: count_in(list, "timeout", true).unwrap_or(0),
        },
        None => SocketErrors::default(),
    };
    let non_2xx_3xx = match line_after(text, "Non-2xx or 3xx responses:") {
        Some(v) => v.trim().parse().map_err(|_| ParseError::new(TOOL, format!("bad Non-2xx count `{}`", v.trim())))?,
        None => 0,
    };
    Ok(WrkReport {
        url: text
            .lines()
            .find_map(|l| l.strip_prefix("Running "))
            .and_then(|l| l.split(" @ ").nth(1))
            .map(|u| u.trim().to_owned()),
        threads,
        connections,
        latency: thread_stat(text, "Latency", duration_us)?,
        req_per_sec: thread_stat(text, "Req/Sec", metric)?,
        distribution: distribution(text)?,
        requests,
        duration_us: elapsed_us,
        bytes_read,
        socket_errors,
        non_2xx_3xx,
        requests_per_sec,
        transfer_per_sec_bytes: line_after(text, "Transfer/sec:").and_then(size_bytes),
        result: result_line(text)?,
    })
}

/// `198601 requests in 2.00s, 28.22MB read`.
fn totals(text: &str) -> Result<(u64, f64, f64), ParseError> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" requests in "))
        .ok_or_else(|| ParseError::new(TOOL, "no `N requests in T, S read` line"))?;
    let bad = || ParseError::new(TOOL, format!("bad totals line `{line}`"));
    let (count, rest) = line.split_once(" requests in ").ok_or_else(bad)?;
    let (duration, read) = rest.split_once(", ").ok_or_else(bad)?;
    let requests = count.trim().parse().map_err(|_| bad())?;
    let duration = duration_us(duration).ok_or_else(bad)?;
    let read = size_bytes(read.trim_end_matches(" read")).ok_or_else(bad)?;
    Ok((requests, duration, read))
}

/// `  1 threads and 16 connections`.
fn threads_and_connections(text: &str) -> (Option<u64>, Option<u64>) {
    let Some(line) = text.lines().map(str::trim).find(|l| l.contains(" threads and ")) else {
        return (None, None);
    };
    let mut words = line.split_whitespace();
    let threads = words.next().and_then(|w| w.parse().ok());
    let connections = words.nth(2).and_then(|w| w.parse().ok());
    (threads, connections)
}

/// A `Thread Stats` row (`Latency 614.83us 1.16ms 9.00ms 85.42%`); `None` when absent.
fn thread_stat(text: &str, name: &str, value: fn(&str) -> Option<f64>) -> Result<Option<ThreadStat>, ParseError> {
    let Some(line) = text.lines().find(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(name) && words.clone().count() == 4
    }) else {
        return Ok(None);
    };
    let bad = || ParseError::new(TOOL, format!("bad {name} row `{}`", line.trim()));
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    let [avg, stdev, max, pct] = words.as_slice() else {
        return Err(bad());
    };
    Ok(Some(ThreadStat {
        avg: value(avg).ok_or_else(bad)?,
        stdev: value(stdev).ok_or_else(bad)?,
        max: value(max).ok_or_else(bad)?,
        within_stdev_pct: percent(pct).ok_or_else(bad)?,
    }))
}

/// The lines after `Latency Distribution` of the form `50%   78.00us`.
fn distribution(text: &str) -> Result<Vec<LatencyPoint>, ParseError> {
    let mut lines = text.lines().skip_while(|l| l.trim() != "Latency Distribution");
    if lines.next().is_none() {
        return Ok(Vec::new());
    }
    let mut points = Vec::new();
    for line in lines {
        let mut words = line.split_whitespace();
        let (Some(p), Some(v), None) = (words.next(), words.next(), words.next()) else {
            break;
        };
        let Some(percentile) = percent(p) else { break };
        let us =
            duration_us(v).ok_or_else(|| ParseError::new(TOOL, format!("bad distribution line `{}`", line.trim())))?;
        points.push(LatencyPoint { percentile, us });
    }
    Ok(points)
}

/// `RESULT requests=198601 duration_us=2003689 ...`.
fn result_line(text: &str) -> Result<Option<BTreeMap<String, i64>>, ParseError> {
    let Some(rest) = text.lines().find_map(|l| l.trim().strip_prefix("RESULT ")) else {
        return Ok(None);
    };
    let mut fields = BTreeMap::new();
    for pair in rest.split_whitespace() {
        let parsed = pair.split_once('=').and_then(|(k, v)| Some((k, v.parse().ok()?)));
        let (key, value) = parsed.ok_or_else(|| ParseError::new(TOOL, format!("bad RESULT field `{pair}`")))?;
        fields.insert(key.to_owned(), value);
    }
    Ok(Some(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_run_with_the_result_line() {
        let r = parse_wrk(include_str!("fixtures/wrk-ok.txt")).unwrap();
        assert_eq!(r.url.as_deref(), Some("http://127.0.0.1:28471/"));
        assert_eq!((r.threads, r.connections), (Some(1), Some(16)));
        assert_eq!(r.requests, 198_601);
        assert_eq!(r.duration_us, 2_000_000.0);
        assert!((r.bytes_read - 28.22 * 1024.0 * 1024.0).abs() < 1.0);
        assert_eq!(r.requests_per_sec, 99_117.68);
        let lat = r.latency.unwrap();
        assert_eq!((lat.avg, lat.stdev, lat.max, lat.within_stdev_pct), (614.83, 1160.0, 9000.0, 85.42));
        assert_eq!(r.req_per_sec.unwrap().max, 134_630.0);
        let dist: Vec<(f64, f64)> = r.distribution.iter().map(|p| (p.percentile, p.us)).collect();
        assert_eq!(dist, [(50.0, 78.0), (75.0, 223.0), (90.0, 2560.0), (99.0, 4480.0)]);
        assert_eq!(r.socket_errors, SocketErrors::default());
        assert_eq!(r.non_2xx_3xx, 0);
        let result = r.result.unwrap();
        assert_eq!(result.len(), 12);
        assert_eq!(result["requests"], 198_601);
        assert_eq!(result["p99_us"], 4479);
        assert_eq!(result["max_us"], 9003);
    }

    #[test]
    fn non_2xx_answers_are_counted() {
        let r = parse_wrk(include_str!("fixtures/wrk-404.txt")).unwrap();
        assert_eq!(r.non_2xx_3xx, 98_124);
        assert_eq!(r.result.unwrap()["status"], 98_124);
    }

    #[test]
    fn socket_errors_are_counted() {
        let r = parse_wrk(include_str!("fixtures/wrk-errors.txt")).unwrap();
        let expected = SocketErrors { connect: 0, read: 31_999, write: 0, timeout: 0 };
        assert_eq!(r.socket_errors, expected);
        assert_eq!(r.requests, 694);
        assert!((r.bytes_read - 100.98 * 1024.0).abs() < 1.0);
    }

    #[test]
    fn without_the_lua_hook_there_is_no_result() {
        let text = include_str!("fixtures/wrk-ok.txt");
        let text: String = text.lines().filter(|l| !l.starts_with("RESULT")).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse_wrk(&text).unwrap().result, None);
    }

    #[test]
    fn bad_input_is_an_error_message() {
        let refused = parse_wrk(include_str!("fixtures/wrk-refused.txt")).unwrap_err();
        assert_eq!(refused.message, "no run: unable to connect to 127.0.0.1:28479 Connection refused");
        assert_eq!(parse_wrk("").unwrap_err().message, "no `N requests in T, S read` line");
        let cut = include_str!("fixtures/wrk-ok.txt").replace("Requests/sec:  99117.68", "");
        assert_eq!(parse_wrk(&cut).unwrap_err().message, "no `Requests/sec:` line");
        let bad = include_str!("fixtures/wrk-ok.txt").replace("p50_us=78", "p50_us=x");
        assert_eq!(parse_wrk(&bad).unwrap_err().message, "bad RESULT field `p50_us=x`");
        let bad = include_str!("fixtures/wrk-ok.txt").replace("2.00s,", "2.00 parsecs,");
        assert!(parse_wrk(&bad).unwrap_err().message.starts_with("bad totals line"));
    }
}
