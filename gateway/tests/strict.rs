//! End-to-end: malformed and hostile requests get the exact status, reach nothing, and harm
//! no one else.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::*;

const LIMITS: &str = r#"
[server.limits]
max_request_line_bytes = 1024
max_header_bytes = "4KiB"
max_headers = 20
max_body_bytes = 1000

[server.timeouts]
header_read = "500ms"
idle = "5s"
"#;

/// Sends `raw`, expects `status` then a closed connection, and checks the origin saw nothing.
fn refused(driver: &str, raw: &[u8], status: u16) {
    let o = origin();
    let gw = TestGateway::start(&config(driver, o.addr(), LIMITS, ""));
    let mut s = connect(gw.addr);
    s.write_all(raw).unwrap();
    let mut r = BufReader::new(s);
    let resp = read_response(&mut r, false)
        .unwrap_or_else(|e| panic!("{driver}: no response to {:?}: {e}", String::from_utf8_lossy(raw)));
    assert_eq!(resp.status, status, "{driver}: {:?}", String::from_utf8_lossy(raw));
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(is_closed(&mut r), "{driver}: connection closed after {status}");
    assert_eq!(o.requests(), 0, "{driver}: origin must see nothing for {:?}", String::from_utf8_lossy(raw));
    // Others are unharmed.
    assert_eq!(get(gw.addr, "/bytes/2").status, 200);
}

#[test]
fn smuggling_framing_is_refused_with_400() {
    let cases: &[&[u8]] = &[
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: +3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3a\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3, 3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: xchunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ntransfer-encoding: identity\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.0\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
    ];
    each_driver(|d| {
        for raw in cases {
            refused(d, raw, 400);
        }
    });
}

#[test]
fn malformed_heads_are_refused_with_400() {
    let cases: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\nhost : a\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-bad: a\x01b\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-bad: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-fold: a\r\n b\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n",
        b"G(T / HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET  / HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET / HTTP/1.1\nhost: a\n\n",
        b"GET / HTTP/1.1\rhost: a\r\n\r\n",
        b"GET http://a.example/ HTTP/1.1\r\nhost: b.example\r\n\r\n",
        b"GET /a#frag HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a b\r\n\r\n",
    ];
    each_driver(|d| {
        for raw in cases {
            refused(d, raw, 400);
        }
    });
}

#[test]
fn over_limit_requests_get_414_431_413() {
    each_driver(|d| {
        let long_target = format!("GET /{} HTTP/1.1\r\nhost: a\r\n\r\n", "a".repeat(1100));
        refused(d, long_target.as_bytes(), 414);
        let big_header = format!("GET / HTTP/1.1\r\nhost: a\r\nx-big: {}\r\n\r\n", "b".repeat(5000));
        refused(d, big_header.as_bytes(), 431);
        let mut many = String::from("GET / HTTP/1.1\r\nhost: a\r\n");
        for i in 0..25 {
            many.push_str(&format!("x-h{i}: v\r\n"));
        }
        many.push_str("\r\n");
        refused(d, many.as_bytes(), 431);
        refused(d, b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 1001\r\n\r\n", 413);
        let mut chunked = b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n0\r\n\r\n", 1200, "c".repeat(1200)).as_bytes());
        refused(d, &chunked, 413);
        refused(d, b"GET / HTTP/2.0\r\nhost: a\r\n\r\n", 505);
        refused(d, b"GET / HTTP/1.1\r\nhost: a\r\nexpect: something\r\n\r\n", 417);
    });
}

#[test]
fn chunked_body_over_limit_across_writes_is_413_and_closed() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), LIMITS, ""));
        let mut s = connect(gw.addr);
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        for _ in 0..3 {
            let _ = s.write_all(format!("190\r\n{}\r\n", "x".repeat(400)).as_bytes());
        }
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, 413, "{d}");
        assert!(is_closed(&mut r));
        assert!(o.received().iter().all(|req| req.error.is_some() || req.body.len() <= 1000));
        assert_eq!(o.requests(), 0, "{d}: the origin never got a complete request");
    });
}

#[test]
fn slow_header_is_cut_with_408_while_others_are_served() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), LIMITS, ""));
        let mut slow = connect(gw.addr);
        slow.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n").unwrap();
        let started = Instant::now();
        // Meanwhile a well-behaved client is served.
        for _ in 0..5 {
            assert_eq!(get(gw.addr, "/bytes/3").status, 200);
        }
        let mut r = BufReader::new(slow);
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, 408, "{d}");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(400) && waited < Duration::from_secs(5), "{d}: {waited:?}");
        assert!(is_closed(&mut r));
        assert_eq!(gw.total("header_read_timeouts"), 1);
        // A connection that never sends anything is closed silently.
        let mut idle = connect(gw.addr);
        let mut buf = Vec::new();
        let n = idle.read_to_end(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "{d}: silent close for an empty connection");
    });
}

#[test]
fn upgrade_h2c_is_never_tunnelled() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), LIMITS, ""));
        let r = exchange(gw.addr, b"GET /headers HTTP/1.1\r\nhost: a\r\nconnection: upgrade, http2-settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n");
        assert_eq!(r.status, 200, "{d}: served as plain HTTP/1.1");
        let req = o.received().pop().unwrap();
        assert_eq!(req.header("upgrade"), None);
        assert_eq!(req.header("http2-settings"), None);
    });
}

#[test]
fn idle_keep_alive_connections_close_after_the_idle_timeout_counted_from_the_last_request() {
    // The idle wait runs on the worker's coarse timer (100 ms resolution): never early, and at
    // most about two ticks late.
    const IDLE: &str = "\n[server.timeouts]\nheader_read = \"5s\"\nidle = \"600ms\"\n";
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), IDLE, ""));
        let request = b"GET /bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n";
        // Busy: a request every 200 ms for longer than the idle timeout keeps the connection.
        let mut busy = BufReader::new(connect(gw.addr));
        for i in 0..6 {
            busy.get_mut().write_all(request).unwrap();
            assert_eq!(read_response(&mut busy, false).unwrap().status, 200, "{d}: request {i}");
            std::thread::sleep(Duration::from_millis(200));
        }
        // Idle after one request: closed once the idle timeout (not header_read) has passed.
        let started = Instant::now();
        busy.get_mut().write_all(request).unwrap();
        assert_eq!(read_response(&mut busy, false).unwrap().status, 200, "{d}");
        assert!(is_closed(&mut busy), "{d}: idle connection closed");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(600) && waited < Duration::from_secs(3), "{d}: {waited:?}");
        // Others are unharmed.
        assert_eq!(get(gw.addr, "/bytes/2").status, 200);
    });
}
