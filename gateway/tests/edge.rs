//! End-to-end: the edge in front of real services. A fake layer-4 balancer sends PROXY protocol
//! v1 and v2 headers (before HTTP and before the TLS ClientHello); the real client address
//! reaches X-Forwarded-For, the rate-limit key and the access log; a bad, missing or late header
//! closes the connection and is counted; an untrusted client's forwarding fields are replaced,
//! a trusted proxy's believed. Both I/O drivers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::clients::{client_config, h2_connect_after, h2_request, runtime, tls_connect_after, ClientOpts};
use common::process::TempDir;
use common::tls::TestPki;
use common::*;

/// One worker, listener `main` with `listener_extra`, an access log at `log`, a rate-limited
/// route `/limited` (keyed by client address, 1 request per burst) and the origin.
fn cfg(driver: &str, origin: SocketAddr, listener_extra: &str, log: &std::path::Path) -> String {
    format!(
        r#"
[server]
workers = 1
io_driver = "{driver}"
admin = false
drain_timeout = "5s"
log_level = "warn"
[server.access_log]
format = "json"
path = "{log}"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
{listener_extra}

[[routes]]
name = "limited"
match = {{ path_prefix = "/limited" }}
cluster = "origin"
rate_limit = {{ rate = 0.01, burst = 1, key = "client_ip" }}

[[routes]]
name = "default"
cluster = "origin"
timeout = "2s"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
connect_timeout = "1s"
"#,
        log = log.display()
    )
}

fn v1(src: &str, sport: u16, dport: u16) -> Vec<u8> {
    format!("PROXY TCP4 {src} 127.0.0.1 {sport} {dport}\r\n").into_bytes()
}

fn v2(src: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x10".to_vec();
    h.extend_from_slice(&src);
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0x04, 0x00, 0x01, b'x']); // a TLV (NOOP), skipped
    h
}

/// Sends `prefix` then `request` on a new connection; the response.
fn proxied(addr: SocketAddr, prefix: &[u8], request: &[u8]) -> Resp {
    let mut s = connect(addr);
    let mut raw = prefix.to_vec();
    raw.extend_from_slice(request);
    s.write_all(&raw).unwrap();
    let mut r = BufReader::new(s);
    read_response(&mut r, false).expect("response")
}

/// Sends `bytes` and expects the gateway to close the connection without a byte of answer.
fn closed_without_answer(addr: SocketAddr, bytes: &[u8]) {
    let mut s = connect(addr);
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.is_empty(), "answered: {:?}", String::from_utf8_lossy(&got));
}

