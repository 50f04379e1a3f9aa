//! ring-probe (the benchmark relay of `loadtests/bench/ring-probe.sh`) relays keep-alive
//! requests to the bundled origin with each of its ring levers, so that the benchmark measures
//! a relay that works: answers whole and in order, on several connections at once, and a client
//! that leaves does not stop it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loadtests::{Origin, OriginConfig};

struct Probe {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts ring-probe with `flags` in front of `origin`; `None` (with a note) where this machine
/// has io_uring turned off.
fn start(origin: &Origin, flags: &[&str]) -> Option<Probe> {
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|v| v.trim() != "0") {
        eprintln!("skipped: io_uring is disabled on this machine (kernel.io_uring_disabled)");
        return None;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ring-probe"))
        .args(["--listen", "127.0.0.1:0", "--upstream", &origin.addr().to_string()])
        .args(flags)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first
        .strip_prefix("ring-probe: listening on ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("ring-probe {flags:?} did not start: {first}"))
        .parse()
        .unwrap();
    Some(Probe { child, addr })
}

/// Sends `n` GETs one after the other on one connection; each answer must be the origin's
/// (`body`).
fn exchange(addr: SocketAddr, n: usize, body: &[u8]) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for i in 0..n {
        // One write per request, as load generators send them.
        conn.write_all(format!("GET /r{i} HTTP/1.1\r\nHost: probe\r\n\r\n").as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            conn.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap();
        let mut got = vec![0; len];
        conn.read_exact(&mut got).unwrap();
        assert!(got == body, "answer {i}: {len} bytes, not the origin's {}", body.len());
    }
}

#[test]
fn every_variant_relays_keep_alive_requests_on_several_connections() {
    let origin = Origin::spawn("127.0.0.1:0", OriginConfig::default()).unwrap();
    let variants: [&[&str]; 7] = [
        &[],
        &["--poll-first"],
        &["--fixed-files"],
        &["--multishot"],
        &["--skip-send-cqe"],
        &["--wait", "4", "--wait-us", "50"],
        &["--multishot", "--fixed-files", "--poll-first", "--wait", "2"],
    ];
    for flags in variants {
        let Some(probe) = start(&origin, flags) else { return };
        let addr = probe.addr;
        // A client that leaves at once first: the relay serves on.
        drop(TcpStream::connect(addr).unwrap());
        let clients: Vec<_> = (0..8).map(|_| std::thread::spawn(move || exchange(addr, 50, b"ok"))).collect();
        for c in clients {
            c.join().unwrap_or_else(|_| panic!("a client failed through ring-probe {flags:?}"));
        }
        exchange(addr, 3, b"ok");
    }
    assert_eq!(origin.requests(), 7 * (8 * 50 + 3));
}

/// Answers larger than the first receive: read in further receives (`--head-read`), or their
/// rest spliced through a pipe (`--splice`); a small answer is read whole by the first receive
/// and sent as it came, so both kinds go through each variant.
#[test]
fn large_answers_are_relayed_whole_with_a_short_first_receive_and_spliced() {
    for size in [16 * 1024, 60 * 1024, 200 * 1024, 100] {
        let origin = Origin::spawn("127.0.0.1:0", OriginConfig { body_size: size, ..OriginConfig::default() }).unwrap();
        let body: Vec<u8> = b"ok".iter().copied().cycle().take(size).collect();
        let variants: [&[&str]; 3] =
            [&["--head-read", "4096"], &["--head-read", "4096", "--splice"], &["--head-read", "512", "--splice"]];
        for flags in variants {
            let Some(probe) = start(&origin, flags) else { return };
            let addr = probe.addr;
            let clients: Vec<_> = (0..4)
                .map(|_| {
                    let body = body.clone();
                    std::thread::spawn(move || exchange(addr, 50, &body))
                })
                .collect();
            for c in clients {
                c.join().unwrap_or_else(|_| panic!("a client failed through ring-probe {flags:?} ({size} bytes)"));
            }
        }
        assert_eq!(origin.requests(), 3 * 4 * 50);
    }
}
