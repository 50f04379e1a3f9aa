//! End-to-end: upstreams that are down, slow or hostile.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn upstream_down_is_502_and_the_connection_stays_usable() {
    each_driver(|d| {
        // A port with nothing listening.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let gw = TestGateway::start(&config(
            d,
            dead,
            "",
            r#"
[[routes]]
name = "home"
match = { path = "/" }
direct_response = { status = 200, body = "up" }
"#,
        ));
        let mut s = connect(gw.addr);
        s.write_all(b"GET /x HTTP/1.1\r\nhost: a\r\n\r\nGET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, 502, "{d}");
        assert_eq!(resp.text(), "Bad Gateway\n", "no internal details");
        assert_eq!(read_response(&mut r, false).unwrap().text(), "up", "{d}: same connection still in sync");
        // The default policy retries a connect failure twice (idempotent GET).
        assert_eq!(gw.total("upstream_connect_errors"), 3);
        assert_eq!(gw.total("upstream_retries"), 2);
    });
}

#[test]
fn slow_upstream_is_504_at_the_route_timeout() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(
            d,
            o.addr(),
            "",
            r#"
[[routes]]
name = "slow"
match = { path_prefix = "/delay" }
cluster = "origin"
timeout = "300ms"
"#,
        ));
        let started = Instant::now();
        let mut s = connect(gw.addr);
        s.write_all(b"GET /delay/3000 HTTP/1.1\r\nhost: a\r\n\r\nGET /bytes/4 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        let took = started.elapsed();
        assert_eq!(resp.status, 504, "{d}");
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(2), "{d}: {took:?}");
        assert_eq!(read_response(&mut r, false).unwrap().body, b"abcd", "{d}: next request served");
        assert_eq!(gw.total("upstream_timeouts"), 1);
    });
}

#[test]
fn hostile_response_heads_are_502_never_passed_on() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", ""));
        for path in ["/bad/cl-and-te", "/bad/dup-cl", "/bad/garbage", "/bad/huge-head", "/bad/no-response"] {
            let mut s = connect(gw.addr);
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\nGET /bytes/5 HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes(),
            )
            .unwrap();
            let mut r = BufReader::new(s);
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.status, 502, "{d}: {path}");
            assert_eq!(resp.text(), "Bad Gateway\n", "{d}: {path}");
            let next = read_response(&mut r, false).unwrap();
            assert_eq!(next.body, b"abcde", "{d}: {path}: client connection still in sync");
        }
    });
}

#[test]
fn broken_response_bodies_close_the_client_connection() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", ""));
        for path in ["/bad/close-mid-body", "/bad/chunked"] {
            let mut s = connect(gw.addr);
            s.write_all(format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
            let mut r = BufReader::new(s);
            // Either the head arrived and the body is cut short (the client sees an incomplete
            // message), or a 502; never a complete-looking response followed by more data.
            match read_response(&mut r, false) {
                Ok(resp) => assert_eq!(resp.status, 502, "{d}: {path}: got a complete response"),
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{d}: {path}: {e}"),
            }
            assert!(is_closed(&mut r), "{d}: {path}");
        }
        // Close-delimited upstream bodies are re-framed as chunked for HTTP/1.1 clients.
        let r = get(gw.addr, "/bad/until-close");
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(r.header("transfer-encoding"), Some("chunked"));
        assert!(!r.body.is_empty());
    });
}

/// An origin that answers exactly one request per connection with a keep-alive response and
/// closes the connection when the next request arrives, without answering it: every pooled
/// connection is stale by the next request, and nothing shows it before the request is sent
/// (a connection the upstream closes while idle is not reused at all: see
/// `an_idle_upstream_connection_that_received_bytes_or_was_closed_is_not_reused`).
fn one_shot_origin() -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let conns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = conns.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            // The next request (or the end): then close, unanswered.
            let _ = s.read(&mut buf);
            drop(s);
        }
    });
    (addr, conns)
}

#[test]
fn a_stale_pooled_connection_is_retried_once_on_a_fresh_one() {
    each_driver(|d| {
        let (addr, conns) = one_shot_origin();
        let gw = TestGateway::start(&config(d, addr, "", ""));
        for i in 0..5 {
            let r = get(gw.addr, "/x");
            assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{d}: request {i}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 5);
        assert_eq!(gw.total("upstream_stale_retries"), 4, "{d}");
        // A POST with a body is not replayed: it gets 502 instead.
        let r = exchange(gw.addr, b"POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\n\r\nz");
        assert_eq!(r.status, 502, "{d}");
    });
}

