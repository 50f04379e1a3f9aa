//! End-to-end HTTP/2: real h2 clients over TLS (ALPN) and cleartext (prior knowledge) through
//! the real gateway to a real HTTP/1.1 origin; abuse from raw frames while another client is
//! served.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::clients::*;
use common::h2raw;
use common::tls::TestPki;
use common::*;

/// A gateway whose listener `main` is TLS (ALPN h2, http/1.1) with a certificate for
/// `a.test`, or cleartext serving both protocols (h2c with prior knowledge).
struct H2Gateway {
    gw: TestGateway,
    ca: Option<String>,
    _dir: Option<std::path::PathBuf>,
}

impl H2Gateway {
    fn start(driver: &str, origin: &Origin, tls: bool, server_extra: &str) -> Self {
        Self::start_with_routes(driver, origin, tls, server_extra, "")
    }

    /// [`H2Gateway::start`] with `routes` (and their clusters) before the default route.
    fn start_with_routes(driver: &str, origin: &Origin, tls: bool, server_extra: &str, routes: &str) -> Self {
        let base = config(driver, origin.addr(), server_extra, routes);
        let (listener, ca, dir) = if tls {
            let pki = TestPki::new();
            let (chain, key) = pki.leaf(&["a.test"]);
            let dir =
                std::env::temp_dir().join(format!("gw-h2-{}-{:?}", std::process::id(), std::thread::current().id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("c.pem"), chain).unwrap();
            std::fs::write(dir.join("c.key"), key).unwrap();
            let l = format!(
                "name = \"main\"\naddress = \"127.0.0.1:0\"\n[listeners.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
                dir.join("c.pem").display(),
                dir.join("c.key").display()
            );
            (l, Some(pki.ca_pem()), Some(dir))
        } else {
            ("name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n".to_owned(), None, None)
        };
        let text = base.replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener);
        Self { gw: TestGateway::start(&text), ca, _dir: dir }
    }

    fn addr(&self) -> SocketAddr {
        self.gw.addr
    }

    async fn client(&self) -> h2::client::SendRequest<Bytes> {
        match &self.ca {
            Some(ca) => {
                let cfg = client_config(ca, &ClientOpts { alpn: vec![b"h2".to_vec()], ..ClientOpts::default() });
                h2_connect(self.addr(), Some(("a.test", cfg))).await
            }
            None => h2_connect(self.addr(), None).await,
        }
    }

