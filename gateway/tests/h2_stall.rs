//! HTTP/2 flow-control stalls: clients that leave proxied responses without window are cut after
//! `server.http2.stall_timeout` (GOAWAY ENHANCE_YOUR_CALM), which frees their streams' upstream
//! connections and cluster slots long before the body I/O timeout, while a slow client that
//! still opens window as it reads is served to the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::clients::*;
use common::h2raw;
use common::*;

/// body_io far above the stall timeout: a cut within seconds can only be the stall detector.
const SETTINGS: &str = r#"
[server.timeouts]
header_read = "2s"
body_io = "30s"

[server.http2]
stall_timeout = "1s"
"#;

/// A gateway serving HTTP/1.1 and h2c on `main`, proxying to `o`.
fn start(o: &Origin) -> TestGateway {
    let base = config("io_uring", o.addr(), SETTINGS, "");
    let text = base.replace(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
    );
    TestGateway::start(&text)
}

fn get_block(path: &str) -> Vec<u8> {
    h2raw::hpack_literal(&[(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "a")])
}

/// An h2c connection announcing `initial_window` for its streams, with `streams` GETs of
/// `path` open (stream ids 1, 3, 5, ...).
fn open_streams(addr: SocketAddr, initial_window: u32, path: &str, streams: u32) -> TcpStream {
    let mut s = connect(addr);
    let mut out = h2raw::preface();
    out.extend(h2raw::settings(&[(0x4, initial_window)]));
    let block = get_block(path);
    for i in 0..streams {
        out.extend(h2raw::headers(1 + 2 * i, &block, true, true));
    }
    s.write_all(&out).unwrap();
    s
}

