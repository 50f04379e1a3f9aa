//! Large `Content-Length` bodies between two plain TCP sockets are spliced (`runtime/splice.rs`):
//! the rest of the body after the first read goes socket -> pipe -> socket. These tests hold
//! that path to what the copying path guaranteed, on both I/O drivers: bodies whole, the client
//! and the upstream connection reusable afterwards, a slow client served whole, an upstream
//! that ends a body early or a client that stops reading cut off without harming anyone else.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::*;

const MIB: usize = 1024 * 1024;

#[test]
fn spliced_bodies_leave_the_client_and_upstream_connections_reusable() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", ""));
        let mut r = BufReader::new(connect(gw.addr));
        // Downloads of several sizes around the splice threshold, then small answers, on one
        // client connection: each answer whole, and the next request finds both sockets as
        // they should be (blocking again on io_uring, nothing left in the upstream socket).
        for n in [MIB + 3, 40_000, 65_536 + 32_768, 5, 3 * MIB, 0, 200_001, 10] {
            r.get_mut().write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.status, 200, "{d}: {n}");
            assert!(resp.body == loadtests::origin::pattern(n), "{d}: a {n}-byte body differs");
        }
        // An upload spliced to the upstream (echoed back, spliced again), then a small one.
        for n in [2 * MIB + 1, 7] {
            let body = loadtests::origin::pattern(n);
            let head = format!("POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: {n}\r\n\r\n");
            r.get_mut().write_all(head.as_bytes()).unwrap();
            let writer = {
                let mut s = r.get_ref().try_clone().unwrap();
                let body = body.clone();
                std::thread::spawn(move || s.write_all(&body).unwrap())
            };
            let resp = read_response(&mut r, false).unwrap();
            writer.join().unwrap();
            assert_eq!(resp.status, 200, "{d}: upload of {n}");
            assert!(resp.body == body, "{d}: the echo of a {n}-byte upload differs");
        }
        let conns: std::collections::BTreeSet<u64> = o.received().iter().map(|q| q.connection).collect();
        assert_eq!(conns.len(), 1, "{d}: every request on one upstream connection, reused after each splice");
    });
}

#[test]
fn a_slow_reader_gets_a_spliced_body_whole() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", ""));
        let mut s = connect(gw.addr);
        // A small receive buffer, so that the gateway waits for room many times.
        socket2::SockRef::from(&s).set_recv_buffer_size(16 * 1024).unwrap();
        let n = 4 * MIB;
        s.write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut chunk = vec![0; 64 * 1024];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "{d}: the body did not arrive in 30 s");
            let k = s.read(&mut chunk).unwrap();
            assert!(k > 0, "{d}: closed after {} bytes", got.len());
            got.extend_from_slice(&chunk[..k]);
            std::thread::sleep(Duration::from_micros(300));
            let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
            if head_end.is_some_and(|h| got.len() - h >= n) {
                break;
            }
        }
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(got.starts_with(b"HTTP/1.1 200"), "{d}");
        assert!(got[head_end..] == loadtests::origin::pattern(n)[..], "{d}: the slowly read body differs");
    });
}

/// An origin that answers with a head announcing `announced` body bytes, sends `sent` of them
/// and closes the connection.
fn origin_cutting_short(announced: usize, sent: usize) -> std::net::SocketAddr {
    origin_scripted(move |s, _, _| {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {announced}\r\n\r\n");
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(&loadtests::origin::pattern(sent));
        false
    })
}