    fn scheme(&self) -> &'static str {
        if self.ca.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

impl Drop for H2Gateway {
    fn drop(&mut self) {
        if let Some(d) = &self._dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[test]
fn h2_over_tls_and_h2c_proxy_to_http1_origin() {
    for tls in [true, false] {
        each_driver(|d| {
            let o = origin();
            let g = H2Gateway::start(d, &o, tls, "");
            let rt = runtime();
            rt.block_on(async {
                let mut c = g.client().await;
                let r = h2_request(&mut c, h2_get(g.scheme(), "a.test", "/bytes/1000?x=1"), None).await.unwrap();
                assert_eq!(r.status, 200, "{d} tls={tls}");
                assert_eq!(r.body, loadtests::origin::pattern(1000));
                // A body upstream (chunked: no content-length from the client) and back.
                let post = http::Request::builder()
                    .method("POST")
                    .uri(format!("{}://a.test/echo", g.scheme()))
                    .body(())
                    .unwrap();
                let r = h2_request(&mut c, post, Some(Bytes::from_static(b"hello h2"))).await.unwrap();
                assert_eq!(r.status, 200);
                assert_eq!(r.body, b"hello h2");
                // Many concurrent streams on one connection.
                let mut tasks = Vec::new();
                for i in 0..50 {
                    let mut c = c.clone();
                    let req = h2_get(g.scheme(), "a.test", &format!("/bytes/{}", 100 + i));
                    tasks.push(tokio::spawn(async move { h2_request(&mut c, req, None).await.unwrap() }));
                }
                for (i, t) in tasks.into_iter().enumerate() {
                    let r = t.await.unwrap();
                    assert_eq!(r.status, 200);
                    assert_eq!(r.body.len(), 100 + i);
                }
            });
            let seen = o.received();
            let req = seen.iter().find(|r| r.target == "/bytes/1000?x=1").unwrap();
            assert_eq!(req.header("host"), Some("a.test"));
            assert_eq!(req.header("via"), Some("2 gateway"));
            assert_eq!(req.header("x-forwarded-proto"), Some(g.scheme()));
            assert!(g.gw.total("h2_streams") >= 52);
        });
    }
}

#[test]
fn h2c_listener_still_serves_http1() {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "");
    let r = get(g.addr(), "/bytes/3");
    assert_eq!(r.status, 200);
}

#[test]
fn large_streamed_download_and_upload_with_a_slow_reader() {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, true, "");
    let rt = runtime();
    rt.block_on(async {
        let c = g.client().await;
        // 8 MiB down, read slowly: flow control must hold the origin back, not a buffer.
        let mut ready = c.clone().ready().await.unwrap();
        let (resp, _) = ready.send_request(h2_get("https", "a.test", "/bytes/8388608"), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut rx = resp.into_body();
        let mut got = 0usize;
        let mut n = 0;
        while let Some(chunk) = rx.data().await {
            let chunk = chunk.unwrap();
            got += chunk.len();
            let _ = rx.flow_control().release_capacity(chunk.len());
            n += 1;
            if n % 16 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert_eq!(got, 8 * 1024 * 1024);
        // 4 MiB up with content-length, echoed back.
        let body = Bytes::from(vec![b'x'; 4 * 1024 * 1024]);
        let post = http::Request::builder()
            .method("POST")
            .uri("https://a.test/echo")
            .header("content-length", body.len())
            .body(())
            .unwrap();
        let mut ready = c.ready().await.unwrap();
        let (resp, mut tx) = ready.send_request(post, false).unwrap();
        let mut rest = body.clone();
        while !rest.is_empty() {
            tx.reserve_capacity(rest.len().min(1 << 16));
            let cap = std::future::poll_fn(|cx| tx.poll_capacity(cx)).await.unwrap().unwrap();
            let piece = rest.split_to(cap.min(rest.len()));
            tx.send_data(piece, rest.is_empty()).unwrap();
        }
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut rx = resp.into_body();
        let mut echoed = 0;
        while let Some(chunk) = rx.data().await {
            let chunk = chunk.unwrap();
            echoed += chunk.len();
            let _ = rx.flow_control().release_capacity(chunk.len());
        }
        assert_eq!(echoed, body.len());
    });
}

#[test]
fn malformed_h2_requests_are_refused_and_never_forwarded() {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "");
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "uppercase name",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "/bad1"), (":authority", "a"), ("X-Upper", "1")],
        ),
        (
            "connection-specific",
            vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/bad2"),
                (":authority", "a"),
                ("connection", "close"),
            ],
        ),
        ("missing :path", vec![(":method", "GET"), (":scheme", "http"), (":authority", "a")]),
        (
            "host differs",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "/bad4"), (":authority", "a"), ("host", "b")],
        ),
    ];
    for (what, fields) in cases {
        let mut s = connect(g.addr());
        s.write_all(&h2raw::preface()).unwrap();
        s.write_all(&h2raw::settings(&[])).unwrap();
        s.write_all(&h2raw::headers(1, &h2raw::hpack_literal(&fields), true, true)).unwrap();
        let mut refused = false;
        for _ in 0..20 {
            let Ok((ty, _, stream, payload)) = h2raw::read_frame(&mut s) else { break };
            // RST_STREAM, a GOAWAY, or a 400 response on stream 1.
            if (ty == 0x3 && stream == 1) || ty == 0x7 || (ty == 0x1 && stream == 1 && payload.contains(&0x8c)) {
                refused = true;
                break;
            }
            if ty == 0x1 && stream == 1 {
                refused = true; // a gateway-generated error response
                break;
            }
        }
        assert!(refused, "{what}: refused");
    }
    assert!(o.received().iter().all(|r| !r.target.starts_with("/bad")), "nothing malformed reached the origin");
    // The gateway still serves.
    let rt = runtime();
    rt.block_on(async {
        let mut c = g.client().await;
        assert_eq!(h2_request(&mut c, h2_get("http", "a", "/bytes/1"), None).await.unwrap().status, 200);
    });
}

