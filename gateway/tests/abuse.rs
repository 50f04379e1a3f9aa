//! End-to-end abuse suite: request smuggling variants, hop-by-hop tricks, deep pipelining,
//! slow clients, connection floods and an HTTP/2 zero-window stall. Every case checks the exact
//! answer (or the closed connection), that the origin saw nothing it should not have, and that a
//! well-behaved client on another connection is served.
//!
//! Cases already covered elsewhere (not repeated here):
//!
//! | case | covered by |
//! | --- | --- |
//! | CL.TE (`content-length` then `transfer-encoding: chunked`) | strict.rs `smuggling_framing_is_refused_with_400` |
//! | TE.TE: `xchunked`, `chunked, chunked`, `gzip, chunked`, two TE fields | strict.rs `smuggling_framing_is_refused_with_400` |
//! | differing / non-numeric / list Content-Length | strict.rs `smuggling_framing_is_refused_with_400` |
//! | bare LF after a chunk size, bad chunk sizes | strict.rs `smuggling_framing_is_refused_with_400` |
//! | whitespace before a colon (on `host`), NUL and control chars in a value | strict.rs `malformed_heads_are_refused_with_400` |
//! | obs-fold on a custom field; request line and heads with bare LF only; bare CR after the request line | strict.rs `malformed_heads_are_refused_with_400` |
//! | absolute-form target with a conflicting Host | strict.rs `malformed_heads_are_refused_with_400` |
//! | `Upgrade: h2c` not tunnelled | strict.rs `upgrade_h2c_is_never_tunnelled`, websocket.rs `other_upgrades_are_never_tunnelled` |
//! | a stalled head cut with 408 while others are served | strict.rs `slow_header_is_cut_with_408_while_others_are_served` |
//! | `Connection`-named field, Keep-Alive, TE, Proxy-Connection, Upgrade stripped | proxy.rs `hop_by_hop_headers_never_reach_the_origin` |
//! | pipelining of 8 mixed requests in order | proxy.rs `pipelined_requests_are_answered_in_order` |
//! | upstream CL+TE, duplicate differing CL, garbage, 100 KiB head: 502, client stays in sync | upstream.rs `hostile_response_heads_are_502_never_passed_on` |
//! | upstream invalid chunked body: client connection cut, never a complete-looking answer | upstream.rs `broken_response_bodies_close_the_client_connection` |
//! | connection limit of 2: the next connection waits and is served when a slot frees | overload.rs `at_the_connection_limit_a_new_connection_waits_and_is_served_when_a_slot_frees` |
//! | HTTP/2 uppercase names, connection-specific fields, missing `:path`, Host vs `:authority` | h2.rs `malformed_h2_requests_are_refused_and_never_forwarded` |
//! | HTTP/2 rapid reset, PING/SETTINGS/CONTINUATION/empty DATA floods | h2.rs `*_gets_goaway` |
//! | HTTP/2 connections stalling flow control (zero window, many streams) | h2_stall.rs (GOAWAY after `stall_timeout`, slots freed, slow readers kept) |
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::clients::*;
use common::h2raw;
use common::*;

const LIMITS: &str = r#"
[server.limits]
max_body_bytes = "1MiB"

[server.timeouts]
header_read = "1s"
idle = "5s"
body_io = "1s"
"#;

fn start(driver: &str, o: &Origin, extra: &str) -> TestGateway {
    TestGateway::start(&config(driver, o.addr(), extra, ""))
}

fn show(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// A well-behaved client on its own connection.
fn good_client_served(addr: SocketAddr, what: &str) {
    let r = get(addr, "/bytes/4");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"abcd"[..]), "good client after {what}");
}

/// Sends `raw` on one connection: the answer is `status` with `Connection: close`, the
/// connection is closed, the origin saw no request at all, and others are served.
fn refused(gw: &TestGateway, o: &Origin, raw: &[u8], status: u16) {
    let before = o.requests();
    let mut s = connect(gw.addr);
    s.write_all(raw).unwrap();
    let mut r = BufReader::new(s);
    let resp = read_response(&mut r, false).unwrap_or_else(|e| panic!("no response to {:?}: {e}", show(raw)));
    assert_eq!(resp.status, status, "{:?}", show(raw));
    assert_eq!(resp.header("connection"), Some("close"), "{:?}", show(raw));
    assert!(is_closed(&mut r), "closed after {status}: {:?}", show(raw));
    assert_eq!(o.requests(), before, "origin must see nothing for {:?}: {:?}", show(raw), o.received());
    good_client_served(gw.addr, &show(raw));
}