/// An origin that answers every request `ok`; after the first answer on its first connection
/// it then either sends a second answer nobody asked for (`unsolicited`) or closes that
/// connection, 30 ms later.
fn origin_acting_up_while_idle(unsolicited: bool) -> std::net::SocketAddr {
    origin_scripted(move |s, conn, request| {
        if s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
            return false;
        }
        if (conn, request) != (0, 0) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(30));
        unsolicited && s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nWRONG").is_ok()
    })
}

#[test]
fn an_idle_upstream_connection_that_received_bytes_or_was_closed_is_not_reused() {
    // Bytes on an idle upstream connection are an answer to no request: reused, the connection
    // would hand them to the next request as its answer (the pool of answers poisoned by the
    // upstream). A connection the upstream closed would fail the next request sent on it. Both
    // are noticed when the connection is taken from the pool, and a new one is opened.
    each_driver(|d| {
        for unsolicited in [true, false] {
            let o = origin_acting_up_while_idle(unsolicited);
            let gw = TestGateway::start(&config(d, o, "", ""));
            let mut r = BufReader::new(connect(gw.addr));
            for (i, method) in ["GET", "POST", "GET"].into_iter().enumerate() {
                let body = if method == "POST" { "content-length: 3\r\n\r\nabc" } else { "\r\n" };
                r.get_mut().write_all(format!("{method} /x HTTP/1.1\r\nhost: a\r\n{body}").as_bytes()).unwrap();
                let resp = read_response(&mut r, false).unwrap();
                assert_eq!(
                    (resp.status, resp.text().as_str()),
                    (200, "ok"),
                    "{d}, unsolicited {unsolicited}: request {i}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            // The first connection, dropped when the POST took it; the second served the rest.
            assert_eq!(gw.total("upstream_idle_discards"), 1, "{d}, unsolicited {unsolicited}");
        }
    });
}

#[test]
fn a_reused_upstream_connection_carries_every_kind_of_answer_and_times_out_cleanly() {
    // On io_uring an idle upstream connection waits with the next response's receive already
    // submitted, and that receive reads the response (`upstream::armed`). One client connection
    // here, so every request after the first reuses the upstream connection the one before
    // returned: answers that fit the first receive, that do not (a body larger than its
    // buffer), chunked, bodiless and HEAD answers, one longer than the route's timeout (504,
    // the connection closed) and one after it.
    each_driver(|d| {
        let o = origin();
        let routes = r#"
[[routes]]
name = "slow"
match = { path_prefix = "/delay" }
cluster = "origin"
timeout = "300ms"
"#;
        let gw = TestGateway::start(&config(d, o.addr(), "", routes));
        let mut r = BufReader::new(connect(gw.addr));
        let mut ask = |method: &str, path: &str| {
            r.get_mut().write_all(format!("{method} {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
            let resp = read_response(&mut r, method == "HEAD").unwrap();
            (resp.status, resp.body.len())
        };
        assert_eq!(ask("GET", "/bytes/4"), (200, 4), "{d}");
        // Idle long enough for the connection to be parked (and armed) before it is taken.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ask("GET", "/bytes/100000"), (200, 100_000), "{d}: larger than the first receive");
        assert_eq!(ask("GET", "/chunked/5000"), (200, 5000), "{d}");
        assert_eq!(ask("GET", "/status/204"), (204, 0), "{d}");
        assert_eq!(ask("HEAD", "/bytes/10"), (200, 0), "{d}");
        assert_eq!(ask("GET", "/delay/20"), (200, 2), "{d}: an answer that comes later");
        let started = Instant::now();
        assert_eq!(ask("GET", "/delay/3000").0, 504, "{d}");
        assert!(started.elapsed() < Duration::from_millis(2000), "{d}: at the route's timeout");
        assert_eq!(ask("GET", "/bytes/3"), (200, 3), "{d}: after the timeout");
        assert_eq!(gw.total("upstream_reuses"), 6, "{d}");
        // The first connection, then a new one after the 504 closed the first.
        assert_eq!(gw.total("upstream_connects"), 2, "{d}");
        assert_eq!(gw.total("upstream_idle_discards"), 0, "{d}");
    });
}
