//! End-to-end: the defaults ride out one bad endpoint of three. Two good origins and one that
//! refuses connections (a port bound, then closed), resets every connection (SO_LINGER 0 after
//! reading the request) or accepts and never answers; the gateway config names only the
//! endpoints, round robin and a 2 s route timeout (no retry or outlier keys). 200 GETs from 8
//! concurrent clients on keep-alive connections (HTTP/1.1, then HTTP/2 prior knowledge), on
//! both I/O drivers, must all succeed; refusing and resetting cost at most 1.05 attempts per
//! request. Also: a POST is retried after a refused connection but not after a reset, later
//! POSTs avoid an endpoint whose last try was reset or timed out, and a shed 503 is never
//! retried.
//! Print the numbers with `cargo test -p gateway --test bad_endpoint -- --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::flaky::{Flaky, Mode};
use common::*;

const REQUESTS: usize = 200;
const CLIENTS: usize = 8;
/// Two workers, as the default `workers = "auto"` gives on this project's 2-core machines
/// (outlier detection and the retry budget are per worker).
const WORKERS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    Refusing,
    Resetting,
    Hanging,
    /// Answers with a head no parser accepts (a field line without a colon).
    Garbage,
}

/// The bad endpoint: counts the requests that reached it (none when refusing).
struct BadOrigin {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
}