#[test]
fn smuggling_variants_are_refused_with_400_and_reach_nothing() {
    let cases: &[&[u8]] = &[
        // TE.CL: Transfer-Encoding first, then Content-Length, a smuggled request in the body.
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n\
          5c\r\nGET /smuggled HTTP/1.1\r\nhost: a\r\ncontent-length: 15\r\n\r\nx=1\r\n0\r\n\r\n",
        // CL.TE with the body carrying a second request.
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 6\r\ntransfer-encoding: chunked\r\n\r\n\
          0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: a\r\n\r\n",
        // TE.TE obfuscations.
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding : chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding\t: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\n transfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: x\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: \"chunked\"\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked;q=1\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: identity\r\ncontent-length: 3\r\n\r\nabc",
        // obs-fold continuing a framing field.
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: identity\r\n chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\t4\r\n\r\nabcd",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-fold: a\r\n\tb\r\n\r\n",
        // Chunk extensions with bare LF or bare CR.
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3;ext\rx=1\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0;ext=1\n\r\n",
        b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
        // Bare CR inside a header line, in a name, and after the last field.
        b"GET / HTTP/1.1\r\nhost: a\r\nx-a: b\rx-b: c\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-a\r: b\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\n\r\r\n",
        // NUL in the value of a framing field and of Host.
        b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 3\x00\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nhost: a\x00.b\r\n\r\n",
        // Trailers: bare LF, obs-fold, whitespace before the colon; a quoted chunk extension
        // hiding a CRLF.
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx: a\n\r\n",
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx: a\r\n b\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx : a\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3;a=\"x\r\ny\"\r\nabc\r\n0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n",
        // Request-line oddities: tabs, trailing space, version spelling, authority forms.
        b"GET\t/\tHTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET / HTTP/1.1 \r\nhost: a\r\n\r\n",
        b"GET / http/1.1\r\nhost: a\r\n\r\n",
        b"GET / HTTP/1.10\r\nhost: a\r\n\r\n",
        b"GET / HTTP/01.1\r\nhost: a\r\n\r\n",
        b"GET * HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET http://u@a/ HTTP/1.1\r\nhost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: u@a\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a/b\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a:99999\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\n: empty-name\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: a\r\nx-a: \x7f\r\n\r\n",
        // A request line ending in bare LF followed by CRLF fields.
        b"GET / HTTP/1.1\nhost: a\r\n\r\n",
        b"GET /\n HTTP/1.1\r\nhost: a\r\n\r\n",
    ];
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        for raw in cases {
            refused(&gw, &o, raw, 400);
        }
    });
}

#[test]
fn transfer_encoding_with_allowed_whitespace_and_case_is_decoded_strictly() {
    // OWS (SP / HTAB) around a field value and any letter case are valid (RFC 9110 5.5, 7.6.1):
    // the body is decoded as chunked and the following pipelined request stays separate.
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        for te in ["transfer-encoding:\tchunked", "Transfer-Encoding: CHUNKED", "transfer-encoding: chunked \t"] {
            let mut s = connect(gw.addr);
            let raw = format!(
                "POST /echo HTTP/1.1\r\nhost: a\r\n{te}\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /bytes/2 HTTP/1.1\r\nhost: a\r\n\r\n"
            );
            s.write_all(raw.as_bytes()).unwrap();
            let mut r = BufReader::new(s);
            let first = read_response(&mut r, false).unwrap();
            assert_eq!((first.status, first.body.as_slice()), (200, &b"abc"[..]), "{d}: {te:?}");
            let second = read_response(&mut r, false).unwrap();
            assert_eq!((second.status, second.body.as_slice()), (200, &b"ab"[..]), "{d}: {te:?}");
        }
        let seen = o.received();
        assert_eq!(seen.len(), 6, "{d}: {seen:?}");
        assert!(seen.iter().all(|r| r.error.is_none() && r.target != "/smuggled"), "{d}");
        assert!(seen.iter().filter(|r| r.target == "/echo").all(|r| r.body == b"abc"), "{d}");
    });
}