/// Runs `attack` on one raw h2c connection and expects GOAWAY ENHANCE_YOUR_CALM (0xb) while a
/// well-behaved client on another connection keeps being served.
fn attack_gets_enhance_your_calm(counter: &str, attack: impl Fn(&mut std::net::TcpStream)) {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "");
    let mut s = connect(g.addr());
    s.write_all(&h2raw::preface()).unwrap();
    s.write_all(&h2raw::settings(&[])).unwrap();
    let addr = g.addr();
    let good = std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async {
            let mut c = h2_connect(addr, None).await;
            for _ in 0..20 {
                assert_eq!(h2_request(&mut c, h2_get("http", "a", "/bytes/10"), None).await.unwrap().status, 200);
            }
        });
    });
    attack(&mut s);
    let code = h2raw::read_until_goaway(&mut s, Duration::from_secs(5));
    assert_eq!(code, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM; {}", g.gw.stats()["totals"]);
    good.join().unwrap();
    assert!(wait_until(Duration::from_secs(2), || g.gw.total(counter) == 1), "{counter} {}", g.gw.stats()["totals"]);
}

#[test]
fn rapid_reset_flood_gets_goaway() {
    attack_gets_enhance_your_calm("h2_abuse_reset_flood", |s| {
        let block = h2raw::hpack_literal(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/delay/100"),
            (":authority", "a"),
        ]);
        let mut buf = Vec::new();
        for i in 0..1000u32 {
            let id = 1 + 2 * i;
            buf.extend_from_slice(&h2raw::headers(id, &block, true, true));
            buf.extend_from_slice(&h2raw::rst_stream(id, 0x8));
        }
        let _ = s.write_all(&buf);
    });
}

#[test]
fn ping_flood_gets_goaway() {
    attack_gets_enhance_your_calm("h2_abuse_control_flood", |s| {
        let mut buf = Vec::new();
        for i in 0..5000u64 {
            buf.extend_from_slice(&h2raw::ping(i.to_be_bytes()));
        }
        let _ = s.write_all(&buf);
    });
}

#[test]
fn continuation_flood_gets_goaway_before_buffering() {
    attack_gets_enhance_your_calm("h2_abuse_header_block", |s| {
        let block =
            h2raw::hpack_literal(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "a")]);
        let _ = s.write_all(&h2raw::headers(1, &block, true, false));
        let filler = h2raw::hpack_literal(&[("x-filler", &"y".repeat(1000))]);
        for _ in 0..200 {
            if s.write_all(&h2raw::continuation(1, &filler, false)).is_err() {
                break;
            }
        }
    });
}

#[test]
fn settings_flood_gets_goaway() {
    attack_gets_enhance_your_calm("h2_abuse_control_flood", |s| {
        let mut buf = Vec::new();
        for _ in 0..2000 {
            buf.extend_from_slice(&h2raw::settings(&[]));
        }
        let _ = s.write_all(&buf);
    });
}

#[test]
fn empty_data_frame_flood_gets_goaway() {
    attack_gets_enhance_your_calm("h2_abuse_empty_frames", |s| {
        let block =
            h2raw::hpack_literal(&[(":method", "POST"), (":scheme", "http"), (":path", "/echo"), (":authority", "a")]);
        let mut buf = h2raw::headers(1, &block, false, true);
        for _ in 0..2000 {
            buf.extend_from_slice(&h2raw::data(1, &[], false));
        }
        let _ = s.write_all(&buf);
    });
}

#[test]
fn idle_h2_connections_get_goaway_after_the_idle_timeout() {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "[server.timeouts]\nidle = \"300ms\"");
    let mut s = connect(g.addr());
    s.write_all(&h2raw::preface()).unwrap();
    s.write_all(&h2raw::settings(&[])).unwrap();
    let started = std::time::Instant::now();
    let code = h2raw::read_until_goaway(&mut s, Duration::from_secs(5));
    assert_eq!(code, Some(0), "GOAWAY NO_ERROR");
    assert!(started.elapsed() >= Duration::from_millis(250));
}

