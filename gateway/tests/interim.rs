//! End-to-end: 1xx interim responses from an HTTP/1.1 origin (RFC 9110 §15.2). HTTP/1.1 clients
//! get them before the final response (abuse.rs `early_hints_are_forwarded_to_http11_clients`),
//! HTTP/1.0 clients never do, HTTP/2 clients get them as informational HEADERS, and an origin
//! that sends more than 10 gets a 502. The same from an HTTP/2 origin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::net::SocketAddr;

use common::clients::*;
use common::*;

const HINTS: &[u8] = b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n";
const FINAL: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

fn hints_then_final(n: usize) -> Vec<u8> {
    let mut r = HINTS.repeat(n);
    r.extend_from_slice(FINAL);
    r
}

/// Everything the gateway sends on one connection until it closes it.
fn read_all(addr: SocketAddr, raw: &[u8]) -> String {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn http10_clients_get_only_the_final_response() {
    each_driver(|driver| {
        let gw = TestGateway::start(&config(driver, origin_replying(hints_then_final(2)), "", ""));
        let got = read_all(gw.addr, b"GET / HTTP/1.0\r\nhost: a\r\n\r\n");
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{driver}: {got:?}");
        assert!(!got.contains("103") && !got.contains("link:"), "{driver}: no interim response: {got:?}");
        assert!(got.ends_with("\r\n\r\nok"), "{driver}: {got:?}");
        // The same origin, an HTTP/1.1 client: both interim responses, then the final one.
        let got = read_all(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
        assert_eq!(
            got.matches("HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n").count(),
            2,
            "{got:?}"
        );
        assert!(got.contains("\r\n\r\nHTTP/1.1 200 OK\r\n") && got.ends_with("ok"), "{driver}: {got:?}");
    });
}

#[test]
fn more_than_ten_interim_responses_get_502() {
    each_driver(|driver| {
        let gw = TestGateway::start(&config(driver, origin_replying(hints_then_final(11)), "", ""));
        let mut s = connect(gw.addr);
        s.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        // Ten interim responses were forwarded before the eleventh gave the origin away; the
        // final answer is the gateway's 502 (read_response skips 1xx heads).
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, 502, "{driver}: an endless 1xx stream is an invalid response");
        assert_eq!(gw.total("upstream_protocol_errors"), 1, "{driver}");
        let got = read_all(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
        assert_eq!(got.matches("HTTP/1.1 103 ").count(), 10, "{driver}: {got:?}");
        assert!(got.contains("\r\n\r\nHTTP/1.1 502 "), "{driver}: {got:?}");
        // Ten is accepted.
        let gw = TestGateway::start(&config(driver, origin_replying(hints_then_final(10)), "", ""));
        let got = read_all(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
        assert_eq!(got.matches("HTTP/1.1 103 ").count(), 10, "{driver}");
        assert!(got.contains("HTTP/1.1 200 OK\r\n") && got.ends_with("ok"), "{driver}: {got:?}");
    });
}

#[test]
fn an_upstream_100_is_forwarded_unless_the_gateway_answered_expect_itself() {
    let reply = [&b"HTTP/1.1 100 Continue\r\n\r\n"[..], HINTS, FINAL].concat();
    let gw = TestGateway::start(&config("io_uring", origin_replying(reply), "", ""));
    // No Expect: the upstream's 100 is an interim response like any other.
    let got = read_all(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
    assert!(got.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"), "{got:?}");
    // Expect: 100-continue: the gateway answers it (Expect is not forwarded); the upstream's 100
    // would be a second one and is dropped.
    let mut s = connect(gw.addr);
    s.write_all(
        b"POST / HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 2\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    let mut first = [0u8; 25];
    s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"hi").unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.starts_with("HTTP/1.1 103 Early Hints\r\n") && !rest.contains("100 Continue"), "{rest:?}");
    assert!(rest.contains("HTTP/1.1 200 OK\r\n") && rest.ends_with("ok"), "{rest:?}");
}

#[test]
fn http2_clients_get_interim_responses_as_informational_headers() {
    let addr = origin_replying(hints_then_final(1));
    let toml = config("io_uring", addr, "", "")
        .replace("address = \"127.0.0.1:0\"\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n");
    let gw = TestGateway::start(&toml);
    runtime().block_on(async {
        let send = h2_connect(gw.addr, None).await;
        let mut ready = send.ready().await.unwrap();
        let (mut resp, _) = ready.send_request(h2_get("http", "a", "/"), true).unwrap();
        let info = std::future::poll_fn(|cx| resp.poll_informational(cx)).await;
        let info = info.expect("an informational response").unwrap();
        assert_eq!(info.status(), 103);
        assert_eq!(info.headers()["link"], "</a.css>; rel=preload");
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
    });
}

/// A gateway (h2c and HTTP/1.1 listener) whose default route goes to an HTTP/2 origin.
fn h2_origin_gateway(origin: &common::h2origin::H2Origin) -> TestGateway {
    let text = config("io_uring", origin.addr, "", "")
        .replace("address = \"127.0.0.1:0\"\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n")
        .replace("connect_timeout = \"1s\"\n", "connect_timeout = \"1s\"\nprotocol = \"h2\"\n");
    TestGateway::start(&text)
}

#[test]
fn interim_responses_of_http2_origins_are_forwarded_too() {
    let origin = common::h2origin::H2Origin::start(None);
    let gw = h2_origin_gateway(&origin);
    // HTTP/1.1 client: two hints, then the final response.
    let got = read_all(gw.addr, b"GET /hints/2 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
    assert_eq!(got.matches("HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n").count(), 2, "{got:?}");
    assert!(got.contains("\r\n\r\nHTTP/1.1 200 OK\r\n") && got.ends_with("ok"), "{got:?}");
    // HTTP/1.0 client: only the final response.
    let got = read_all(gw.addr, b"GET /hints/2 HTTP/1.0\r\nhost: a\r\n\r\n");
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && !got.contains("103"), "{got:?}");
    // Eleven: 502.
    let got = read_all(gw.addr, b"GET /hints/11 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
    assert_eq!(got.matches("HTTP/1.1 103 ").count(), 10, "{got:?}");
    assert!(got.contains("HTTP/1.1 502 "), "{got:?}");
    // HTTP/2 client.
    runtime().block_on(async {
        let send = h2_connect(gw.addr, None).await;
        let mut ready = send.ready().await.unwrap();
        let (mut resp, _) = ready.send_request(h2_get("http", "a", "/hints/1"), true).unwrap();
        let info = std::future::poll_fn(|cx| resp.poll_informational(cx)).await;
        let info = info.expect("an informational response").unwrap();
        assert_eq!((info.status().as_u16(), info.headers()["link"].to_str().unwrap()), (103, "</a.css>; rel=preload"));
        assert_eq!(resp.await.unwrap().status(), 200);
    });
}
