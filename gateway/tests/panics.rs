//! Panic isolation and truthful health: a panic in a request, an HTTP/2 stream or a connection
//! ends only that request, stream or connection (answered 500 where nothing was sent yet) and
//! is counted; `/healthz` fails while a worker is stuck; a worker that dies anyway makes the
//! process drain and exit non-zero on purpose. The faults come from the test-only
//! `fault-injection` feature (`x-gateway-fault`), compiled into test builds only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::process::{GatewayProcess, TempDir};
use common::*;

fn cfg(driver: &str, origin: SocketAddr) -> String {
    config(driver, origin, "", "")
        .replace("admin = false", "admin = { address = \"127.0.0.1:0\" }")
        .replace("address = \"127.0.0.1:0\"\n\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n\n")
}

fn admin(gw: &TestGateway) -> SocketAddr {
    gw.gw.as_ref().unwrap().admin_addr().unwrap()
}

/// The value of one series in the admin's `/metrics`.
fn metric(admin: SocketAddr, series: &str) -> Option<f64> {
    let text = get(admin, "/metrics").text();
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

fn request(fault: &str) -> Vec<u8> {
    format!("GET /x HTTP/1.1\r\nhost: test.local\r\nx-gateway-fault: {fault}\r\n\r\n").into_bytes()
}

#[test]
fn a_panicking_request_is_answered_500_and_other_connections_go_on() {
    let o = origin();
    each_driver(|driver| {
        let gw = TestGateway::start(&cfg(driver, o.addr()));
        // A keep-alive connection opened before the panic, on the same (only) worker.
        let mut before = BufReader::new(connect(gw.addr));
        before.get_mut().write_all(b"GET /a HTTP/1.1\r\nhost: test.local\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut before, false).unwrap().status, 200);

        let mut s = BufReader::new(connect(gw.addr));
        s.get_mut().write_all(&request("panic")).unwrap();
        let resp = read_response(&mut s, false).unwrap();
        assert_eq!(resp.status, 500, "{driver}");
        assert_eq!(resp.header("connection"), Some("close"), "{driver}");
        assert!(is_closed(&mut s), "{driver}: the panicked request's connection closes");

        before.get_mut().write_all(b"GET /b HTTP/1.1\r\nhost: test.local\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut before, false).unwrap().status, 200, "{driver}: the old connection serves on");
        assert_eq!(get(gw.addr, "/c").status, 200, "{driver}: new connections are served");
        assert_eq!(gw.total("panics_request"), 1, "{driver}");
        assert_eq!(metric(admin(&gw), "gateway_panics_total{boundary=\"request\"}"), Some(1.0));
        assert_eq!(get(admin(&gw), "/healthz").status, 200, "{driver}: a contained panic leaves the worker healthy");
        assert!(wait_until(Duration::from_secs(5), || gw.total("connections_active") == 1), "{driver}");
        assert_eq!(gw.total("requests_active"), 0, "{driver}");
    });
}

#[test]
fn a_panic_outside_the_request_closes_only_its_connection() {
    let o = origin();
    each_driver(|driver| {
        let gw = TestGateway::start(&cfg(driver, o.addr()));
        let mut other = BufReader::new(connect(gw.addr));
        other.get_mut().write_all(b"GET /a HTTP/1.1\r\nhost: test.local\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut other, false).unwrap().status, 200);

        // The response is written; the panic comes when the request is accounted, in the
        // connection's task.
        let mut s = BufReader::new(connect(gw.addr));
        s.get_mut().write_all(&request("panic-after-request")).unwrap();
        assert_eq!(read_response(&mut s, false).unwrap().status, 200, "{driver}");
        assert!(is_closed(&mut s), "{driver}: the connection whose task panicked is closed");

        other.get_mut().write_all(b"GET /b HTTP/1.1\r\nhost: test.local\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut other, false).unwrap().status, 200, "{driver}");
        assert_eq!(gw.total("panics_connection"), 1, "{driver}");
        // The panicked connection was given back: the active count (and the accept limit) is right.
        assert!(wait_until(Duration::from_secs(5), || gw.total("connections_active") == 1), "{driver}");
    });
}

#[test]
fn a_panicking_http2_stream_gets_500_and_its_connection_serves_on() {
    let o = origin();
    each_driver(|driver| {
        let gw = TestGateway::start(&cfg(driver, o.addr()));
        let rt = clients::runtime();
        rt.block_on(async {
            let mut send = clients::h2_connect(gw.addr, None).await;
            let mut req = clients::h2_get("http", "test.local", "/x");
            req.headers_mut().insert("x-gateway-fault", http::HeaderValue::from_static("panic"));
            let resp = clients::h2_request(&mut send, req, None).await.unwrap();
            assert_eq!(resp.status, 500, "{driver}");
            let again =
                clients::h2_request(&mut send, clients::h2_get("http", "test.local", "/y"), None).await.unwrap();
            assert_eq!(again.status, 200, "{driver}: the same connection serves the next stream");
        });
        assert_eq!(gw.total("panics_stream"), 1, "{driver}");
        assert_eq!(gw.total("requests_active"), 0, "{driver}");
        assert_eq!(get(gw.addr, "/z").status, 200, "{driver}");
    });
}

#[test]
fn healthz_fails_while_a_worker_is_stuck_and_recovers() {
    let o = origin();
    each_driver(|driver| {
        let gw = TestGateway::start(&cfg(driver, o.addr()));
        let admin = admin(&gw);
        assert_eq!(get(admin, "/healthz").status, 200);
        // The worker blocks its thread for 4 s at its next tick (the stall limit is 2 s).
        assert_eq!(exchange(gw.addr, &request("stall-worker=4000")).status, 200);
        let mut seen = None;
        assert!(
            wait_until(Duration::from_secs(10), || {
                let r = get(admin, "/healthz");
                let stuck = r.status == 503;
                if stuck {
                    seen = Some(r.text());
                }
                stuck
            }),
            "{driver}: /healthz never failed while the worker was stuck"
        );
        let text = seen.unwrap();
        assert!(text.contains("worker 0: no tick for"), "{driver}: {text}");
        assert_eq!(metric(admin, "gateway_workers_unhealthy"), Some(1.0), "{driver}");
        assert!(
            wait_until(Duration::from_secs(15), || get(admin, "/healthz").status == 200),
            "{driver}: /healthz did not recover"
        );
        assert_eq!(get(gw.addr, "/after").status, 200);
    });
}

#[test]
fn a_dead_worker_fails_healthz_in_process() {
    let o = origin();
    each_driver(|driver| {
        let mut toml = cfg(driver, o.addr());
        toml = toml.replace("workers = 1", "workers = 2");
        let gw = TestGateway::start(&toml);
        let admin = admin(&gw);
        // Whichever worker takes the connection dies at its next tick.
        assert_eq!(exchange(gw.addr, &request("panic-worker")).status, 200);
        let handle = gw.gw.as_ref().unwrap();
        assert!(wait_until(Duration::from_secs(10), || !handle.dead_workers().is_empty()), "{driver}");
        let r = get(admin, "/healthz");
        assert_eq!(r.status, 503, "{driver}");
        assert!(r.text().contains("died"), "{driver}: {}", r.text());
    });
}

#[test]
fn a_dead_worker_makes_the_process_drain_and_exit_with_status_70() {
    let o = origin();
    let dir = TempDir::new("dead-worker");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("auto", o.addr()).replace("drain_timeout = \"5s\"", "drain_timeout = \"1s\"")).unwrap();
    let mut p = GatewayProcess::start(&path, true);
    assert_eq!(exchange(p.listener, &request("panic-worker")).status, 200);
    let status = p.wait_exit(Duration::from_secs(30)).expect("the gateway exits after a worker died");
    assert_eq!(status.code(), Some(70), "{}", p.log_text());
    assert!(p.log_contains("panic: fault injection: panic in worker 0's tick"), "{}", p.log_text());
    assert!(p.log_contains("gateway/src/pipeline/fault.rs:"), "the panic's location is logged:\n{}", p.log_text());
    assert!(p.log_contains("worker thread died"), "{}", p.log_text());
}