/// A drain ends an HTTP/2 connection in two steps (RFC 9113 §6.8): a GOAWAY naming the highest
/// stream identifier and a PING; a stream the client opens before it has read them is still
/// answered; the PING's ACK draws the final GOAWAY, which names that stream; a stream opened
/// after it is ignored, and the connection closes once its streams are answered. With one
/// GOAWAY naming the last stream seen, the streams in flight as the drain started were refused:
/// h2load counted 41-47 errored requests per binary upgrade at -c8 -m16.
#[test]
fn a_drain_takes_the_streams_the_client_sent_before_it_read_the_goaway() {
    let o = origin();
    each_driver(|driver| {
        let g = H2Gateway::start(driver, &o, false, "");
        let mut s = connect(g.addr());
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let get = |stream: u32, path: &str| {
            let block =
                h2raw::hpack_literal(&[(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "a")]);
            h2raw::headers(stream, &block, true, true)
        };
        s.write_all(&[h2raw::preface(), h2raw::settings(&[]), get(1, "/delay/300")].concat()).unwrap();
        // The request is in flight before the drain starts.
        std::thread::sleep(Duration::from_millis(100));
        g.gw.gw.as_ref().unwrap().begin_drain();
        let mut answered = std::collections::HashMap::<u32, usize>::new();
        let mut ended = Vec::new();
        let mut read = |s: &mut std::net::TcpStream, want: u8| -> (u8, u8, u32, Vec<u8>) {
            loop {
                let f = h2raw::read_frame(s).unwrap_or_else(|e| panic!("{driver}: {e}"));
                assert_ne!(f.0, h2raw::RST_STREAM, "{driver}: stream {} reset", f.2);
                if f.0 == h2raw::DATA {
                    *answered.entry(f.2).or_default() += f.3.len();
                }
                if (f.0 == h2raw::DATA || f.0 == h2raw::HEADERS) && f.1 & h2raw::FLAG_END_STREAM != 0 {
                    ended.push(f.2);
                }
                if f.0 == want {
                    return f;
                }
            }
        };
        let goaway = read(&mut s, h2raw::GOAWAY);
        let last = |p: &[u8]| u32::from_be_bytes(p[..4].try_into().unwrap());
        assert_eq!((last(&goaway.3), &goaway.3[4..8]), (0x7fff_ffff, &[0u8; 4][..]), "{driver}: the first GOAWAY");
        let ping = read(&mut s, h2raw::PING);
        assert_eq!(ping.1 & h2raw::FLAG_ACK, 0, "{driver}: a PING, not an ACK");
        // As if sent before the GOAWAY was read.
        s.write_all(&get(3, "/bytes/10")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(&h2raw::ping_ack(ping.3.as_slice().try_into().unwrap())).unwrap();
        let last_goaway = read(&mut s, h2raw::GOAWAY);
        assert_eq!((last(&last_goaway.3), &last_goaway.3[4..8]), (3, &[0u8; 4][..]), "{driver}: the final GOAWAY");
        // Opened after the final GOAWAY: ignored.
        s.write_all(&get(5, "/bytes/10")).unwrap();
        loop {
            match h2raw::read_frame(&mut s) {
                Ok(f) => {
                    assert_ne!(f.0, h2raw::RST_STREAM, "{driver}: stream {} reset", f.2);
                    if f.0 == h2raw::DATA {
                        *answered.entry(f.2).or_default() += f.3.len();
                    }
                    if (f.0 == h2raw::DATA || f.0 == h2raw::HEADERS) && f.1 & h2raw::FLAG_END_STREAM != 0 {
                        ended.push(f.2);
                    }
                }
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{driver}: the connection closes cleanly");
                    break;
                }
            }
        }
        ended.sort_unstable();
        assert_eq!(ended, [1, 3], "{driver}: streams answered to their end");
        assert_eq!(answered.get(&3), Some(&10), "{driver}: stream 3's body");
        assert!(!answered.contains_key(&5), "{driver}: stream 5 ignored");
    });
}