#[test]
fn an_upstream_that_ends_a_spliced_body_early_closes_the_client_connection() {
    each_driver(|d| {
        let short = origin_cutting_short(MIB, 300 * 1024);
        let o = origin();
        let routes = format!(
            r#"
[[routes]]
name = "short"
match = {{ path_prefix = "/short" }}
cluster = "short"

[[clusters]]
name = "short"
endpoints = ["{short}"]
"#
        );
        let gw = TestGateway::start(&config(d, o.addr(), "", &routes));
        let mut s = connect(gw.addr);
        s.write_all(b"GET /short HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut got = Vec::new();
        let started = Instant::now();
        // The client gets the head and what the upstream sent, then the connection closes:
        // a response that cannot be completed must not look complete.
        s.read_to_end(&mut got).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{d}: closed only after {:?}", started.elapsed());
        let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(got.starts_with(b"HTTP/1.1 200"), "{d}");
        let body = got.len() - head_end;
        assert!(body <= 300 * 1024, "{d}: {body} body bytes, more than the upstream sent");
        assert!(got[head_end..] == loadtests::origin::pattern(300 * 1024)[..body], "{d}: the bytes relayed differ");
        assert!(
            wait_until(Duration::from_secs(2), || gw.total("upstream_protocol_errors") >= 1),
            "{d}: the truncated body is counted as the upstream's protocol error"
        );
        // Everyone else is served as before.
        let r = get(gw.addr, "/bytes/100000");
        assert_eq!(r.status, 200, "{d}");
        assert!(r.body == loadtests::origin::pattern(100_000), "{d}");
    });
}

#[test]
fn a_client_that_stops_reading_a_spliced_body_is_cut_off_at_the_write_timeout() {
    each_driver(|d| {
        let o = origin();
        let extra = "[server.timeouts]\nbody_io = \"1s\"\n";
        let gw = TestGateway::start(&config(d, o.addr(), extra, ""));
        let mut s = connect(gw.addr);
        socket2::SockRef::from(&s).set_recv_buffer_size(16 * 1024).unwrap();
        let n = 64 * MIB;
        s.write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
        // Not reading: the gateway's writes stall, and after body_io it gives the client up.
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(2500));
        // Meanwhile and after, other clients are served.
        let r = get(gw.addr, "/bytes/70000");
        assert_eq!(r.status, 200, "{d}");
        assert!(r.body == loadtests::origin::pattern(70_000), "{d}");
        // What the stalled client can still read ends well before the body's end.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut total = 0usize;
        let mut chunk = vec![0; 256 * 1024];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(k) => total += k,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("{d}: reading the rest after {total} bytes: {e}"),
            }
        }
        assert!(total < n, "{d}: the whole body ({total} bytes) arrived, the client was not cut off");
        assert!(started.elapsed() < Duration::from_secs(15), "{d}");
    });
}

#[test]
fn a_body_that_finds_no_pipe_is_copied_instead() {
    // At the descriptor limit no pipe can be made; the body then goes the copying way, whole.
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", ""));
        let mut r = BufReader::new(connect(gw.addr));
        for fault in [true, false] {
            let n = MIB + 11;
            let field = if fault { "x-gateway-fault: splice-pipe-unavailable\r\n" } else { "" };
            r.get_mut().write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a\r\n{field}\r\n").as_bytes()).unwrap();
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.status, 200, "{d}");
            assert!(resp.body == loadtests::origin::pattern(n), "{d}: the body differs (fault {fault})");
        }
    });
}

/// An origin whose first answer (a `Content-Length` body of `len` bytes) is followed, in the
/// same write, by a second answer nobody asked for; every later request gets `ok`.
fn origin_with_unsolicited_answer(len: usize) -> std::net::SocketAddr {
    let answered = std::sync::atomic::AtomicBool::new(false);
    origin_scripted(move |s, _, _| {
        let mut out = Vec::new();
        if !answered.swap(true, std::sync::atomic::Ordering::SeqCst) {
            out.extend_from_slice(format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n").as_bytes());
            out.extend_from_slice(&loadtests::origin::pattern(len));
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nWRONG");
        } else {
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        }
        s.write_all(&out).is_ok()
    })
}

#[test]
fn bytes_after_a_spliced_body_keep_its_upstream_connection_out_of_the_pool() {
    // What follows a body in the upstream's socket is no answer to any request: the connection
    // must not serve the next one (it would get "WRONG"). The copying path sees such bytes in
    // the read that ends the body; the spliced path looks for them after the body.
    each_driver(|d| {
        let o = origin_with_unsolicited_answer(300 * 1024);
        let gw = TestGateway::start(&config(d, o, "", ""));
        let mut r = BufReader::new(connect(gw.addr));
        for i in 0..3 {
            r.get_mut().write_all(b"GET /x HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.status, 200, "{d}: request {i}");
            if i == 0 {
                assert!(resp.body == loadtests::origin::pattern(300 * 1024), "{d}: the first body differs");
            } else {
                assert!(resp.body == b"ok", "{d}: request {i} got {} bytes, not its own answer", resp.body.len());
            }
        }
    });
}
