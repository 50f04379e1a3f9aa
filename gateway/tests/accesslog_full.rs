//! End-to-end: an access log on a full disk. The log path is a symlink to `/dev/full` (every
//! write fails with ENOSPC): requests are served as before, nothing panics, the lost lines and
//! failed writes are counted, the failure is logged once (not per line), and when the path
//! points at a writable file again, lines flow again without a reload.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::process::{GatewayProcess, TempDir};
use common::*;

fn cfg(log: &std::path::Path) -> String {
    format!(
        r#"
[server]
workers = 1
admin = {{ address = "127.0.0.1:0" }}
watch = false

[server.access_log]
path = "{}"

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "home"
direct_response = {{ status = 200, body = "home" }}
"#,
        log.display()
    )
}

/// The value of the sample `series` (exact text before the value) in the admin's /metrics.
fn metric(admin: SocketAddr, series: &str) -> f64 {
    let text = get(admin, "/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// `n` requests on one keep-alive connection, each answered 200.
fn serve(addr: SocketAddr, n: usize) {
    let mut s = connect(addr);
    let mut r = BufReader::new(s.try_clone().unwrap());
    for i in 0..n {
        s.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let resp = read_response(&mut r, false).unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"home"[..]), "request {i}");
    }
}

#[test]
fn a_full_disk_drops_and_counts_lines_logs_once_and_recovers() {
    let dir = TempDir::new("alogfull");
    let log = dir.path("access.log");
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(&log)).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();

    // Several worker ticks' worth of requests: several batches, each write failing.
    for _ in 0..5 {
        serve(p.listener, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    let dropped = || metric(admin, r#"gateway_access_log_lines_total{result="dropped"}"#);
    assert!(wait_until(Duration::from_secs(5), || dropped() >= 1000.0), "dropped {}", dropped());
    let errors = metric(admin, "gateway_access_log_write_errors_total");
    assert!(errors >= 2.0, "each failed batch write is counted: {errors}");
    assert_eq!(metric(admin, r#"gateway_access_log_lines_total{result="written"}"#), 0.0);
    // Logged once for the whole episode (a reminder at most once a minute), never per line.
    assert_eq!(p.log_count("access log: write failed"), 1, "{}", p.log_text());
    assert!(!p.log_contains("panicked"), "{}", p.log_text());

    // The path becomes a writable file: the writer reopens it after a failed write (at most
    // once a second) and lines flow again.
    std::fs::remove_file(&log).unwrap();
    std::fs::write(&log, b"").unwrap();
    let written = || metric(admin, r#"gateway_access_log_lines_total{result="written"}"#);
    let flowing = wait_until(Duration::from_secs(10), || {
        serve(p.listener, 20);
        written() > 0.0
    });
    assert!(flowing, "lines flow again after the target became writable:\n{}", p.log_text());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.lines().count() >= 1 && text.lines().all(|l| l.contains(r#""path":"/""#) && l.contains(r#""status":200"#)),
        "{text}"
    );
    assert!(wait_until(Duration::from_secs(2), || p.log_contains("access log: writing again")), "{}", p.log_text());
    drop(p);
}