/// A client that never acknowledges the shutdown's PING still gets the final GOAWAY, 1-1.5 s
/// after the first, and the connection closes: the wait is bounded.
#[test]
fn a_client_that_never_acknowledges_the_shutdown_ping_gets_the_final_goaway() {
    let o = origin();
    each_driver(|driver| {
        let g = H2Gateway::start(driver, &o, false, "[server.timeouts]\nidle = \"300ms\"");
        let mut s = connect(g.addr());
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&[h2raw::preface(), h2raw::settings(&[])].concat()).unwrap();
        let mut goaways = Vec::new();
        let mut first_at = None;
        loop {
            match h2raw::read_frame(&mut s) {
                Ok((h2raw::GOAWAY, _, _, payload)) => {
                    first_at.get_or_insert_with(std::time::Instant::now);
                    goaways.push(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                }
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{driver}: closed cleanly");
                    break;
                }
            }
        }
        assert_eq!(goaways, [0x7fff_ffff, 0], "{driver}: the notice, then the final GOAWAY naming no stream");
        let waited = first_at.unwrap().elapsed();
        assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(3), "{driver}: {waited:?}");
    });
}

/// A connection that ends gracefully (GOAWAY, every stream answered) lingers: what the client
/// sends after it (a request opened before it read the GOAWAY) is read and discarded until the
/// client closes its side, not answered by a reset. A reset destroys what the client has not
/// read yet (the GOAWAY, the last answers), and its next write fails: an upgrade over HTTP/2
/// lost requests that way (`upgrades_lose_nothing_over_tls_for_http1_and_http2_clients`).
#[test]
fn a_gracefully_ended_h2_connection_reads_what_the_client_still_sends() {
    let o = origin();
    for driver in ["io_uring", "epoll"] {
        let g = H2Gateway::start(driver, &o, false, "[server.timeouts]\nidle = \"300ms\"");
        let mut s = connect(g.addr());
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        linger_after_goaway(driver, &mut s, |s| s.shutdown(std::net::Shutdown::Write).unwrap());
    }
}

/// The same over TLS: after the GOAWAY and the gateway's `close_notify`, what the client still
/// sends is read and discarded until the client closes, not answered by a reset.
#[test]
fn a_gracefully_ended_h2_connection_over_tls_reads_what_the_client_still_sends() {
    let o = origin();
    for driver in ["io_uring", "epoll"] {
        let g = H2Gateway::start(driver, &o, true, "[server.timeouts]\nidle = \"300ms\"");
        let cfg = client_config(
            g.ca.as_deref().unwrap(),
            &ClientOpts { alpn: vec![b"h2".to_vec()], ..ClientOpts::default() },
        );
        let mut s = tls_connect(g.addr(), "a.test", cfg).unwrap();
        linger_after_goaway(driver, &mut s, |s| {
            s.conn.send_close_notify();
            s.flush().unwrap();
            s.sock.shutdown(std::net::Shutdown::Write).unwrap();
        });
    }
}

/// Opens HTTP/2 on `s`, waits for the idle GOAWAY, sends frames racing it twice (the second
/// after the reset the first would have drawn had the socket been closed), then closes our side
/// with `close` and expects the gateway's end to be clean (end of stream, no reset).
fn linger_after_goaway<S: std::io::Read + Write>(driver: &str, s: &mut S, close: impl FnOnce(&mut S)) {
    s.write_all(&[h2raw::preface(), h2raw::settings(&[])].concat()).unwrap();
    s.flush().unwrap();
    let code = loop {
        let (kind, _, _, payload) = h2raw::read_frame(s).unwrap();
        if kind == h2raw::GOAWAY {
            break u32::from_be_bytes(payload[4..8].try_into().unwrap());
        }
    };
    assert_eq!(code, 0, "{driver}: GOAWAY NO_ERROR");
    let late =
        [h2raw::headers(1, &h2raw::hpack_literal(&[(":method", "GET")]), true, true), h2raw::ping([7; 8])].concat();
    s.write_all(&late).unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let second = s.write_all(&late).and_then(|()| s.flush());
    assert!(second.is_ok(), "{driver}: the gateway reset the connection after its GOAWAY: {second:?}");
    close(s);
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    assert!(end.is_ok(), "{driver}: {end:?}");
}