/// Reads frames, acknowledging SETTINGS, until GOAWAY (its error code and how many DATA bytes
/// came before it), EOF or `limit`.
fn until_goaway(s: &mut TcpStream, limit: Duration) -> (Option<u32>, usize) {
    let started = Instant::now();
    let mut data = 0;
    while started.elapsed() < limit {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        match h2raw::read_frame(s) {
            Ok((h2raw::SETTINGS, flags, _, _)) if flags & h2raw::FLAG_ACK == 0 => {
                s.write_all(&h2raw::settings_ack()).unwrap();
            }
            Ok((h2raw::DATA, _, _, payload)) => data += payload.len(),
            Ok((h2raw::GOAWAY, _, _, payload)) => {
                return (Some(u32::from_be_bytes(payload[4..8].try_into().unwrap())), data);
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (None, data),
        }
    }
    (None, data)
}

/// Well-behaved clients, one HTTP/1.1 and one HTTP/2, each sending a proxied GET every 20 ms
/// until `stop`; returns (answers, answers that were not a complete 200).
fn good_clients(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u32, Vec<String>)> {
    std::thread::spawn(move || {
        let h2 = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                let mut n = 0;
                runtime().block_on(async {
                    let mut c = h2_connect(addr, None).await;
                    for _ in 0..2000 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        n += 1;
                        match h2_request(&mut c, h2_get("http", "a", "/bytes/1024"), None).await {
                            Ok(r) if r.status == 200 && r.body.len() == 1024 => {}
                            Ok(r) => bad.push(format!("h2 {} ({} bytes)", r.status, r.body.len())),
                            Err(e) => bad.push(format!("h2 error {e}")),
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                });
                (n, bad)
            })
        };
        let mut bad = Vec::new();
        let mut n = 0;
        for _ in 0..2000 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            n += 1;
            let r = get(addr, "/bytes/1024");
            if r.status != 200 || r.body.len() != 1024 {
                bad.push(format!("http/1.1 {} ({} bytes)", r.status, r.body.len()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (n2, bad2) = h2.join().unwrap();
        bad.extend(bad2);
        (n + n2, bad)
    })
}

#[test]
fn h2_zero_window_connections_get_goaway_and_free_their_streams() {
    let o = origin();
    // The cluster's fixed limit, not the adaptive one: what is tested here is the stall cut.
    // (Under the adaptive limit the 90 stalled streams, each holding an upstream connection
    // blocked on its 1 MiB response, fill the limit for the second until the cut, and the good
    // clients share what is left: an open point of issue 18.)
    let text = config("io_uring", o.addr(), SETTINGS, "")
        .replace(
            "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
            "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
        )
        .replace(
            "connect_timeout = \"1s\"\n",
            "connect_timeout = \"1s\"\nadaptive_concurrency = { enabled = false }\n",
        );
    let gw = TestGateway::start(&text);
    let stop = Arc::new(AtomicBool::new(false));
    let good = good_clients(gw.addr, Arc::clone(&stop));
    // Three connections, 30 streams each of 1 MiB responses, window 0, never a WINDOW_UPDATE.
    let started = Instant::now();
    let mut attackers: Vec<TcpStream> = (0..3).map(|_| open_streams(gw.addr, 0, "/bytes/1048576", 30)).collect();
    assert!(
        wait_until(Duration::from_secs(10), || gw.total("upstream_requests_active") >= 90),
        "the 90 stalled streams reach the origin: {}",
        gw.stats()["totals"]
    );
    for s in &mut attackers {
        let (goaway, data) = until_goaway(s, Duration::from_secs(15));
        assert_eq!(goaway, Some(h2raw::ENHANCE_YOUR_CALM), "a stalled connection gets GOAWAY ENHANCE_YOUR_CALM");
        assert_eq!(data, 0, "no DATA may be sent into a zero window");
    }
    let took = started.elapsed();
    // Far below body_io (30 s): the stall timeout (1 s) cut them, not the per-stream timeout.
    assert!(took < Duration::from_secs(15), "stalled connections cut after {took:?}");
    // Every stream's upstream request and cluster slot is released at once.
    assert!(
        wait_until(Duration::from_secs(5), || gw.total("upstream_requests_active") <= 2),
        "stalled streams still hold upstream requests: {}",
        gw.stats()["totals"]
    );
    assert_eq!(gw.total("h2_abuse_stall"), 3);
    // Keep the good clients going a little after the cut, then stop them.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let (answers, bad) = good.join().unwrap();
    assert!(answers >= 10, "the good clients were served during the attack: {answers}");
    assert!(bad.is_empty(), "good clients must get 200 during and after the attack: {bad:?}");
    assert_eq!(gw.total("h2_abuse_stall"), 3, "the good HTTP/2 client is never cut");
}

#[test]
fn h2_stalled_connections_give_back_a_full_cluster() {
    let o = origin();
    let base = config("io_uring", o.addr(), SETTINGS, "");
    let text = base
        .replace(
            "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
            "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
        )
        .replace("connect_timeout = \"1s\"\n", "connect_timeout = \"1s\"\ncaps = { max_requests = 16 }\n");
    let gw = TestGateway::start(&text);
    // A stalled connection takes every slot of the cluster (16), and its further streams are
    // shed. (A connection whose streams were all refused holds no slot and is not stalled: its
    // short refusals are queued without waiting for window.)
    let mut attackers = [open_streams(gw.addr, 0, "/bytes/1048576", 24)];
    assert!(
        wait_until(Duration::from_secs(10), || gw.total("requests_shed") > 0),
        "the stalled streams fill the cluster: {}",
        gw.stats()["totals"]
    );
    for s in &mut attackers {
        assert_eq!(until_goaway(s, Duration::from_secs(15)).0, Some(h2raw::ENHANCE_YOUR_CALM));
    }
    // Without the stall timeout the slots would be held for body_io (30 s).
    assert!(
        wait_until(Duration::from_secs(5), || gw.total("upstream_requests_active") == 0),
        "the cut streams release their slots: {}",
        gw.stats()["totals"]
    );
    let r = get(gw.addr, "/bytes/4");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"abcd"[..]), "HTTP/1.1 client right after the cut");
    runtime().block_on(async {
        let mut c = h2_connect(gw.addr, None).await;
        let r = h2_request(&mut c, h2_get("http", "a", "/bytes/4"), None).await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcd"[..]), "HTTP/2 client right after the cut");
    });
    assert_eq!(gw.total("h2_abuse_stall"), 1);
}

