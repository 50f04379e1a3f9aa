//! End-to-end WebSocket tunnelling (RFC 6455 over HTTP/1.1): real clients on raw sockets (and
//! rustls), the real gateway, the test origin's `/ws/echo` (which echoes raw bytes: the frames
//! sent here are opaque bytes to the gateway, which never parses them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::time::{Duration, Instant};

use common::*;
use loadtests::origin::websocket_accept;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// A gateway whose `ws` route (host `ws.test`) allows WebSocket; every other request goes to
/// the default route, which does not.
fn start(driver: &str, origin: &Origin, idle: &str) -> TestGateway {
    let server = format!("[server.timeouts]\nidle = \"{idle}\"\n");
    let routes = r#"
[[routes]]
name = "ws"
match = { host = "ws.test" }
cluster = "origin"
timeout = "300ms"
websocket = true
"#;
    TestGateway::start(&config(driver, origin.addr(), &server, routes))
}

fn handshake_request(host: &str, path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n{extra}\r\n"
    )
}

/// Reads one response head (a 101 included) and returns its status and fields.
fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        assert!(r.read_until(b'\n', &mut line).unwrap() > 0, "closed inside the head: {head:?}");
        head.extend_from_slice(&line);
        if line == b"\r\n" {
            break;
        }
    }
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    resp.parse(&head).unwrap();
    let fields = resp
        .headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
        .collect();
    (resp.code.unwrap(), fields)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// A stand-in for a masked client frame: opaque bytes, different for each message.
fn frame(i: usize, len: usize) -> Vec<u8> {
    let mut f = vec![0x81, 0xfe];
    f.extend((0..len).map(|j| (i * 31 + j * 7) as u8));
    f
}

fn expect_echo(r: &mut impl Read, sent: &[u8]) {
    let mut back = vec![0; sent.len()];
    r.read_exact(&mut back).unwrap();
    assert_eq!(back, sent);
}

/// Opens a tunnel through `ws.test`; checks the 101 the client sees.
fn open_tunnel(gw: &TestGateway, early: &[u8]) -> BufReader<std::net::TcpStream> {
    let mut s = connect(gw.addr);
    let mut first = handshake_request("ws.test", "/ws/echo", "").into_bytes();
    first.extend_from_slice(early);
    s.write_all(&first).unwrap();
    let mut r = BufReader::new(s);
    let (status, fields) = read_head(&mut r);
    assert_eq!(status, 101, "{fields:?}");
    assert_eq!(field(&fields, "upgrade"), Some("websocket"));
    assert_eq!(field(&fields, "connection"), Some("upgrade"));
    assert_eq!(field(&fields, "sec-websocket-accept"), Some(websocket_accept(KEY).as_str()));
    r
}

#[test]
fn messages_echo_through_one_tunnel_across_pauses() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "3s");
        // The first message rides in the handshake's packet.
        let early = frame(0, 10);
        let mut r = open_tunnel(&gw, &early);
        expect_echo(&mut r, &early);
        let mut sent = early.len();
        for i in 1..4 {
            // Longer than the route timeout (300ms), shorter than the idle timeout.
            std::thread::sleep(Duration::from_millis(if i == 2 { 700 } else { 10 }));
            let m = frame(i, 100 * i);
            r.get_mut().write_all(&m).unwrap();
            expect_echo(&mut r, &m);
            sent += m.len();
        }
        // Larger than the tunnel's 16 KiB buffers.
        let big = frame(9, 100_000);
        r.get_mut().write_all(&big).unwrap();
        expect_echo(&mut r, &big);
        sent += big.len();

        let seen = o.received();
        assert_eq!(seen.len(), 1, "{d}: one request reached the origin");
        assert_eq!(seen[0].header("upgrade"), Some("websocket"));
        assert_eq!(seen[0].header("connection"), Some("upgrade"));
        assert_eq!(seen[0].header("sec-websocket-key"), Some(KEY));
        assert_eq!(seen[0].header("sec-websocket-version"), Some("13"));
        assert_eq!(gw.total("websocket_upgrades"), 1, "{d}");
        assert_eq!(gw.total("websocket_active"), 1, "{d}");

        drop(r);
        assert!(wait_until(Duration::from_secs(5), || gw.total("websocket_active") == 0), "{d}");
        assert!(wait_until(Duration::from_secs(5), || o.websocket_closed() == 1), "{d}");
        assert!(gw.total("downstream_bytes_in") >= sent as u64, "{d}");
        assert!(gw.total("downstream_bytes_out") >= sent as u64, "{d}");
        assert_eq!(gw.total("responses_1xx"), 1, "{d}: the 101 is counted when the tunnel ends");
        // The worker is fine: the next request is served.
        assert_eq!(get(gw.addr, "/").status, 200, "{d}");
    });
}