#[test]
fn connection_cannot_nominate_framing_or_gateway_fields_as_hop_by_hop() {
    // A client naming Content-Length or Host in Connection would make a naive proxy drop the
    // framing or the authority it forwards: refused with 400. Naming Transfer-Encoding (always
    // hop-by-hop, re-encoded anyway), X-Forwarded-For or Via must not remove what the gateway
    // itself sends.
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        refused(
            &gw,
            &o,
            b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\nconnection: content-length\r\n\r\nabc",
            400,
        );
        refused(&gw, &o, b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\nconnection: host\r\n\r\nabc", 400);
        let before = o.received().len();
        let mut s = connect(gw.addr);
        s.write_all(
            b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\nconnection: x-forwarded-for, via, x-request-id\r\n\r\nabc\
              POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\nconnection: transfer-encoding\r\n\r\n2\r\nde\r\n0\r\n\r\n\
              GET /bytes/3 HTTP/1.1\r\nhost: a\r\n\r\n",
        )
        .unwrap();
        let mut r = BufReader::new(s);
        for want in [&b"abc"[..], b"de", b"abc"] {
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!((resp.status, resp.body.as_slice()), (200, want), "{d}");
        }
        let seen = o.received().split_off(before);
        assert_eq!(seen.len(), 3, "{d}: {seen:?}");
        assert!(seen.iter().all(|r| r.error.is_none() && r.header("connection").is_none()), "{d}: {seen:?}");
        assert_eq!(seen[0].body, b"abc");
        assert_eq!(seen[0].header("x-forwarded-for"), Some("127.0.0.1"), "{d}");
        assert_eq!(seen[0].header("via"), Some("1.1 gateway"), "{d}");
        assert!(seen[0].header("x-request-id").is_some(), "{d}");
        assert_eq!((seen[1].chunked, seen[1].body.as_slice()), (true, &b"de"[..]), "{d}");
        good_client_served(gw.addr, "connection-nominated fields");
    });
}

#[test]
fn two_hundred_pipelined_requests_in_one_write_are_answered_in_order() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        let mut batch = Vec::new();
        for i in 0..200usize {
            batch.extend_from_slice(format!("GET /bytes/{} HTTP/1.1\r\nhost: a\r\n\r\n", i % 37 + 1).as_bytes());
        }
        let mut s = connect(gw.addr);
        let writer = {
            let mut s2 = s.try_clone().unwrap();
            std::thread::spawn(move || s2.write_all(&batch).unwrap())
        };
        let mut r = BufReader::new(s.try_clone().unwrap());
        for i in 0..200usize {
            let resp = read_response(&mut r, false).unwrap_or_else(|e| panic!("{d}: response {i}: {e}"));
            assert_eq!((resp.status, resp.body.len()), (200, i % 37 + 1), "{d}: response {i} in order");
        }
        writer.join().unwrap();
        s.write_all(b"GET /bytes/5 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut r, false).unwrap().body, b"abcde", "{d}: connection still usable");
        assert_eq!(o.requests(), 201, "{d}");
        good_client_served(gw.addr, "pipelining");
    });
}

#[test]
fn slowloris_trickling_one_byte_every_200ms_is_cut_with_408() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        let s = connect(gw.addr);
        let mut w = s.try_clone().unwrap();
        let head = format!("GET /slow HTTP/1.1\r\nhost: a\r\nx-pad: {}\r\n\r\n", "p".repeat(40));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let trickle = std::thread::spawn(move || {
            for b in head.bytes() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) || w.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let started = Instant::now();
        // Well-behaved clients are served while the head trickles in.
        for _ in 0..5 {
            good_client_served(gw.addr, "slowloris start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(resp.status, 408, "{d}");
        assert_eq!(resp.header("connection"), Some("close"), "{d}");
        // The whole head would take ~13 s; the cut comes from the 1 s header-read timeout, not
        // a per-byte timer that each trickled byte re-arms.
        assert!(took < Duration::from_secs(8), "{d}: {took:?}");
        trickle.join().unwrap();
        // Closed: EOF, or a reset if a trickled byte raced the close. Never more data.
        let mut rest = Vec::new();
        match r.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "{d}: {:?}", show(&rest)),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{d}: {e}"),
        }
        assert_eq!(gw.total("header_read_timeouts"), 1, "{d}");
        assert!(o.received().iter().all(|r| r.target != "/slow"), "{d}");
        good_client_served(gw.addr, "slowloris");
    });
}