impl BadOrigin {
    fn start(kind: Bad) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        if kind == Bad::Refusing {
            drop(listener);
            return Self { addr, requests };
        }
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || misbehave(stream, kind, &seen));
            }
        });
        Self { addr, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one request head, counts it, then resets the connection or holds it open (until the
/// gateway closes it, at most 30 s).
fn misbehave(mut s: TcpStream, kind: Bad, seen: &AtomicUsize) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    seen.fetch_add(1, Ordering::SeqCst);
    match kind {
        Bad::Resetting => {
            // SO_LINGER 0: close sends RST instead of FIN.
            socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
            drop(s);
        }
        Bad::Garbage => {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nthis is not a field\r\ncontent-length: 2\r\n\r\nok");
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        }
        _ => while matches!(s.read(&mut buf), Ok(n) if n > 0) {},
    }
}

/// Only the endpoints, round robin and the route timeout: every other key is the default.
fn start(driver: &str, endpoints: &[SocketAddr]) -> TestGateway {
    let endpoints: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    TestGateway::start(&format!(
        r#"
[server]
workers = {WORKERS}
io_driver = "{driver}"
admin = {{ address = "127.0.0.1:0" }}
drain_timeout = "1s"
log_level = "error"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["http/1.1", "h2"]

[[routes]]
name = "r"
cluster = "c"
timeout = "2s"

[[clusters]]
name = "c"
endpoints = [{}]
balancer = "round_robin"
"#,
        endpoints.join(", ")
    ))
}

/// 200 GETs from 8 keep-alive HTTP/1.1 clients: the statuses.
fn run_h1(addr: SocketAddr) -> Vec<u16> {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let s = connect(addr);
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut s = s;
                (0..REQUESTS / CLIENTS)
                    .map(|i| {
                        s.write_all(format!("GET /{c}/{i} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
                        read_response(&mut r, false).map_or(0, |resp| resp.status)
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
}

/// 200 GETs from 8 HTTP/2 (prior knowledge) connections, one request at a time each.
fn run_h2(addr: SocketAddr) -> Vec<u16> {
    clients::runtime().block_on(async move {
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::spawn(async move {
                    let mut send = clients::h2_connect(addr, None).await;
                    let mut statuses = Vec::new();
                    for i in 0..REQUESTS / CLIENTS {
                        let req = clients::h2_get("http", "a", &format!("/{c}/{i}"));
                        let done =
                            tokio::time::timeout(Duration::from_secs(10), clients::h2_request(&mut send, req, None));
                        statuses.push(match done.await {
                            Ok(Ok(resp)) => resp.status,
                            _ => 0,
                        });
                    }
                    statuses
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    })
}

/// One case: the requests' statuses all 200; returns (tries at the bad endpoint, attempts per
/// request, elapsed).
fn case(driver: &str, kind: Bad, h2: bool) -> (usize, f64, Duration) {
    let good = [Flaky::start(Mode::Ok), Flaky::start(Mode::Ok)];
    let bad = BadOrigin::start(kind);
    // The bad endpoint in the middle: round robin reaches it on the second pick.
    let gw = start(driver, &[good[0].addr, bad.addr, good[1].addr]);
    let started = Instant::now();
    let statuses = if h2 { run_h2(gw.addr) } else { run_h1(gw.addr) };
    let elapsed = started.elapsed();
    let label = format!("{driver}, {kind:?}, {}", if h2 { "HTTP/2" } else { "HTTP/1.1" });
    assert_eq!(statuses.len(), REQUESTS, "{label}");
    let failed: Vec<(usize, u16)> = statuses.iter().copied().enumerate().filter(|(_, s)| *s != 200).collect();
    assert!(
        failed.is_empty(),
        "{label}: {} of {REQUESTS} failed: {failed:?}; tries at the bad endpoint {}; stats {}",
        failed.len(),
        bad.requests(),
        gw.stats()["totals"]
    );
    let bad_tries = match kind {
        Bad::Refusing => gw.total("upstream_connect_errors") as usize,
        _ => bad.requests(),
    };
    let good_tries = good[0].attempts() + good[1].attempts();
    assert_eq!(good_tries, REQUESTS, "{label}: every request answered once by a good endpoint");
    // Every try cut at the adaptive per-try timeout is counted, and only those.
    let admin = gw.gw.as_ref().and_then(|g| g.admin_addr()).expect("admin port");
    let metrics = get(admin, "/metrics").text();
    let cut: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"gateway_cluster_try_timeouts_total{cluster="c"} "#))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{label}: no gateway_cluster_try_timeouts_total in\n{metrics}"));
    match kind {
        Bad::Hanging => assert_eq!(cut as usize, bad.requests(), "{label}: each try at the hanging endpoint was cut"),
        _ => assert_eq!(cut, 0, "{label}: no try timed out"),
    }
    let per_request = (good_tries + bad_tries) as f64 / REQUESTS as f64;
    println!(
        "{label}: {REQUESTS}/{REQUESTS} ok, {bad_tries} tries at the bad endpoint, {per_request:.3} attempts per \
         request, {} retries, {elapsed:?}",
        gw.total("upstream_retries")
    );
    (bad_tries, per_request, elapsed)
}

#[test]
fn a_refusing_endpoint_costs_at_most_five_percent_more_attempts() {
    each_driver(|d| {
        for h2 in [false, true] {
            let (_, per_request, _) = case(d, Bad::Refusing, h2);
            assert!(per_request <= 1.05, "{d}: {per_request:.3} attempts per request");
        }
    });
}

#[test]
fn a_resetting_endpoint_costs_at_most_five_percent_more_attempts() {
    each_driver(|d| {
        for h2 in [false, true] {
            let (_, per_request, _) = case(d, Bad::Resetting, h2);
            assert!(per_request <= 1.05, "{d}: {per_request:.3} attempts per request");
        }
    });
}

#[test]
fn a_hanging_endpoint_is_cut_and_retried_within_the_route_timeout() {
    each_driver(|d| {
        for h2 in [false, true] {
            let (saw_hang, _, _) = case(d, Bad::Hanging, h2);
            // Outlier detection ejects it after 3 timeouts in a row per worker; requests already
            // sent there when it is ejected are cut and retried too.
            assert!(saw_hang >= 1, "{d}: round robin reached the hanging endpoint");
        }
    });
}

/// The endpoints: one resetting, then `others`; one worker so round robin starts at the first.
fn one_worker(driver: &str, endpoints: &[SocketAddr]) -> TestGateway {
    let endpoints: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    TestGateway::start(&format!(
        r#"
[server]
workers = 1
io_driver = "{driver}"
admin = false
log_level = "error"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["http/1.1", "h2"]

[[routes]]
name = "r"
cluster = "c"
timeout = "2s"

[[clusters]]
name = "c"
endpoints = [{}]
balancer = "round_robin"
"#,
        endpoints.join(", ")
    ))
}

#[test]
fn a_post_is_not_retried_after_a_reset_but_a_get_and_a_put_are() {
    each_driver(|d| {
        let bad = BadOrigin::start(Bad::Resetting);
        let gw = one_worker(d, &[bad.addr]);
        let post = exchange(gw.addr, b"POST /p HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabc");
        assert_eq!(post.status, 502, "{d}");
        assert_eq!(bad.requests(), 1, "{d}: a POST is never retried by default");
        assert_eq!(gw.total("upstream_retries"), 0, "{d}");
        let resp = get(gw.addr, "/g");
        assert_eq!(resp.status, 502, "{d}");
        assert_eq!(bad.requests(), 1 + 3, "{d}: a GET is tried 1 + 2 times (num_retries)");
        drop(gw);
        // With a good endpoint beside it, a PUT's held body is sent again in full.
        let (bad, ok) = (BadOrigin::start(Bad::Resetting), Flaky::start(Mode::Ok));
        let gw = one_worker(d, &[bad.addr, ok.addr]);
        for i in 0..2 {
            let put = exchange(
                gw.addr,
                format!("PUT /u{i} HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello").as_bytes(),
            );
            assert_eq!(put.status, 200, "{d}: PUT {i}");
        }
        assert_eq!(bad.requests(), 1, "{d}: round robin sent one first try to the resetting endpoint");
        assert!(ok.seen().iter().all(|s| s.method == "PUT" && s.body == b"hello"), "{d}");
        assert_eq!(ok.attempts(), 2, "{d}");
    });
}

/// A refused connection means the upstream saw nothing: a POST goes to the next endpoint like
/// any request (as nginx, HAProxy and Envoy do), with its body whole, whether the body has a
/// length, is chunked or comes in HTTP/2 DATA frames (none of it was read before the connect).
#[test]
fn a_post_is_retried_when_the_connection_is_refused() {
    each_driver(|d| {
        let (bad, ok) = (BadOrigin::start(Bad::Refusing), Flaky::start(Mode::Ok));
        let gw = one_worker(d, &[bad.addr, ok.addr]);
        for i in 0..2 {
            let sized = format!("POST /len{i} HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello");
            assert_eq!(exchange(gw.addr, sized.as_bytes()).status, 200, "{d}: POST with a length {i}");
            let chunked = format!(
                "POST /chunked{i} HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"
            );
            assert_eq!(exchange(gw.addr, chunked.as_bytes()).status, 200, "{d}: chunked POST {i}");
        }
        let rt = clients::runtime();
        rt.block_on(async {
            let mut send = clients::h2_connect(gw.addr, None).await;
            for i in 0..2 {
                let post = clients::h2_post("http", "a", &format!("/h2-{i}"));
                let resp = clients::h2_request(&mut send, post, Some(bytes::Bytes::from_static(b"hello"))).await;
                assert_eq!(resp.unwrap().status, 200, "{d}: HTTP/2 POST {i}");
            }
        });
        let seen = ok.seen();
        assert_eq!(seen.len(), 6, "{d}: each POST reached the good origin once: {seen:?}");
        assert!(seen.iter().all(|s| s.method == "POST" && s.body == b"hello"), "{d}: {seen:?}");
        let retries = gw.total("upstream_retries");
        assert!(retries >= 1, "{d}: round robin sent a first try to the refusing endpoint");
        assert!(retries <= 3, "{d}: {retries} retries; outlier detection ejects it after 3 refusals");
    });
}

/// A POST cannot be retried after a reset or a timeout (the upstream may have acted on it), so
/// once an endpoint's last try failed that way, POSTs go to the others until it answers again
/// or `base_ejection_time` passes: one POST lost per worker, where waiting for the ejection
/// (3 gateway errors in a row) lost 3. GETs, which are retried, still go to it, and their
/// failures eject it.
#[test]
fn after_one_reset_or_timeout_posts_avoid_the_endpoint_and_gets_still_probe_it() {
    each_driver(|d| {
        for kind in [Bad::Resetting, Bad::Hanging] {
            let (bad, a, b) = (BadOrigin::start(kind), Flaky::start(Mode::Ok), Flaky::start(Mode::Ok));
            let gw = one_worker(d, &[bad.addr, a.addr, b.addr]);
            let statuses: Vec<u16> = (0..12)
                .map(|i| {
                    let post = format!("POST /p{i} HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello");
                    exchange(gw.addr, post.as_bytes()).status
                })
                .collect();
            let lost = if kind == Bad::Resetting { 502 } else { 504 };
            assert_eq!(statuses[0], lost, "{d} {kind:?}: round robin starts at the bad endpoint: {statuses:?}");
            assert!(statuses[1..].iter().all(|&s| s == 200), "{d} {kind:?}: {statuses:?}");
            assert_eq!(bad.requests(), 1, "{d} {kind:?}: one POST reached the bad endpoint");
            assert_eq!(a.attempts() + b.attempts(), 11, "{d} {kind:?}");
            if kind == Bad::Resetting {
                // GETs are retried after a reset: they still try it, and all succeed.
                assert!((0..6).all(|i| get(gw.addr, &format!("/g{i}")).status == 200), "{d}");
                assert!(bad.requests() > 1, "{d}: GETs still went to the suspect endpoint");
            }
        }
    });
}

/// An endpoint that never answers a SYN (a host gone behind a firewall), with a route timeout
/// (2 s) shorter than the connect timeout (3 s by default): the connect is cut at half the time
/// left, so a POST, which nothing was sent of, is retried on the good endpoint within its
/// timeout; before, the connect took the whole 2 s and the POST was answered 504. The next POST
/// passes the suspect endpoint over.
#[test]
fn a_connect_to_an_unreachable_endpoint_leaves_time_for_a_retry() {
    each_driver(|d| {
        let (bad, ok) = (Unreachable::start(), Flaky::start(Mode::Ok));
        let gw = one_worker(d, &[bad.addr, ok.addr]);
        let started = Instant::now();
        let post = exchange(gw.addr, b"POST /p0 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello");
        let took = started.elapsed();
        assert_eq!(post.status, 200, "{d}: retried after the connect was cut ({took:?})");
        assert!(took >= Duration::from_millis(900) && took < Duration::from_millis(1900), "{d}: {took:?}");
        let started = Instant::now();
        let post = exchange(gw.addr, b"POST /p1 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello");
        assert_eq!(post.status, 200, "{d}");
        assert!(started.elapsed() < Duration::from_millis(500), "{d}: the suspect endpoint was passed over");
        assert!(ok.seen().iter().all(|s| s.method == "POST" && s.body == b"hello"), "{d}");
        assert_eq!(ok.attempts(), 2, "{d}");
    });
}

/// A malformed answer is retried for no request by default (nginx and HAProxy do not either):
/// after one, every request passes the endpoint over until it answers properly or
/// `base_ejection_time` passes, so a GET is lost once per worker, as with nginx (`max_fails =
/// 1`), where 3 were lost before the ejection.
#[test]
fn after_one_malformed_answer_every_request_avoids_the_endpoint() {
    each_driver(|d| {
        let (bad, a, b) = (BadOrigin::start(Bad::Garbage), Flaky::start(Mode::Ok), Flaky::start(Mode::Ok));
        let gw = one_worker(d, &[bad.addr, a.addr, b.addr]);
        let gets: Vec<u16> = (0..9).map(|i| get(gw.addr, &format!("/g{i}")).status).collect();
        assert_eq!(gets[0], 502, "{d}: round robin starts at the bad endpoint: {gets:?}");
        assert!(gets[1..].iter().all(|&s| s == 200), "{d}: {gets:?}");
        let post = exchange(gw.addr, b"POST /p HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello");
        assert_eq!(post.status, 200, "{d}");
        assert_eq!(bad.requests(), 1, "{d}: one request reached the endpoint that answers garbage");
        assert_eq!(a.attempts() + b.attempts(), 9, "{d}");
    });
}

#[test]
fn a_shed_503_and_a_plain_503_are_not_retried_by_default() {
    for mode in [Mode::Shed, Mode::Unavailable] {
        let (first, ok) = (Flaky::start(mode), Flaky::start(Mode::Ok));
        let gw = one_worker("epoll", &[first.addr, ok.addr]);
        let resp = get(gw.addr, "/");
        assert_eq!(resp.status, 503, "{mode:?}");
        assert_eq!((first.attempts(), ok.attempts()), (1, 0), "{mode:?}: not retried");
        assert_eq!(gw.total("upstream_retries"), 0, "{mode:?}");
        if mode == Mode::Shed {
            assert_eq!(resp.header("x-gateway-reason"), Some("shed"));
        }
    }
}

/// A slow but working cluster (both endpoints answer after 1.2 s, route timeout 2 s): the
/// first request on a fresh worker is cut at half the route timeout on both endpoints and
/// answered 504; that teaches the worker the cluster is slow, and no later try is cut.
#[test]
fn a_slow_cluster_loses_one_request_per_worker_then_its_tries_are_not_cut() {
    each_driver(|d| {
        let (a, b) = (origin(), origin());
        let gw = one_worker(d, &[a.addr(), b.addr()]);
        let first = get(gw.addr, "/delay/1200");
        assert_eq!(first.status, 504, "{d}: the warm-up cut (1 s) was too short, and so was the rest");
        for i in 0..3 {
            assert_eq!(get(gw.addr, "/delay/1200").status, 200, "{d}: request {i} after the lesson");
        }
        // 2 tries for the first request, 1 for each later one.
        assert_eq!(a.requests() + b.requests(), 2 + 3, "{d}");
    });
}