#[test]
fn a_client_close_ends_the_upstream_side() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "10s");
        let mut r = open_tunnel(&gw, b"");
        let m = frame(1, 50);
        r.get_mut().write_all(&m).unwrap();
        expect_echo(&mut r, &m);
        r.get_mut().shutdown(std::net::Shutdown::Write).unwrap();
        assert!(wait_until(Duration::from_secs(5), || o.websocket_closed() == 1), "{d}: origin saw the close");
        // The origin closed in turn; the gateway passes that on and the client reads EOF.
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{d}");
        assert!(wait_until(Duration::from_secs(5), || gw.total("websocket_active") == 0), "{d}");
    });
}

/// A drain (SIGTERM, an upgrade's hand-over, a removed listener) lets a tunnel carry on as a
/// request in flight, and tells both sides once `drain_timeout` (5 s in tests) less a second has
/// passed, before the process would exit. It used to end the tunnel as the listener stopped,
/// cutting an exchange in progress.
#[test]
fn a_tunnel_carries_on_through_a_drain_and_is_closed_before_its_timeout() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "30s");
        let mut r = open_tunnel(&gw, b"");
        let m = frame(1, 50);
        r.get_mut().write_all(&m).unwrap();
        expect_echo(&mut r, &m);
        let drain = Instant::now();
        gw.gw.as_ref().expect("running").begin_drain();
        // The worker stops its listener at its next tick (within 100 ms: no drain_delay). Two
        // seconds into the drain the tunnel still carries messages both ways.
        std::thread::sleep(Duration::from_secs(2).saturating_sub(drain.elapsed()));
        let m = frame(2, 20_000);
        r.get_mut().write_all(&m).unwrap();
        expect_echo(&mut r, &m);
        assert_eq!(gw.total("websocket_active"), 1, "{d}");
        // Then both sides are told (FIN), within the drain timeout.
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{d}");
        let closed = drain.elapsed();
        assert!(closed >= Duration::from_secs(3), "{d}: closed {closed:?} into the drain");
        assert!(closed < Duration::from_secs(5), "{d}: closed {closed:?} into the drain");
        assert!(wait_until(Duration::from_secs(5), || o.websocket_closed() == 1), "{d}: origin side closed");
        assert!(wait_until(Duration::from_secs(5), || gw.total("websocket_active") == 0), "{d}");
    });
}

#[test]
fn idle_tunnels_are_closed_on_both_sides() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "300ms");
        let mut r = open_tunnel(&gw, b"");
        let m = frame(1, 20);
        r.get_mut().write_all(&m).unwrap();
        expect_echo(&mut r, &m);
        let quiet = Instant::now();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{d}");
        let waited = quiet.elapsed();
        assert!(waited >= Duration::from_millis(250), "{d}: closed after {waited:?}");
        assert!(waited < Duration::from_secs(5), "{d}: closed after {waited:?}");
        assert!(wait_until(Duration::from_secs(5), || o.websocket_closed() == 1), "{d}: origin side closed");
        assert!(wait_until(Duration::from_secs(5), || gw.total("websocket_active") == 0), "{d}");
    });
}

#[test]
fn routes_without_websocket_serve_the_request_as_plain_http() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "10s");
        let mut s = connect(gw.addr);
        s.write_all(handshake_request("other.test", "/ws/echo", "").as_bytes()).unwrap();
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        // The origin saw no upgrade and said so: the gateway relays that as a normal answer.
        assert_eq!(resp.status, 426, "{d}");
        assert_eq!(resp.header("upgrade"), None, "{d}: hop-by-hop");
        let seen = o.received();
        assert_eq!(seen[0].header("upgrade"), None, "{d}");
        assert_eq!(seen[0].header("connection"), None, "{d}");
        // Still plain HTTP on the same connection.
        r.get_mut().write_all(b"GET / HTTP/1.1\r\nhost: other.test\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut r, false).unwrap().status, 200, "{d}");
        assert_eq!(gw.total("websocket_upgrades"), 0, "{d}");
    });
}

#[test]
fn other_upgrades_are_never_tunnelled() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "10s");
        let h2c = "GET /ws/echo HTTP/1.1\r\nhost: ws.test\r\nupgrade: h2c\r\nconnection: Upgrade, HTTP2-Settings\r\n\
                   http2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
        let foo = "GET /ws/echo HTTP/1.1\r\nhost: ws.test\r\nupgrade: foo/2\r\nconnection: upgrade\r\n\
                   sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n";
        for raw in [h2c, foo] {
            let resp = exchange(gw.addr, raw.as_bytes());
            assert_eq!(resp.status, 426, "{d}: {raw}");
        }
        for seen in o.received() {
            assert_eq!(seen.header("upgrade"), None, "{d}");
            assert_eq!(seen.header("connection"), None, "{d}");
            assert_eq!(seen.header("http2-settings"), None, "{d}");
        }
        assert_eq!(o.requests(), 2, "{d}");
        assert_eq!(gw.total("websocket_upgrades"), 0, "{d}");
    });
}

