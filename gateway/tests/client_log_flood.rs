//! No log line per connection that a client can cause at will: the real binary with a TLS
//! listener, a thousand connections whose ClientHello names an IP address as SNI (what wrk and
//! scanners send; rustls warns about each), and a few hundred that send bytes that are not TLS.
//! The log stays quiet, while the failures are counted in the metrics; an explicit
//! `RUST_LOG=...,rustls=warn` still gets rustls' warnings. Events that name a client (HTTP/2
//! floods answered with GOAWAY) are written at most ten times a minute, the rest counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::h2raw;
use common::process::{GatewayProcess, TempDir, BIN};
use common::tls::TestPki;

#[test]
fn ip_sni_and_garbage_handshakes_leave_the_log_quiet() {
    let dir = TempDir::new("log-flood");
    let config = tls_config(&dir);
    let gw = GatewayProcess::start_logging(Path::new(BIN), &config, true, &["--allow-root"], "info");
    let before = gw.log.lock().unwrap().len();

    let started = Instant::now();
    for _ in 0..1000 {
        let first = hello_answer(gw.listener, &client_hello("127.0.0.1"));
        // The server read the hello and answered it (handshake or alert record): the SNI
        // extension was parsed, which is where rustls warns.
        assert!(first == Some(0x16) || first == Some(0x15), "answer to the hello: {first:?}");
    }
    for i in 0..300 {
        let mut s = TcpStream::connect(gw.listener).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let garbage: &[u8] = if i % 2 == 0 { b"GET / HTTP/1.1\r\nhost: a\r\n\r\n" } else { &[0xff; 64] };
        s.write_all(garbage).unwrap();
        let _ = s.read(&mut [0u8; 64]);
    }
    println!("1300 hostile connections in {:?}", started.elapsed());

    // The failures are counted (bad_message: bytes that are not TLS; each hello ends as eof when
    // the client closes after the server's answer).
    let admin = gw.admin.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while failures(admin, "bad_message") < 300 || failures(admin, "eof") < 1000 {
        assert!(Instant::now() < deadline, "failures not counted:\n{}", metrics(admin));
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = gw.log.lock().unwrap()[before..].to_vec();
    println!("{} log lines after 1300 hostile connections: {log:#?}", log.len());
    assert!(!log.iter().any(|l| l.contains("SNI")), "{log:#?}");
    assert!(log.len() <= 5, "{log:#?}");
}

#[test]
fn rustls_warnings_still_come_when_rust_log_asks_for_them() {
    let dir = TempDir::new("log-rustls");
    let config = tls_config(&dir);
    let gw = GatewayProcess::start_logging(Path::new(BIN), &config, true, &["--allow-root"], "info,rustls=warn");
    for _ in 0..5 {
        assert!(hello_answer(gw.listener, &client_hello("127.0.0.1")).is_some());
    }
    let needle = "Illegal SNI extension: ignoring IP address presented as hostname";
    let deadline = Instant::now() + Duration::from_secs(5);
    while gw.log_count(needle) < 5 {
        assert!(Instant::now() < deadline, "rustls warned {} times:\n{}", gw.log_count(needle), gw.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn http2_floods_are_logged_ten_times_then_counted_and_reported_at_exit() {
    let dir = TempDir::new("log-h2-flood");
    let config = dir.path("gateway.toml");
    std::fs::write(
        &config,
        "[server]\nworkers = 1\nwatch = false\nadmin = false\n\n\
         [[listeners]]\nname = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n\n\
         [[routes]]\nname = \"r\"\ndirect_response = { status = 200 }\n",
    )
    .unwrap();
    let mut gw = GatewayProcess::start(&config, false);
    let mut flood = Vec::new();
    flood.extend(h2raw::preface());
    flood.extend(h2raw::settings(&[]));
    for i in 0..5000u64 {
        flood.extend(h2raw::ping(i.to_be_bytes()));
    }
    for _ in 0..30 {
        let mut s = TcpStream::connect(gw.listener).unwrap();
        let _ = s.write_all(&flood);
        assert_eq!(h2raw::read_until_goaway(&mut s, Duration::from_secs(5)), Some(0xb), "ENHANCE_YOUR_CALM");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(gw.log_count("HTTP/2 client flood"), 10, "{}", gw.log_text());
    gw.signal("TERM");
    assert!(gw.wait_exit(Duration::from_secs(10)).is_some_and(|s| s.success()));
    let summary = "client-caused log lines suppressed";
    assert!(gw.log_arrives(summary, Duration::from_secs(2)), "{}", gw.log_text());
    let log = gw.log_text();
    let line = log.lines().find(|l| l.contains(summary)).unwrap();
    assert!(line.contains("suppressed=20") && line.contains("gateway/src/downstream/h2/server.rs:"), "{line}");
}

/// A gateway with a TLS listener (a certificate for localhost) answering 200, and an admin port.
fn tls_config(dir: &TempDir) -> std::path::PathBuf {
    let pki = TestPki::new();
    let (cert, key) = pki.write_leaf(&dir.0, "server", &["localhost"]);
    let config = dir.path("gateway.toml");
    let text = format!(
        "[server]\nworkers = 1\nwatch = false\nadmin = {{ address = \"127.0.0.1:0\" }}\n\n\
         [[listeners]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
         [listeners.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n\n\
         [[routes]]\nname = \"r\"\ndirect_response = {{ status = 200 }}\n",
        cert.display(),
        key.display()
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// Sends `hello` on a new connection; the first byte of the answer (None: closed or timed out).
fn hello_answer(addr: SocketAddr, hello: &[u8]) -> Option<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(hello).unwrap();
    let mut first = [0u8; 1];
    match s.read(&mut first) {
        Ok(1) => Some(first[0]),
        _ => None,
    }
}

/// A TLS 1.2 ClientHello whose server_name extension holds `name` as a host_name, as clients
/// that put an IP address there send it (rustls' own client never does).
fn client_hello(name: &str) -> Vec<u8> {
    fn u16be(n: usize) -> [u8; 2] {
        u16::try_from(n).unwrap().to_be_bytes()
    }
    fn extension(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
        out.extend(kind.to_be_bytes());
        out.extend(u16be(body.len()));
        out.extend(body);
    }
    let mut sni = Vec::new();
    sni.extend(u16be(name.len() + 3));
    sni.push(0); // host_name
    sni.extend(u16be(name.len()));
    sni.extend(name.as_bytes());
    let mut extensions = Vec::new();
    extension(&mut extensions, 0x0000, &sni);
    // supported_groups: x25519, secp256r1; ec_point_formats: uncompressed; signature_algorithms:
    // ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256.
    extension(&mut extensions, 0x000a, &[0x00, 0x04, 0x00, 0x1d, 0x00, 0x17]);
    extension(&mut extensions, 0x000b, &[0x01, 0x00]);
    extension(&mut extensions, 0x000d, &[0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01]);
    let mut body = vec![0x03, 0x03];
    body.extend([0x42; 32]); // random
    body.push(0); // no session id
    body.extend([0x00, 0x04, 0xc0, 0x2b, 0xc0, 0x2f]); // ECDHE-{ECDSA,RSA}-AES128-GCM-SHA256
    body.extend([0x01, 0x00]); // compression: null
    body.extend(u16be(extensions.len()));
    body.extend(extensions);
    let mut handshake = vec![0x01, 0x00]; // ClientHello, 24-bit length
    handshake.extend(u16be(body.len()));
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(u16be(handshake.len()));
    record.extend(handshake);
    record
}

fn metrics(admin: SocketAddr) -> String {
    let mut s = TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// `gateway_tls_handshake_failures_total` for `reason`, summed over workers.
fn failures(admin: SocketAddr, reason: &str) -> u64 {
    let label = format!("reason=\"{reason}\"");
    metrics(admin)
        .lines()
        .filter(|l| l.starts_with("gateway_tls_handshake_failures_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}