fn log_entries(log: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let lines = || std::fs::read_to_string(log).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();
    assert!(wait_until(Duration::from_secs(5), || lines().len() >= n), "{:?}", lines());
    lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const GET: &[u8] = b"GET /limited HTTP/1.1\r\nhost: app.local\r\nx-forwarded-for: 6.6.6.6\r\n\r\n";

#[test]
fn proxy_v1_and_v2_headers_give_the_real_client_address_everywhere() {
    each_driver(|d| {
        let o = origin();
        let dir = TempDir::new("edge-pp");
        let log = dir.path("access.log");
        let gw = TestGateway::start(&cfg(d, o.addr(), "proxy_protocol = \"any\"", &log));
        let r = proxied(gw.addr, &v1("203.0.113.7", 40001, 8443), GET);
        assert_eq!(r.status, 200, "{d}");
        let seen = o.received().pop().unwrap();
        assert_eq!(seen.header("x-forwarded-for"), Some("203.0.113.7"), "{d}: the real address, the spoof dropped");
        assert_eq!(seen.header("x-forwarded-port"), Some("8443"), "{d}: the balancer's destination port");
        // The same client through a v2 header: the same rate-limit key, so 429.
        let r = proxied(gw.addr, &v2([203, 0, 113, 7], 40002, 443), GET);
        assert_eq!(r.status, 429, "{d}: keyed by the real address");
        // Another client behind the same balancer has its own bucket.
        let r = proxied(gw.addr, &v2([198, 51, 100, 2], 40003, 443), GET);
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(o.received().pop().unwrap().header("x-forwarded-for"), Some("198.51.100.2"));
        // v2 LOCAL (the balancer's own health check): the connection's address stands.
        let local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";
        let r = proxied(gw.addr, local, b"GET /x HTTP/1.1\r\nhost: a\r\n\r\n");
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(o.received().pop().unwrap().header("x-forwarded-for"), Some("127.0.0.1"));
        let clients: Vec<String> =
            log_entries(&log, 4).iter().map(|e| e["client"].as_str().unwrap().to_owned()).collect();
        assert_eq!(clients, ["203.0.113.7", "203.0.113.7", "198.51.100.2", "127.0.0.1"], "{d}");
        assert_eq!(gw.total("pp_failed_missing"), 0);
    });
}

#[test]
fn missing_malformed_and_late_proxy_headers_close_the_connection_and_are_counted() {
    each_driver(|d| {
        let o = origin();
        let dir = TempDir::new("edge-ppbad");
        let log = dir.path("access.log");
        let extra = "proxy_protocol = \"v1\"\nproxy_protocol_timeout = \"300ms\"";
        let gw = TestGateway::start(&cfg(d, o.addr(), extra, &log));
        closed_without_answer(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\n\r\n");
        closed_without_answer(gw.addr, &v2([1, 2, 3, 4], 1, 2));
        closed_without_answer(gw.addr, b"PROXY TCP4 1.2.3.400 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\n\r\n");
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(200, b'x');
        closed_without_answer(gw.addr, &long);
        // A header that never ends: closed after the timeout.
        closed_without_answer(gw.addr, b"PROXY TCP4 1.2.3.4");
        assert!(wait_until(Duration::from_secs(2), || gw.total("pp_failed_timeout") == 1), "{d}");
        assert_eq!(gw.total("pp_failed_missing"), 2, "{d}: plain HTTP and a v2 header on a v1 listener");
        assert_eq!((gw.total("pp_failed_bad_v1"), gw.total("pp_failed_too_long")), (1, 1), "{d}");
        assert!(o.received().is_empty(), "{d}: nothing reached the origin");
        // Others are unharmed.
        let r = proxied(gw.addr, &v1("192.0.2.9", 5, 80), b"GET /ok HTTP/1.1\r\nhost: a\r\n\r\n");
        assert_eq!(r.status, 200, "{d}");
    });
}

#[test]
fn the_proxy_header_precedes_the_tls_client_hello() {
    each_driver(|d| {
        let o = origin();
        let dir = TempDir::new("edge-pptls");
        let pki = TestPki::new();
        let (cert, key) = pki.write_leaf(dir.path("").as_path(), "site", &["app.test"]);
        let log = dir.path("access.log");
        let extra = format!(
            "proxy_protocol = \"any\"\ntls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}",
            cert.display(),
            key.display()
        );
        let gw = TestGateway::start(&cfg(d, o.addr(), &extra, &log));
        let config =
            client_config(&pki.ca_pem(), &ClientOpts { alpn: vec![b"http/1.1".to_vec()], ..Default::default() });
        let mut s = tls_connect_after(gw.addr, &v2([203, 0, 113, 50], 1234, 443), "app.test", config.clone())
            .expect("handshake after the PROXY header");
        s.write_all(b"GET /tls HTTP/1.1\r\nhost: app.test\r\n\r\n").unwrap();
        let r = read_response(&mut BufReader::new(s), false).unwrap();
        assert_eq!(r.status, 200, "{d}");
        let seen = o.received().pop().unwrap();
        assert_eq!(seen.header("x-forwarded-for"), Some("203.0.113.50"), "{d}");
        assert_eq!(seen.header("x-forwarded-proto"), Some("https"), "{d}");
        // HTTP/2 over TLS behind the same header.
        let h2_config = client_config(&pki.ca_pem(), &ClientOpts { alpn: vec![b"h2".to_vec()], ..Default::default() });
        let r = runtime().block_on(async {
            let mut c = h2_connect_after(gw.addr, &v1("203.0.113.51", 999, 443), Some(("app.test", h2_config))).await;
            let req = http::Request::builder().uri("https://app.test/h2").body(()).unwrap();
            h2_request(&mut c, req, None).await.unwrap()
        });
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(o.received().pop().unwrap().header("x-forwarded-for"), Some("203.0.113.51"), "{d}");
        // A ClientHello without the header is refused before any handshake.
        assert!(tls_connect_after(gw.addr, b"", "app.test", config).is_err(), "{d}");
        assert!(wait_until(Duration::from_secs(2), || gw.total("pp_failed_missing") == 1), "{d}");
    });
}

#[test]
fn an_untrusted_clients_forwarding_fields_are_replaced_a_trusted_proxys_believed() {
    each_driver(|d| {
        let o = origin();
        let dir = TempDir::new("edge-xff");
        let log = dir.path("access.log");
        let spoof = b"GET /limited HTTP/1.1\r\nhost: app.local\r\nx-forwarded-for: 6.6.6.6\r\n\
                      x-forwarded-proto: https\r\nforwarded: for=6.6.6.6\r\n\r\n";
        {
            let gw = TestGateway::start(&cfg(d, o.addr(), "forwarded = true", &log));
            assert_eq!(exchange(gw.addr, spoof).status, 200, "{d}");
            let seen = o.received().pop().unwrap();
            assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"), "{d}");
            assert_eq!(seen.header("x-forwarded-proto"), Some("http"), "{d}");
            assert_eq!(seen.header("forwarded"), Some("for=127.0.0.1;proto=http;host=\"app.local\""), "{d}");
            assert_eq!(seen.header("x-forwarded-host"), Some("app.local"), "{d}");
            // The spoofed address is no rate-limit key: the same client is limited.
            let other = spoof.to_vec();
            let other = String::from_utf8(other).unwrap().replace("6.6.6.6", "7.7.7.7");
            assert_eq!(exchange(gw.addr, other.as_bytes()).status, 429, "{d}");
        }
        {
            let extra = "forwarded = true\ntrusted_proxies = [\"127.0.0.0/8\"]";
            let gw = TestGateway::start(&cfg(d, o.addr(), extra, &log));
            assert_eq!(exchange(gw.addr, spoof).status, 200, "{d}");
            let seen = o.received().pop().unwrap();
            assert_eq!(seen.header("x-forwarded-for"), Some("6.6.6.6, 127.0.0.1"), "{d}");
            assert_eq!(seen.header("x-forwarded-proto"), Some("https"), "{d}: the proxy's own kept");
            assert_eq!(
                seen.header("forwarded"),
                Some("for=6.6.6.6, for=127.0.0.1;proto=http;host=\"app.local\""),
                "{d}"
            );
            // Behind the trusted proxy each client address has its own bucket.
            let other = String::from_utf8(spoof.to_vec()).unwrap().replace("6.6.6.6", "7.7.7.7");
            assert_eq!(exchange(gw.addr, other.as_bytes()).status, 200, "{d}");
            assert_eq!(exchange(gw.addr, other.as_bytes()).status, 429, "{d}");
            let entries = log_entries(&log, 5);
            assert_eq!(entries[2]["client"], "6.6.6.6", "{d}");
            assert_eq!(entries[3]["client"], "7.7.7.7", "{d}");
        }
        let _ = std::fs::remove_file(&log);
    });
}