#[test]
fn incomplete_handshakes_are_answered_by_the_gateway() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "10s");
        let old = "GET /ws/echo HTTP/1.1\r\nhost: ws.test\r\nupgrade: websocket\r\nconnection: upgrade\r\n\
                   sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 8\r\n\r\n";
        let resp = exchange(gw.addr, old.as_bytes());
        assert_eq!(resp.status, 426, "{d}");
        assert_eq!(resp.header("sec-websocket-version"), Some("13"), "{d}");
        let no_key = "GET /ws/echo HTTP/1.1\r\nhost: ws.test\r\nupgrade: websocket\r\nconnection: upgrade\r\n\
                      sec-websocket-version: 13\r\n\r\n";
        assert_eq!(exchange(gw.addr, no_key.as_bytes()).status, 400, "{d}");
        let post = handshake_request("ws.test", "/ws/echo", "").replacen("GET", "POST", 1);
        assert_eq!(exchange(gw.addr, post.as_bytes()).status, 400, "{d}");
        assert_eq!(o.requests(), 0, "{d}: nothing reached the origin");
        // A good handshake on another connection still works.
        drop(open_tunnel(&gw, b""));
    });
}

#[test]
fn a_101_for_a_request_that_did_not_ask_is_a_502() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, "10s");
        assert_eq!(get(gw.addr, "/bad/switch").status, 502, "{d}");
        // Asked on a route that does not allow WebSocket: the upgrade was dropped, so a 101 is
        // still unrequested.
        let resp = exchange(gw.addr, handshake_request("other.test", "/bad/switch", "").as_bytes());
        assert_eq!(resp.status, 502, "{d}");
        assert_eq!(gw.total("websocket_upgrades"), 0, "{d}");
        assert_eq!(get(gw.addr, "/").status, 200, "{d}");
    });
}

#[test]
fn tunnels_work_over_tls() {
    use common::clients::{client_config, tls_connect, ClientOpts};
    use common::tls::{temp_dir, TestPki};
    each_driver(|d| {
        let o = origin();
        let pki = TestPki::new();
        let dir = temp_dir("ws");
        let (cert, key) = pki.write_leaf(&dir, "ws", &["ws.test"]);
        let server = "[server.timeouts]\nidle = \"3s\"\n";
        let routes =
            "[[routes]]\nname = \"ws\"\nmatch = { host = \"ws.test\" }\ncluster = \"origin\"\nwebsocket = true\n";
        let text = config(d, o.addr(), server, routes).replace(
            "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
            &format!(
                "name = \"main\"\naddress = \"127.0.0.1:0\"\n[listeners.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
                cert.display(),
                key.display()
            ),
        );
        let gw = TestGateway::start(&text);
        let cfg = client_config(&pki.ca_pem(), &ClientOpts { alpn: vec![b"http/1.1".to_vec()], ..Default::default() });
        let mut s = tls_connect(gw.addr, "ws.test", cfg).unwrap();
        s.write_all(handshake_request("ws.test", "/ws/echo", "").as_bytes()).unwrap();
        s.flush().unwrap();
        let mut r = BufReader::new(s);
        let (status, fields) = read_head(&mut r);
        assert_eq!(status, 101, "{d}: {fields:?}");
        assert_eq!(field(&fields, "sec-websocket-accept"), Some(websocket_accept(KEY).as_str()));
        // 300 KB: more than rustls holds to send (64 KiB), so the tunnel's TLS side waits for
        // the socket in both directions.
        for (i, len) in [(1, 10), (2, 40_000), (3, 5), (4, 300_000)] {
            let m = frame(i, len);
            r.get_mut().write_all(&m).unwrap();
            r.get_mut().flush().unwrap();
            expect_echo(&mut r, &m);
        }
        r.get_mut().conn.send_close_notify();
        let _ = r.get_mut().flush();
        assert!(wait_until(Duration::from_secs(5), || o.websocket_closed() == 1), "{d}: origin saw the close");
        assert!(wait_until(Duration::from_secs(5), || gw.total("websocket_active") == 0), "{d}");
        assert_eq!(gw.total("websocket_upgrades"), 1, "{d}");
        let _ = std::fs::remove_dir_all(&dir);
    });
}
