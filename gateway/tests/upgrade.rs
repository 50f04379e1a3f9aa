//! Binary upgrade of the real binary under load: SIGUSR2 starts a successor that takes over the
//! listening sockets; the old process drains and exits; no request fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::process::{GatewayProcess, TempDir};
use common::*;

fn write_config(dir: &TempDir, origin: SocketAddr, driver: &str) -> std::path::PathBuf {
    let path = dir.path("gateway.toml");
    let socket = dir.path("upgrade.sock");
    std::fs::write(
        &path,
        format!(
            r#"
[server]
workers = 2
io_driver = "{driver}"
drain_timeout = "5s"
upgrade_socket = "{}"
admin = {{ address = "127.0.0.1:0" }}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "all"
cluster = "origin"
timeout = "5s"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
"#,
            socket.display()
        ),
    )
    .unwrap();
    path
}

/// Counts of a load loop.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
    /// Slowest request, in microseconds (a retry included).
    max_us: AtomicU64,
}

/// One GET on `conn` (opened if `None`). A reused connection that the server closed before
/// any response byte is reopened and the request retried once, as HTTP clients do for
/// idempotent requests (RFC 9112 §9.3.1); anything else that is not a 200 is a failure.
fn get_once(addr: SocketAddr, conn: &mut Option<BufReader<TcpStream>>, tally: &Tally) {
    let started = Instant::now();
    get_with_retry(addr, conn, tally);
    let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    tally.max_us.fetch_max(us, Ordering::Relaxed);
}

fn get_with_retry(addr: SocketAddr, conn: &mut Option<BufReader<TcpStream>>, tally: &Tally) {
    for attempt in 0..2 {
        let reused = conn.is_some();
        let mut r = match conn.take() {
            Some(r) => r,
            None => BufReader::new(connect(addr)),
        };
        let sent = r.get_mut().write_all(b"GET /bytes/64 HTTP/1.1\r\nhost: upgrade.test\r\n\r\n");
        let resp = sent.ok().and_then(|()| read_response(&mut r, false).ok());
        match resp {
            Some(resp) if resp.status == 200 && resp.body.len() == 64 => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                if resp.header("connection") != Some("close") {
                    *conn = Some(r);
                }
                return;
            }
            None if reused && attempt == 0 => {
                tally.retried.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                eprintln!("failed request: {:?}", other.map(|r| r.status));
                tally.failed.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

#[test]
fn sigusr2_upgrade_under_load_loses_no_request() {
    each_driver(upgrade_under_load);
}

fn upgrade_under_load(driver: &str) {
    let o = origin();
    let dir = TempDir::new("upgrade");
    let config = write_config(&dir, o.addr(), driver);
    let mut old = GatewayProcess::start(&config, true);
    let addr = old.listener;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut clients = Vec::new();
    for keep_alive in [false, false, true, true] {
        let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
        clients.push(std::thread::spawn(move || {
            let mut conn = None;
            while !stop.load(Ordering::Relaxed) {
                get_once(addr, &mut conn, &tally);
                if !keep_alive {
                    conn = None;
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(300));
    // A long request in flight on the old process when it starts draining.
    let long = std::thread::spawn(move || {
        let r = exchange(addr, b"GET /delay/1500 HTTP/1.1\r\nhost: upgrade.test\r\n\r\n");
        r.status
    });
    std::thread::sleep(Duration::from_millis(100));
    let before = tally.ok.load(Ordering::Relaxed);
    let started = Instant::now();
    old.signal("USR2");
    assert!(
        wait_until(Duration::from_secs(10), || old.log_contains("the new process serves")),
        "handover:\n{}",
        old.log_text()
    );
    let status = old.wait_exit(Duration::from_secs(8)).expect("the old process exits within the drain timeout");
    let handover = started.elapsed();
    assert!(status.success(), "{status}");
    assert_eq!(long.join().unwrap(), 200, "the long request finished on the old process");
    // The successor serves alone now.
    let at_exit = tally.ok.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let (ok, failed, retried) =
        (tally.ok.load(Ordering::Relaxed), tally.failed.load(Ordering::Relaxed), tally.retried.load(Ordering::Relaxed));
    let max = Duration::from_micros(tally.max_us.load(Ordering::Relaxed));
    eprintln!(
        "upgrade ({driver}): {ok} ok, {failed} failed, {retried} retried on a closed keep-alive connection, slowest request {max:?}, handover and drain {handover:?}"
    );
    let successor = old
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("serving") && l.contains("pid="))
        .filter_map(|l| l.split("pid=").nth(1)?.split_whitespace().next()?.parse::<u32>().ok())
        .find(|pid| *pid != old.child.id());
    if let Some(pid) = successor {
        let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    }
    assert_eq!(failed, 0, "no request failed");
    assert!(max < Duration::from_secs(3), "no request waited on a connection left open by the old process: {max:?}");
    assert!(ok > before && ok > at_exit, "load went on through the upgrade ({before} -> {at_exit} -> {ok})");
    assert!(successor.is_some(), "the successor logged its pid:\n{}", old.log_text());
}