/// An HTTP/1.1 upstream's connection-specific fields reach no client, over HTTP/2 or HTTP/1.1:
/// the fixed hop-by-hop ones and those its `Connection` fields name, a name listed after
/// `keep-alive` included; every other field goes through, and the answer carries the length it
/// is framed by once.
#[test]
fn connection_specific_fields_of_an_http1_answer_reach_no_client() {
    let origin = origin_replying(
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX-Up: 1\r\nconnection: X-Hop\r\n\
          X-Hop: 2\r\nContent-Length: 2\r\nX-End: 3\r\n\r\nok"
            .to_vec(),
    );
    each_driver(|d| {
        let text = config(d, origin, "", "").replace(
            "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
            "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
        );
        let gw = TestGateway::start(&text);
        let r = runtime().block_on(async {
            let mut c = h2_connect(gw.addr, None).await;
            h2_request(&mut c, h2_get("http", "a.test", "/"), None).await.unwrap()
        });
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]), "{d}");
        for name in ["x-up", "x-end"] {
            assert!(r.headers.contains_key(name), "{d}: {name} missing from {:?}", r.headers);
        }
        for name in ["connection", "keep-alive", "x-hop"] {
            assert!(!r.headers.contains_key(name), "{d}: {name} forwarded over HTTP/2: {:?}", r.headers);
        }
        let lengths: Vec<_> = r.headers.get_all("content-length").iter().collect();
        assert_eq!(lengths, ["2"], "{d}");

        let r = get(gw.addr, "/");
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "{d}");
        let names: Vec<String> = r.headers.iter().map(|(n, _)| n.to_ascii_lowercase()).collect();
        for name in ["x-up", "x-end"] {
            assert!(names.iter().any(|n| n == name), "{d}: {name} missing from {names:?}");
        }
        for name in ["keep-alive", "x-hop"] {
            assert!(!names.iter().any(|n| n == name), "{d}: {name} forwarded over HTTP/1.1: {names:?}");
        }
        assert_eq!(names.iter().filter(|n| *n == "content-length").count(), 1, "{d}: {names:?}");
    });
}

/// A small answer goes out as HEADERS and one DATA frame that ends the stream (no empty DATA
/// frame after the body), and a larger one in frames no larger than the client's frame size
/// (streamed from the upstream, it may end with an empty DATA frame): the frames, read raw.
#[test]
fn answers_end_the_stream_with_their_last_data_frame() {
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "");
    let mut s = connect(g.addr());
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&h2raw::preface()).unwrap();
    s.write_all(&h2raw::settings(&[])).unwrap();
    for (stream, size) in [(1u32, 10usize), (3, 40_000)] {
        let path = format!("/bytes/{size}");
        let fields = [(":method", "GET"), (":scheme", "http"), (":path", path.as_str()), (":authority", "a")];
        s.write_all(&h2raw::headers(stream, &h2raw::hpack_literal(&fields), true, true)).unwrap();
        let mut data = Vec::new();
        loop {
            let (ty, flags, id, payload) = h2raw::read_frame(&mut s).unwrap();
            if id != stream || ty != 0x0 {
                assert!(ty != 0x3 && ty != 0x7, "stream {stream}: reset or GOAWAY");
                continue;
            }
            assert!(payload.len() <= 16_384, "a DATA frame over the default frame size");
            data.push(payload.len());
            if flags & 0x1 != 0 {
                break;
            }
        }
        assert_eq!(data.iter().sum::<usize>(), size, "stream {stream}: {data:?}");
        if size == 10 {
            assert_eq!(data, vec![10], "one DATA frame, ending the stream");
        }
    }
}