#[test]
fn slow_reader_of_a_large_body_is_cut_by_body_io() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        let total = 10 * 1024 * 1024;
        let mut s = connect(gw.addr);
        s.write_all(format!("GET /bytes/{total} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
        let mut got = 0usize;
        let mut b = [0u8; 1];
        let started = Instant::now();
        // Read one byte every 100 ms while a good client is served, until the gateway has
        // dropped the connection (every connection gone but this one, which we still hold).
        let mut cut = false;
        while started.elapsed() < Duration::from_secs(15) {
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
            if got.is_multiple_of(10) {
                good_client_served(gw.addr, "slow reader");
            }
            if gw.total("connections_active") == 0 {
                cut = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(cut, "{d}: gateway kept the slow reader after {:?}: {}", started.elapsed(), gw.stats()["totals"]);
        // What remains is only what the kernels had buffered: the body is cut short.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        got += rest.len();
        assert!(got < total + 64, "{d}: {got} bytes");
        assert!(got < total, "{d}: the whole 10 MiB arrived ({got} bytes), nothing was cut");
        good_client_served(gw.addr, "slow reader cut");
    });
}

#[test]
fn connection_flood_at_the_per_worker_limit_recovers() {
    each_driver(|d| {
        let o = origin();
        let extra =
            format!("{LIMITS}\n").replace("[server.limits]\n", "[server.limits]\nmax_connections_per_worker = 50\n");
        let gw = start(d, &o, &extra);
        // 80 connections: 50 fill the worker, the rest wait in the backlog. Half send a
        // partial head, half nothing.
        let mut flood: Vec<TcpStream> = Vec::new();
        for i in 0..80 {
            let mut s = TcpStream::connect(gw.addr).unwrap();
            if i % 2 == 0 {
                let _ = s.write_all(b"GET /flood HTTP/1.1\r\nhost: a\r\n");
            }
            flood.push(s);
        }
        // The header-read timeout frees the slots: a new client is served within a few seconds
        // while the flood sockets are still held open by us.
        let started = Instant::now();
        let good = std::thread::spawn({
            let addr = gw.addr;
            move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                s.write_all(b"GET /bytes/4 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
                read_response(&mut BufReader::new(s), false)
            }
        });
        let resp = good.join().unwrap().expect("served despite the flood");
        assert_eq!(resp.body, b"abcd", "{d}");
        assert!(started.elapsed() < Duration::from_secs(15), "{d}: {:?}", started.elapsed());
        drop(flood);
        // Nothing leaked: every connection goes away and new clients are served at once.
        assert!(
            wait_until(Duration::from_secs(10), || gw.total("connections_active") == 0),
            "{d}: {}",
            gw.stats()["totals"]
        );
        for _ in 0..10 {
            good_client_served(gw.addr, "flood");
        }
        assert!(o.received().iter().all(|r| r.target != "/flood"), "{d}");
    });
}

#[test]
fn h2_zero_window_stall_is_cut_and_others_are_served() {
    let o = origin();
    let extra = LIMITS.to_owned();
    let base = config("io_uring", o.addr(), &extra, "");
    let text = base.replace(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
    );
    let gw = TestGateway::start(&text);
    let mut s = connect(gw.addr);
    s.write_all(&h2raw::preface()).unwrap();
    // SETTINGS_INITIAL_WINDOW_SIZE = 0: no stream may receive DATA until a WINDOW_UPDATE that
    // never comes.
    s.write_all(&h2raw::settings(&[(0x4, 0)])).unwrap();
    let block = h2raw::hpack_literal(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/bytes/10485760"),
        (":authority", "a"),
    ]);
    s.write_all(&h2raw::headers(1, &block, true, true)).unwrap();
    let started = Instant::now();
    let addr = gw.addr;
    let good = std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async {
            let mut c = h2_connect(addr, None).await;
            for _ in 0..10 {
                let r = h2_request(&mut c, h2_get("http", "a", "/bytes/10"), None).await.unwrap();
                assert_eq!(r.status, 200);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    });
    // Read frames (acknowledging SETTINGS like a live peer) until the stream or connection is
    // ended by the gateway: RST_STREAM on 1, GOAWAY, or EOF.
    let mut outcome = None;
    let mut data_bytes = 0usize;
    while started.elapsed() < Duration::from_secs(12) {
        s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        match h2raw::read_frame(&mut s) {
            Ok((h2raw::SETTINGS, flags, _, _)) if flags & h2raw::FLAG_ACK == 0 => {
                s.write_all(&h2raw::settings_ack()).unwrap();
            }
            Ok((h2raw::DATA, _, 1, payload)) => data_bytes += payload.len(),
            Ok((h2raw::RST_STREAM, _, 1, payload)) => {
                outcome = Some(format!("RST_STREAM {payload:?}"));
                break;
            }
            Ok((h2raw::GOAWAY, _, _, payload)) => {
                outcome = Some(format!("GOAWAY {payload:?}"));
                break;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => {
                outcome = Some(format!("closed: {e}"));
                break;
            }
        }
    }
    good.join().unwrap();
    assert_eq!(data_bytes, 0, "no DATA may be sent into a zero window");
    let took = started.elapsed();
    assert!(
        outcome.is_some(),
        "FINDING: a stream stalled on a zero flow-control window is kept open {took:?} (body_io = 1s); {}",
        gw.stats()["totals"]
    );
    // RFC 9113 §7: the gateway gave up on the stream (CANCEL), it is not an internal error. The
    // stall timeout follows body_io here (1 s): when its check comes first, the whole connection
    // gets GOAWAY ENHANCE_YOUR_CALM instead (h2_stall.rs covers that path).
    assert!(
        matches!(outcome.as_deref(), Some("RST_STREAM [0, 0, 0, 8]" | "GOAWAY [0, 0, 0, 1, 0, 0, 0, 11]")),
        "the stalled stream is reset with CANCEL or its connection closed with ENHANCE_YOUR_CALM: {outcome:?}"
    );
    // Whatever the gateway ended, the origin was asked once and others are still served.
    assert!(o.received().iter().filter(|r| r.target == "/bytes/10485760").count() <= 1);
    let rt = runtime();
    rt.block_on(async {
        let mut c = h2_connect(addr, None).await;
        assert_eq!(h2_request(&mut c, h2_get("http", "a", "/bytes/1"), None).await.unwrap().status, 200);
    });
}

#[test]
fn stalled_request_body_is_cut_by_body_io_and_never_completes_upstream() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        let mut s = connect(gw.addr);
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 100\r\n\r\nonly ten b").unwrap();
        let started = Instant::now();
        good_client_served(gw.addr, "stalled body start");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(8), "{d}: {took:?}");
        // 408 from the gateway, then close; never a response from the origin to a partial body.
        assert!(out.starts_with(b"HTTP/1.1 408 Request Timeout\r\n"), "{d}: {:?}", show(&out));
        assert!(show(&out).contains("\r\nconnection: close\r\n"), "{d}: {:?}", show(&out));
        assert!(o.received().iter().filter(|r| r.target == "/echo").all(|r| r.error.is_some()), "{d}");
        assert_eq!(o.requests(), 1, "{d}: only the good client's request completed");
        good_client_served(gw.addr, "stalled body");
    });
}