#[test]
fn h2_slow_reader_that_opens_window_is_not_cut() {
    let o = origin();
    let gw = start(&o);
    // A 4 KiB stream window and the default 64 KiB connection window for a 96 KiB response:
    // the reader opens 4 KiB (stream and connection) every 300 ms, about 7 s in all, seven times
    // the stall timeout, with the response waiting for window nearly all the time.
    const SIZE: usize = 96 * 1024;
    const STEP: u32 = 4096;
    let mut s = open_streams(gw.addr, STEP, &format!("/bytes/{SIZE}"), 1);
    let started = Instant::now();
    let mut got = 0usize;
    let mut ended = false;
    let mut last_grant = Instant::now();
    let mut unexpected = Vec::new();
    while !ended && started.elapsed() < Duration::from_secs(30) {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        match h2raw::read_frame(&mut s) {
            Ok((h2raw::SETTINGS, flags, _, _)) if flags & h2raw::FLAG_ACK == 0 => {
                s.write_all(&h2raw::settings_ack()).unwrap();
            }
            Ok((h2raw::DATA, flags, 1, payload)) => {
                got += payload.len();
                ended = flags & h2raw::FLAG_END_STREAM != 0;
            }
            Ok((kind @ (h2raw::GOAWAY | h2raw::RST_STREAM), _, _, payload)) => {
                unexpected.push(format!("frame {kind} {payload:?}"));
                break;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => {
                unexpected.push(format!("closed: {e}"));
                break;
            }
        }
        if last_grant.elapsed() >= Duration::from_millis(300) {
            last_grant = Instant::now();
            let mut out = h2raw::window_update(1, STEP);
            out.extend(h2raw::window_update(0, STEP));
            s.write_all(&out).unwrap();
        }
    }
    let took = started.elapsed();
    assert!(unexpected.is_empty(), "the slow reader was cut after {took:?}: {unexpected:?}");
    assert!(ended && got == SIZE, "the whole body arrives: {got} of {SIZE} bytes in {took:?}");
    assert!(took > Duration::from_secs(3), "the read was slow ({took:?}), or the test proves nothing");
    assert_eq!(gw.total("h2_abuse_stall"), 0);
}

#[test]
fn h2_stall_is_cut_when_the_upstream_speaks_http2_too() {
    // The relay from an HTTP/2 upstream reports its waits for the client's window as well.
    let origin = common::h2origin::H2Origin::start(None);
    let text = config("io_uring", origin.addr, SETTINGS, "")
        .replace(
            "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
            "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
        )
        .replace("connect_timeout = \"1s\"\n", "connect_timeout = \"1s\"\nprotocol = \"h2\"\n")
        // The relay's idle timeout (the route's) far above the stall timeout too.
        .replace("timeout = \"2s\"\n", "timeout = \"20s\"\n");
    let gw = TestGateway::start(&text);
    let mut s = open_streams(gw.addr, 0, "/bytes/1048576", 10);
    let started = Instant::now();
    let (goaway, data) = until_goaway(&mut s, Duration::from_secs(15));
    assert_eq!(goaway, Some(h2raw::ENHANCE_YOUR_CALM), "after {:?}", started.elapsed());
    assert_eq!(data, 0);
    assert!(
        wait_until(Duration::from_secs(5), || gw.total("upstream_requests_active") == 0),
        "{}",
        gw.stats()["totals"]
    );
    assert_eq!(gw.total("h2_abuse_stall"), 1);
    runtime().block_on(async {
        let mut c = h2_connect(gw.addr, None).await;
        let r = h2_request(&mut c, h2_get("http", "a", "/bytes/4"), None).await.unwrap();
        assert_eq!((r.status, r.body.len()), (200, 4));
    });
}

/// Reads frames until the server's first SETTINGS and returns its MAX_CONCURRENT_STREAMS (None:
/// the connection closed first).
fn max_streams_announced(s: &mut TcpStream) -> Option<u32> {
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    loop {
        let (kind, flags, _, payload) = h2raw::read_frame(s).ok()?;
        if kind == h2raw::SETTINGS && flags & h2raw::FLAG_ACK == 0 {
            return Some(
                payload
                    .chunks(6)
                    .find(|c| u16::from_be_bytes([c[0], c[1]]) == 0x3)
                    .map_or(u32::MAX, |c| u32::from_be_bytes([c[2], c[3], c[4], c[5]])),
            );
        }
    }
}

#[test]
fn a_source_cut_for_stalling_gets_few_one_stream_connections_for_a_while() {
    let o = origin();
    let gw = start(&o);
    let fresh = |addr| {
        let mut s = connect(addr);
        let mut out = h2raw::preface();
        out.extend(h2raw::settings(&[]));
        s.write_all(&out).unwrap();
        s
    };
    assert_eq!(max_streams_announced(&mut fresh(gw.addr)), Some(100), "not penalized yet");
    let mut stalled = open_streams(gw.addr, 0, "/bytes/100000", 4);
    assert_eq!(until_goaway(&mut stalled, Duration::from_secs(5)).0, Some(0xb));
    // Now the source may hold four HTTP/2 connections of one stream each; a fifth is closed.
    let mut held: Vec<TcpStream> = (0..4).map(|_| fresh(gw.addr)).collect();
    for s in &mut held {
        assert_eq!(max_streams_announced(s), Some(1));
    }
    assert_eq!(max_streams_announced(&mut fresh(gw.addr)), None, "a fifth connection is refused");
    assert_eq!(gw.total("h2_abuse_penalized"), 1);
    // A penalized connection still serves, one stream at a time, and HTTP/1.1 is unaffected.
    drop(held.pop());
    runtime().block_on(async {
        let mut c = h2_connect(gw.addr, None).await;
        let r = h2_request(&mut c, h2_get("http", "a", "/bytes/10"), None).await.unwrap();
        assert_eq!(r.status, 200);
    });
    assert_eq!(get(gw.addr, "/bytes/10").status, 200);
}