/// Each malformed or refused HTTP/2 request gets its exact answer: a reset with PROTOCOL_ERROR
/// for what RFC 9113 calls malformed, or the status the gateway answers with. Raw frames, one
/// connection per case; nothing reaches the origin.
#[test]
fn malformed_and_refused_h2_requests_get_their_exact_answer() {
    const RESET: u16 = 0;
    let o = origin();
    let g = H2Gateway::start("io_uring", &o, false, "");
    let long: &'static str = "v".repeat(16_290).leak();
    let base = |path: &'static str| vec![(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "a")];
    let with = |path: &'static str, extra: (&'static str, &'static str)| {
        let mut f = base(path);
        f.push(extra);
        f
    };
    // (what, fields, END_STREAM on the head, the answer)
    type Case = (&'static str, Vec<(&'static str, &'static str)>, bool, u16);
    let cases: Vec<Case> = vec![
        ("uppercase name", with("/bad1", ("X-Up", "1")), true, RESET),
        ("te other than trailers", with("/bad2", ("te", "gzip")), true, RESET),
        ("value with surrounding space", with("/bad3", ("x-a", " 1")), true, RESET),
        ("content-length on a request without a body", with("/bad4", ("content-length", "5")), true, RESET),
        (
            "pseudo after regular",
            vec![(":method", "GET"), ("x-a", "1"), (":scheme", "http"), (":path", "/bad5"), (":authority", "a")],
            true,
            RESET,
        ),
        ("space in :path", base("/bad 6"), true, 400),
        ("fragment in :path", base("/bad7#f"), true, 400),
        (
            "userinfo in :authority",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "/bad8"), (":authority", "u@a")],
            true,
            400,
        ),
        ("Host differs from :authority", with("/bad9", ("host", "b")), true, 400),
        ("CONNECT", vec![(":method", "CONNECT"), (":authority", "a:443")], true, 501),
        ("body over max_body_bytes", with("/bad10", ("content-length", "20000000")), false, 413),
        ("field list over max_header_list_bytes", with("/bad11", ("x-long", long)), true, 431),
    ];
    for (what, fields, end_stream, want) in cases {
        let mut s = connect(g.addr());
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&h2raw::preface()).unwrap();
        s.write_all(&h2raw::settings(&[])).unwrap();
        s.write_all(&h2raw::headers(1, &h2raw::hpack_literal(&fields), end_stream, true)).unwrap();
        let got = loop {
            let (ty, _, stream, payload) = h2raw::read_frame(&mut s).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_ne!(ty, 0x7, "{what}: GOAWAY");
            if stream != 1 {
                continue;
            }
            if ty == 0x3 {
                assert_eq!(payload, 1u32.to_be_bytes(), "{what}: RST_STREAM PROTOCOL_ERROR");
                break RESET;
            }
            if ty == 0x1 {
                // The gateway's encoder: :status 400 is static index 12 (0x8c), others a literal
                // with name index 8 and three digits.
                break match payload.as_slice() {
                    [0x8c, ..] => 400,
                    [0x08, 3, a, b, c, ..] => {
                        u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
                    }
                    other => panic!("{what}: unexpected head {:x?}", &other[..other.len().min(8)]),
                };
            }
        };
        assert_eq!(got, want, "{what}");
    }
    assert!(o.received().iter().all(|r| !r.target.starts_with("/bad")), "nothing refused reached the origin");
}

#[test]
fn an_answer_whose_head_and_body_the_upstream_wrote_apart_reaches_an_h2_client_whole() {
    // As for HTTP/1.1 clients (proxy.rs); a reset right after the head resets the stream alone
    // (or answers 502 when it came first), and the connection serves on.
    each_driver(|d| {
        let o = origin();
        let g = H2Gateway::start_with_routes(d, &o, false, "", &routes_head_apart());
        let body = loadtests::origin::pattern(APART_BODY);
        runtime().block_on(async {
            let mut c = g.client().await;
            for round in 0..3 {
                for kind in ["length", "chunked", "close", "late"] {
                    let r =
                        h2_request(&mut c, h2_get("http", "a.test", &format!("/apart/{kind}")), None).await.unwrap();
                    assert_eq!(r.status, 200, "{d}: {kind} {round}");
                    assert!(r.body == body, "{d}: the {kind} body differs ({} bytes, round {round})", r.body.len());
                }
            }
            for _ in 0..5 {
                match h2_request(&mut c, h2_get("http", "a.test", "/apart/reset"), None).await {
                    Ok(r) => assert_eq!(r.status, 502, "{d}: a reset answer cannot complete"),
                    Err(e) => assert!(e.is_reset(), "{d}: {e}"),
                }
            }
            let r = h2_request(&mut c, h2_get("http", "a.test", "/apart/length"), None).await.unwrap();
            assert!(r.status == 200 && r.body == body, "{d}: the connection serves on after the resets");
        });
    });
}
