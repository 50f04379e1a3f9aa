//! A TLS 1.3 client that leaves Nagle's algorithm on (Python's `ssl` over `socket`, many Java
//! clients) against a listener that sends no session tickets (`session_tickets = false`,
//! `session_cache = 0`): its Finished and its request go out as two small writes, and the
//! request waits behind the Finished until the gateway acknowledges it. The gateway sends
//! nothing after such a handshake, so without an immediate ACK the request waits for the
//! delayed-ACK timer (40 ms on Linux) on every new connection (issue 17). A resumed TLS 1.2
//! handshake ends the same way (the client's Finished comes last), tickets or not.
//!
//! This is a functional regression guard for a deterministic 40 ms stall, not a speed
//! benchmark: a loopback request to a direct response takes well under a millisecond, the stall
//! is the kernel's fixed delayed-ACK timeout, so the median of several connections is either
//! about 40 ms (stall) or about 1 ms (no stall). The 25 ms bound sits far from both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::clients::{client_config, ClientOpts};
use common::tls::{temp_dir, TestPki};
use common::*;
use rustls::pki_types::ServerName;
use rustls::{HandshakeKind, ProtocolVersion};

/// New connections measured per driver.
const CONNECTIONS: usize = 8;
/// Far below the 40 ms delayed ACK, far above a loopback exchange.
const STALL_BOUND: Duration = Duration::from_millis(25);

/// What one scenario sets up and expects of every measured handshake.
struct Case {
    /// Lines of the listener's `[listeners.tls]` table besides the certificate.
    tls: &'static str,
    tls12_only: bool,
    version: ProtocolVersion,
    kind: HandshakeKind,
}

#[test]
fn tls13_without_tickets_answers_a_nagle_client_without_delayed_ack_stall() {
    check(&Case {
        tls: "min_version = \"1.3\"\nsession_tickets = false\nsession_cache = 0\n",
        tls12_only: false,
        version: ProtocolVersion::TLSv1_3,
        kind: HandshakeKind::Full,
    });
}

#[test]
fn resumed_tls12_answers_a_nagle_client_without_delayed_ack_stall() {
    check(&Case {
        tls: "session_tickets = true\n",
        tls12_only: true,
        version: ProtocolVersion::TLSv1_2,
        kind: HandshakeKind::Resumed,
    });
}

/// Measures `case` on both drivers before asserting anything, so a failure shows both.
fn check(case: &Case) {
    let medians: Vec<(&str, Duration, Vec<Duration>)> = DRIVERS.iter().map(|d| measure(d, case)).collect();
    for (d, median, times) in &medians {
        assert!(*median < STALL_BOUND, "{d}: median {median:?} (all: {times:?}): the request waited for a delayed ACK");
    }
}

/// The median and the sorted times to the first response byte of [`CONNECTIONS`] new Nagle
/// connections to a fresh gateway on `driver`. For resumed handshakes one full handshake goes
/// first (not measured) to get the session.
fn measure(driver: &'static str, case: &Case) -> (&'static str, Duration, Vec<Duration>) {
    let o = origin();
    let dir = temp_dir("nagle");
    let pki = TestPki::new();
    let (cert, key) = pki.write_leaf(&dir, "a", &["a.test"]);
    let gw = nagle_gateway(driver, &o, &cert, &key, case.tls);
    let opts = ClientOpts { alpn: vec![b"http/1.1".to_vec()], tls12_only: case.tls12_only, ..ClientOpts::default() };
    let cfg = client_config(&pki.ca_pem(), &opts);
    if case.kind == HandshakeKind::Resumed {
        first_response_time(gw.addr, Arc::clone(&cfg), case.version, HandshakeKind::Full);
    }
    let mut times: Vec<Duration> =
        (0..CONNECTIONS).map(|_| first_response_time(gw.addr, Arc::clone(&cfg), case.version, case.kind)).collect();
    times.sort();
    let median = times[CONNECTIONS / 2];
    eprintln!("{driver} {:?} {:?}: time to first response byte, sorted: {times:?}", case.version, case.kind);
    assert!(gw.total("tls_handshakes") >= CONNECTIONS as u64, "{driver}");
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
    (driver, median, times)
}

/// A gateway with one TLS listener `main` (the `tls` lines added) answering every request
/// itself.
fn nagle_gateway(
    driver: &str,
    origin: &Origin,
    cert: &std::path::Path,
    key: &std::path::Path,
    tls: &str,
) -> TestGateway {
    let routes = "[[routes]]\nname = \"home\"\ndirect_response = { status = 200, body = \"ok\" }\n";
    let base = config(driver, origin.addr(), "", routes);
    let listener = format!(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n[listeners.tls]\n\
         certificates = [{{ cert = \"{}\", key = \"{}\" }}]\n{tls}",
        cert.display(),
        key.display()
    );
    TestGateway::start(&base.replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener))
}

/// One new connection the way Python's `ssl` makes it: Nagle on, the handshake's last flight
/// (the client Finished) written, then the request as a second small write. Checks the
/// handshake was `version` and `kind`; returns the time from writing the request to the first
/// response byte.
fn first_response_time(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    version: ProtocolVersion,
    kind: HandshakeKind,
) -> Duration {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_nodelay(false).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = ServerName::try_from("a.test").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    for _ in 0..16 {
        if !s.conn.is_handshaking() {
            break;
        }
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    assert!(!s.conn.is_handshaking(), "handshake did not finish");
    assert_eq!(s.conn.protocol_version(), Some(version));
    assert_eq!(s.conn.handshake_kind(), Some(kind));
    // The Finished flight goes out on its own, as it does from an `ssl.SSLSocket`.
    while s.conn.wants_write() {
        s.conn.write_tls(&mut s.sock).unwrap();
    }
    let start = Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\nhost: a.test\r\n\r\n").unwrap();
    s.flush().unwrap();
    let mut first = [0u8; 1];
    let n = s.read(&mut first).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(n, 1, "no response");
    assert_eq!(&first, b"H");
    elapsed
}