/// The first byte of the answer on stream 1 to a raw HTTP/2 request: `Some(0x88)` for an
/// indexed `:status 200`, `Some(0x8c)` for 400, `None` if the stream or connection was reset.
fn h2_raw_answer(s: &mut TcpStream) -> Option<u8> {
    for _ in 0..50 {
        match h2raw::read_frame(s) {
            Ok((h2raw::HEADERS, _, 1, payload)) => return payload.first().copied(),
            Ok((h2raw::RST_STREAM, _, 1, _)) | Ok((h2raw::GOAWAY, _, _, _)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
    None
}

#[test]
fn h2_requests_cannot_smuggle_into_http1_upstreams() {
    let o = origin();
    let text = config("io_uring", o.addr(), LIMITS, "").replace(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
    );
    let gw = TestGateway::start(&text);
    let req = |path: &'static str, extra: &[(&'static str, &'static str)]| {
        let mut f = vec![(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "a")];
        f.extend_from_slice(extra);
        f
    };
    let smuggled = "GET /smuggled HTTP/1.1\r\nhost: a\r\n\r\n";
    type Case = (&'static str, Vec<(&'static str, &'static str)>, Option<&'static str>);
    let cases: Vec<Case> = vec![
        ("CRLF in a value", req("/h2a", &[("x-a", "b\r\nGET /smuggled HTTP/1.1\r\nhost: a\r\n\r\n")]), None),
        ("LF in a value", req("/h2b", &[("x-a", "b\nx-injected: 1")]), None),
        ("colon in a name", req("/h2c", &[("x-a:b", "c")]), None),
        ("space in a name", req("/h2d", &[("x-a b", "c")]), None),
        ("transfer-encoding", req("/h2e", &[("transfer-encoding", "chunked")]), Some("0\r\n\r\n")),
        ("space in :path", req("/h2f HTTP/1.1\r\nhost: a\r\n\r\nGET /smuggled", &[]), None),
        ("content-length 0 with DATA", req("/h2g", &[("content-length", "0")]), Some(smuggled)),
        ("content-length shorter than DATA", req("/h2h", &[("content-length", "3")]), Some(smuggled)),
    ];
    for (what, fields, body) in cases {
        let mut s = connect(gw.addr);
        s.write_all(&h2raw::preface()).unwrap();
        s.write_all(&h2raw::settings(&[])).unwrap();
        let block = h2raw::hpack_literal(&fields);
        let mut out = h2raw::headers(1, &block, body.is_none(), true);
        if let Some(b) = body {
            out.extend_from_slice(&h2raw::data(1, b.as_bytes(), true));
        }
        s.write_all(&out).unwrap();
        let answer = h2_raw_answer(&mut s);
        // The gateway resets the stream (the h2 crate's PROTOCOL_ERROR or the gateway's check);
        // a 400 answer would do as well. Never a 200.
        assert!(matches!(answer, None | Some(0x8c)), "{what}: answered {answer:?}");
        good_client_served(gw.addr, what);
    }
    let seen = o.received();
    assert!(seen.iter().all(|r| r.target != "/smuggled" && !r.target.contains(' ')), "{seen:?}");
    assert!(
        seen.iter().all(|r| r.header("x-injected").is_none() && r.header("transfer-encoding").is_none()),
        "{seen:?}"
    );
    // Only the `content-length: 0` request reaches the origin, as the complete empty POST its
    // head declared (it is streamed before the excess DATA arrives); its upstream connection is
    // not reused. The excess bytes never follow it.
    let h2: Vec<_> = seen.iter().filter(|r| r.target.starts_with("/h2")).collect();
    assert!(h2.iter().all(|r| r.target == "/h2g" && r.body.is_empty() && r.error.is_none()), "{h2:?}");
}

/// A hostile keep-alive upstream: the n-th request head it reads (across all connections) is
/// answered with `replies[n]` verbatim, later ones with a good `200` and body `good`. Returns
/// its address and the request heads it read.
fn scripted_origin(replies: Vec<&'static [u8]>) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let (replies, seen) = (replies.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head: Vec<u8> = buf.drain(..end).collect();
                    let n = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(String::from_utf8_lossy(&head).into_owned());
                        seen.len() - 1
                    };
                    let reply: &[u8] =
                        replies.get(n).copied().unwrap_or(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ngood");
                    if s.write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, heads)
}

#[test]
fn hostile_upstream_heads_and_extra_bytes_never_reach_clients() {
    // (reply to the first request, what the first client must get)
    let cases: &[(&[u8], u16)] = &[
        // Bytes after a complete response: a pre-sent answer for the next request on the pooled
        // connection (response splitting / pool desync). The next client must never get "evil".
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil", 200),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil", 200),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding : chunked\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-fold: a\r\n b\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\ncontent-length: 2\n\nok", 502),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2, 3\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ncontent-length: -2\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-a: b\rc\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\nx-nul: a\x00b\r\ncontent-length: 2\r\n\r\nok", 502),
        (b"HTTP/1.1 2000 OK\r\ncontent-length: 2\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\ncontent-length: 2\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nok", 502),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: content-length\r\n\r\nok", 502),
        // Framing fields on interim responses must not frame the final one.
        (b"HTTP/1.1 103 Early Hints\r\ncontent-length: 5\r\nlink: </x>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 200),
        (b"HTTP/1.1 100 Continue\r\ntransfer-encoding: chunked\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 200),
        // Valid and unambiguous: identical duplicate lengths, an HTTP/1.0 upstream, trailers
        // (dropped).
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok", 200),
        (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok", 200),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nset-cookie: a=b\r\n\r\n", 200),
    ];
    each_driver(|d| {
        for (reply, status) in cases {
            let (addr, heads) = scripted_origin(vec![reply]);
            let gw = TestGateway::start(&config(d, addr, LIMITS, ""));
            let mut s = connect(gw.addr);
            s.write_all(b"GET /first HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let first = read_response(&mut r, false).unwrap_or_else(|e| panic!("{d}: {:?}: {e}", show(reply)));
            assert_eq!(first.status, *status, "{d}: {:?}", show(reply));
            if *status == 200 {
                assert_eq!(first.body, b"ok", "{d}: {:?}", show(reply));
            }
            // The same client and another client are answered by the next upstream response.
            s.write_all(b"GET /second HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            let second = read_response(&mut r, false).unwrap();
            assert_eq!((second.status, second.text().as_str()), (200, "good"), "{d}: {:?}", show(reply));
            let other = get(gw.addr, "/third");
            assert_eq!((other.status, other.text().as_str()), (200, "good"), "{d}: {:?}", show(reply));
            assert_eq!(heads.lock().unwrap().len(), 3, "{d}: {:?}", show(reply));
        }
    });
}

#[test]
fn no_content_length_on_a_204_even_if_the_upstream_sends_one() {
    // RFC 9110 8.6: a server MUST NOT send Content-Length in a 204. A client trusting it would
    // read the next response as this one's body.
    each_driver(|d| {
        let (addr, _) = scripted_origin(vec![b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\nhello"]);
        let gw = TestGateway::start(&config(d, addr, LIMITS, ""));
        let mut s = connect(gw.addr);
        s.write_all(b"GET /first HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let first = read_response(&mut r, false).unwrap();
        assert_eq!(first.status, 204, "{d}");
        assert_eq!(first.header("content-length"), None, "{d}: {:?}", first.headers);
        s.write_all(b"GET /second HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let second = read_response(&mut r, false).unwrap();
        assert_eq!((second.status, second.text().as_str()), (200, "good"), "{d}");
    });
}

#[test]
fn lenient_but_unambiguous_forms_are_served_as_the_rfcs_allow() {
    // Each is valid HTTP/1.1 (RFC 9110 / 9112) and has exactly one reading: served, and the
    // origin sees that reading.
    let cases: &[(&[u8], &str, &[u8])] = &[
        (b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\ncontent-length: 3\r\n\r\nabc", "/echo", b"abc"),
        (b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 003\r\n\r\nabc", "/echo", b"abc"),
        (
            b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3 ;a=b\r\nabc\r\n0\r\n\r\n",
            "/echo",
            b"abc",
        ),
        (b"\r\nGET /bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n", "/bytes/1", b""),
        (b"GET /bytes/1 HTTP/1.1\r\nhost: a\r\nx-a: \xff\xfe\r\n\r\n", "/bytes/1", b""),
        (b"GET /bytes/1 HTTP/1.1\r\nhost: [::1]:8080\r\n\r\n", "/bytes/1", b""),
        (b"GET http://a/bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n", "/bytes/1", b""),
    ];
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o, LIMITS);
        for (raw, target, body) in cases {
            let r = exchange(gw.addr, raw);
            assert_eq!(r.status, 200, "{d}: {:?}", show(raw));
            let seen = o.received().pop().unwrap();
            assert_eq!((seen.target.as_str(), seen.body.as_slice()), (*target, *body), "{d}: {:?}", show(raw));
        }
    });
}

#[test]
fn h2_request_body_that_never_comes_is_cut_by_body_io() {
    let o = origin();
    let text = config("io_uring", o.addr(), LIMITS, "").replace(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
    );
    let gw = TestGateway::start(&text);
    let mut s = connect(gw.addr);
    s.write_all(&h2raw::preface()).unwrap();
    s.write_all(&h2raw::settings(&[])).unwrap();
    let block = h2raw::hpack_literal(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/echo"),
        (":authority", "a"),
        ("content-length", "100"),
    ]);
    s.write_all(&h2raw::headers(1, &block, false, true)).unwrap();
    s.write_all(&h2raw::data(1, b"only ten b", false)).unwrap();
    let started = Instant::now();
    good_client_served(gw.addr, "h2 stalled body start");
    // The stream ends within a few seconds: an error answer, RST_STREAM or GOAWAY.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ended = None;
    for _ in 0..50 {
        match h2raw::read_frame(&mut s) {
            Ok((h2raw::HEADERS, _, 1, p)) => ended = Some(format!("HEADERS {:x?}", p.first())),
            Ok((h2raw::RST_STREAM, _, 1, p)) => ended = Some(format!("RST_STREAM {p:?}")),
            Ok((h2raw::GOAWAY, _, _, p)) => ended = Some(format!("GOAWAY {p:?}")),
            Ok(_) => continue,
            Err(e) => ended = Some(format!("closed {e}")),
        }
        break;
    }
    let took = started.elapsed();
    let ended = ended.expect("stream ended");
    assert!(took < Duration::from_secs(8) && !ended.starts_with("closed"), "{ended} after {took:?}");
    assert!(!ended.contains("0x88"), "never a 200: {ended}");
    // The origin never saw a complete /echo request.
    assert!(o.received().iter().filter(|r| r.target == "/echo").all(|r| r.error.is_some()), "{:?}", o.received());
    good_client_served(gw.addr, "h2 stalled body");
}

#[test]
fn an_endless_stream_of_interim_responses_is_cut_with_502() {
    // At most 10 interim responses per request (interim.rs): the 11th ends the exchange with a
    // 502 long before the route timeout, and the upstream connection is dropped.
    let flood: &'static [u8] = "HTTP/1.1 100 Continue\r\n\r\n".repeat(5000).leak().as_bytes();
    each_driver(|d| {
        let (addr, heads) = scripted_origin(vec![flood]);
        let gw = TestGateway::start(&config(d, addr, LIMITS, ""));
        let mut s = connect(gw.addr);
        s.write_all(b"GET /first HTTP/1.1\r\nhost: a\r\n\r\nGET /second HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let started = Instant::now();
        assert!(wait_until(Duration::from_secs(5), || !heads.lock().unwrap().is_empty()), "{d}");
        // Another client is served (by another upstream connection).
        let other = get(gw.addr, "/other");
        assert_eq!((other.status, other.text().as_str()), (200, "good"), "{d}");
        let first = read_response(&mut r, false).unwrap();
        assert_eq!(first.status, 502, "{d}");
        assert!(started.elapsed() < Duration::from_secs(8), "{d}: {:?}", started.elapsed());
        let second = read_response(&mut r, false).unwrap();
        assert_eq!((second.status, second.text().as_str()), (200, "good"), "{d}: client connection in sync");
        assert_eq!(heads.lock().unwrap().len(), 3, "{d}");
    });
}

#[test]
fn early_hints_are_forwarded_to_http11_clients() {
    // RFC 9110 15.2: a proxy MUST forward 1xx interim responses (hop-by-hop fields removed).
    let (addr, _) = scripted_origin(vec![
        b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\nconnection: x-hop\r\nx-hop: 1\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
    ]);
    let gw = TestGateway::start(&config("io_uring", addr, LIMITS, ""));
    let mut s = connect(gw.addr);
    s.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut r, &mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 103 Early Hints\r\n");
    let mut fields = Vec::new();
    loop {
        let mut l = String::new();
        std::io::BufRead::read_line(&mut r, &mut l).unwrap();
        if l == "\r\n" {
            break;
        }
        fields.push(l.to_ascii_lowercase());
    }
    assert_eq!(fields, ["link: </style.css>; rel=preload\r\n"], "hop-by-hop fields removed");
    let resp = read_response(&mut r, false).unwrap();
    assert_eq!((resp.status, resp.body.as_slice()), (200, &b"ok"[..]));
}
