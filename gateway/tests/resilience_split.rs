//! End-to-end: weighted splits (canary), sticky keys, pins and mirroring, with real origins
//! that count what reaches them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::clients::{h2_connect, h2_get, h2_request, runtime};
use common::*;

/// What reached a test origin.
#[derive(Clone, Default)]
struct Seen {
    /// Complete request heads received (with their bodies read).
    heads: Arc<Mutex<Vec<String>>>,
    /// Connections open now, and the most open at once.
    open: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Seen {
    fn count(&self) -> usize {
        self.heads.lock().unwrap().len()
    }
    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// An HTTP/1.1 keep-alive origin answering every request with its `name` as the body, or, when
/// `hang`, reading requests and never answering (until the peer closes).
fn test_origin(name: &'static str, hang: bool) -> (SocketAddr, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Seen::default();
    let shared = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let seen = shared.clone();
            std::thread::spawn(move || serve(s, name, hang, &seen));
        }
    });
    (addr, seen)
}

fn serve(mut s: TcpStream, name: &str, hang: bool, seen: &Seen) {
    let open = seen.open.fetch_add(1, SeqCst) + 1;
    seen.peak.fetch_max(open, SeqCst);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut fill = |s: &mut TcpStream, buf: &mut Vec<u8>| match s.read(&mut chunk) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    };
    'conn: loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !fill(&mut s, &mut buf) {
                break 'conn;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap_or(0);
        while buf.len() < end + length {
            if !fill(&mut s, &mut buf) {
                break 'conn;
            }
        }
        buf.drain(..end + length);
        seen.heads.lock().unwrap().push(head);
        if hang {
            continue;
        }
        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}", name.len());
        if s.write_all(answer.as_bytes()).is_err() {
            break;
        }
    }
    seen.open.fetch_sub(1, SeqCst);
}

/// A gateway with `workers` workers, an admin port, listener `main` (HTTP/1.1 and h2c), the
/// given routes and one cluster per `(name, address)`.
fn start(driver: &str, workers: usize, routes: &str, clusters: &[(&str, SocketAddr)]) -> TestGateway {
    TestGateway::start(&config_text(driver, workers, routes, clusters))
}

fn config_text(driver: &str, workers: usize, routes: &str, clusters: &[(&str, SocketAddr)]) -> String {
    let clusters: String = clusters
        .iter()
        .map(|(name, addr)| {
            format!("[[clusters]]\nname = \"{name}\"\nendpoints = [\"{addr}\"]\nconnect_timeout = \"500ms\"\n")
        })
        .collect();
    format!(
        r#"
[server]
workers = {workers}
io_driver = "{driver}"
admin = {{ address = "127.0.0.1:0" }}
drain_timeout = "1s"
log_level = "warn"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["http/1.1", "h2"]

{routes}

{clusters}
"#
    )
}

/// A keep-alive HTTP/1.1 client connection.
struct Client(BufReader<TcpStream>);

impl Client {
    fn new(addr: SocketAddr) -> Self {
        Self(BufReader::new(connect(addr)))
    }

    /// `method path` with `extra` header lines (each ending in CRLF) and an optional body.
    fn send(&mut self, method: &str, path: &str, extra: &str, body: &str) -> Resp {
        let length = if body.is_empty() { String::new() } else { format!("content-length: {}\r\n", body.len()) };
        let req = format!("{method} {path} HTTP/1.1\r\nhost: split.test\r\n{extra}{length}\r\n{body}");
        self.0.get_mut().write_all(req.as_bytes()).unwrap();
        read_response(&mut self.0, method == "HEAD").unwrap()
    }

    fn get(&mut self, path: &str, extra: &str) -> Resp {
        self.send("GET", path, extra, "")
    }
}

/// The sum over workers of the samples of metric `name` whose labels include `labels`.
fn metric(gw: &TestGateway, name: &str, labels: &[(&str, &str)]) -> f64 {
    let admin = gw.gw.as_ref().unwrap().admin_addr().unwrap();
    let text = get(admin, "/metrics").text();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// Waits until at least `min` copies reached `shadow` and every one of them was counted as
/// mirrored (answered), for five polls in a row.
fn settle(gw: &TestGateway, shadow: &Seen, min: usize) {
    let mut stable = 0;
    let settled = wait_until(Duration::from_secs(5), || {
        let n = shadow.count();
        let counted = metric(gw, "gateway_route_mirror_requests_total", &[("result", "mirrored")]) as usize;
        stable = if n >= min && n == counted { stable + 1 } else { 0 };
        stable >= 5
    });
    assert!(settled, "{} copies at the shadow, at least {min} expected", shadow.count());
}

#[test]
fn canary_weights_split_within_binomial_bounds() {
    each_driver(|d| {
        let (v1, seen1) = test_origin("v1", false);
        let (v2, seen2) = test_origin("v2", false);
        let routes = r#"
[[routes]]
name = "canary"
split = [{ cluster = "v1", weight = 90 }, { cluster = "v2", weight = 10 }]
"#;
        let gw = start(d, 1, routes, &[("v1", v1), ("v2", v2)]);
        let mut bodies = [0usize; 2];
        for _ in 0..4 {
            let mut c = Client::new(gw.addr);
            for _ in 0..500 {
                let r = c.get("/x", "");
                assert_eq!(r.status, 200, "{d}");
                bodies[usize::from(r.text() == "v2")] += 1;
            }
        }
        // 2,000 requests at p = 0.1: the count at v2 is Binomial(2000, 0.1), mean 200,
        // sd sqrt(2000 * 0.1 * 0.9) = 13.4. The bound +-80 is about 6 sd: a correct split
        // falls outside it with probability about 2e-9.
        let (n1, n2) = (seen1.count(), seen2.count());
        assert_eq!(n1 + n2, 2000, "{d}");
        assert!((120..=280).contains(&n2), "{d}: v1 {n1}, v2 {n2}");
        assert_eq!(bodies, [n1, n2], "{d}: every answer came from the origin it was counted at");
        let decided = |cluster| metric(&gw, "gateway_route_split_decisions_total", &[("cluster", cluster)]);
        assert_eq!((decided("v1"), decided("v2")), (n1 as f64, n2 as f64), "{d}: decisions counted per cluster");
    });
}

#[test]
fn sticky_keys_stay_on_one_cluster_in_every_worker() {
    each_driver(|d| {
        let (v1, seen1) = test_origin("v1", false);
        let (v2, seen2) = test_origin("v2", false);
        let routes = r#"
[[routes]]
name = "cookie"
match = { path_prefix = "/c" }
split = [{ cluster = "v1", weight = 90 }, { cluster = "v2", weight = 10 }]
sticky = { cookie = "uid" }

[[routes]]
name = "header"
split = [{ cluster = "v1", weight = 90 }, { cluster = "v2", weight = 10 }]
sticky = { header = "x-user-id" }
"#;
        // Two workers: each request on a new connection, so the kernel spreads them.
        let gw = start(d, 2, routes, &[("v1", v1), ("v2", v2)]);
        let mut on_v2 = 0;
        for user in 0..300 {
            let first = Client::new(gw.addr).get("/x", &format!("x-user-id: user-{user}\r\n")).text();
            for _ in 0..2 {
                let again = Client::new(gw.addr).get("/x", &format!("x-user-id: user-{user}\r\n")).text();
                assert_eq!(again, first, "{d}: user-{user} moved between clusters");
            }
            // The same key as a cookie lands on the same cluster (one hash for both).
            let cookie = Client::new(gw.addr).get("/c", &format!("cookie: a=1; uid=user-{user}\r\n")).text();
            assert_eq!(cookie, first, "{d}: user-{user} by cookie");
            on_v2 += usize::from(first == "v2");
        }
        // The hash is deterministic, so these keys always split the same way; the bound is
        // what a fair split of 300 keys at 10% allows (mean 30, sd 5.2, +-20 is about 4 sd).
        assert!((10..=50).contains(&on_v2), "{d}: {on_v2} of 300 keys on v2");
        let stats = gw.stats();
        let per_worker = stats["workers"].as_array().unwrap();
        assert!(per_worker.iter().all(|w| w["requests_total"].as_u64() > Some(0)), "{d}: both workers served");
        // Requests without the key are split at random by weight. Binomial(600, 0.1):
        // mean 60, sd 7.3; 25..=95 is about 4.8 sd (a failure chance near 1e-6).
        let before = seen2.count();
        let mut c = Client::new(gw.addr);
        for _ in 0..600 {
            assert_eq!(c.get("/x", "").status, 200);
        }
        let keyless = seen2.count() - before;
        assert!((25..=95).contains(&keyless), "{d}: {keyless} of 600 keyless requests on v2");
        assert_eq!(seen1.count() + seen2.count(), 300 * 4 + 600, "{d}");
        let sticky = metric(&gw, "gateway_route_split_decisions_total", &[("route", "header"), ("reason", "sticky")]);
        assert_eq!(sticky, 900.0, "{d}");
    });
}

#[test]
fn a_pin_header_sends_everything_to_the_pinned_cluster() {
    each_driver(|d| {
        let (v1, seen1) = test_origin("v1", false);
        let (v2, seen2) = test_origin("v2", false);
        let routes = r#"
[[routes]]
name = "dogfood"
split = [{ cluster = "v1", weight = 10000 }, { cluster = "v2", weight = 0 }]
pin = [{ header = "x-canary", value = "1", cluster = "v2" }]
"#;
        let gw = start(d, 1, routes, &[("v1", v1), ("v2", v2)]);
        let mut c = Client::new(gw.addr);
        for _ in 0..200 {
            assert_eq!(c.get("/x", "x-canary: 1\r\n").text(), "v2", "{d}");
            assert_eq!(c.get("/x", "x-canary: 2\r\n").text(), "v1", "{d}: the value must match");
            assert_eq!(c.get("/x", "").text(), "v1", "{d}");
        }
        assert_eq!((seen1.count(), seen2.count()), (400, 200), "{d}");
        // The same over HTTP/2 (the other dispatch site).
        let rt = runtime();
        rt.block_on(async {
            let mut h2 = h2_connect(gw.addr, None).await;
            for _ in 0..50 {
                let mut req = h2_get("http", "split.test", "/x");
                req.headers_mut().insert("x-canary", http::HeaderValue::from_static("1"));
                let r = h2_request(&mut h2, req, None).await.unwrap();
                assert_eq!((r.status, r.body.as_slice()), (200, &b"v2"[..]), "{d}");
            }
        });
        assert_eq!(seen2.count(), 250, "{d}");
        assert_eq!(metric(&gw, "gateway_route_split_decisions_total", &[("reason", "pin")]), 250.0, "{d}");
    });
}

#[test]
fn mirror_copies_reach_the_shadow_with_the_marker_and_post_is_not_mirrored() {
    each_driver(|d| {
        let (primary, seen_primary) = test_origin("primary", false);
        let (shadow, seen_shadow) = test_origin("shadow", false);
        let routes = r#"
[[routes]]
name = "mirrored"
cluster = "primary"
# Room for every copy even when a loaded machine keeps them in flight for a while (the bound
# itself is tested below).
mirror = { cluster = "shadow", max_in_flight = 100 }
"#;
        let gw = start(d, 1, routes, &[("primary", primary), ("shadow", shadow)]);
        let mut c = Client::new(gw.addr);
        for i in 0..20 {
            // A client cannot pass itself off as a copy: its marker is never forwarded.
            let r = c.get(&format!("/get/{i}?q=1"), "x-user: u\r\nx-gateway-mirror: forged\r\n");
            assert_eq!((r.status, r.text().as_str()), (200, "primary"), "{d}: the client sees the primary");
        }
        // A POST with a body is not mirrored, nor is a method outside the default list.
        assert_eq!(c.send("POST", "/post", "", "hello").text(), "primary");
        assert_eq!(c.send("DELETE", "/delete", "", "").text(), "primary");
        assert_eq!(c.get("/after", "").text(), "primary");
        // HTTP/2 clients are mirrored too.
        let rt = runtime();
        rt.block_on(async {
            let mut h2 = h2_connect(gw.addr, None).await;
            let r = h2_request(&mut h2, h2_get("http", "split.test", "/from-h2"), None).await.unwrap();
            assert_eq!((r.status, r.body.as_slice()), (200, &b"primary"[..]), "{d}");
        });
        // Copies travel on their own connections and may arrive in any order: wait until
        // every copy that reached the shadow was also counted as answered, and stays so.
        settle(&gw, &seen_shadow, 22);
        let mut lines: Vec<String> =
            seen_shadow.heads().iter().map(|h| h.lines().next().unwrap_or_default().to_owned()).collect();
        lines.sort();
        let mut expected: Vec<String> = (0..20).map(|i| format!("GET /get/{i}?q=1 HTTP/1.1")).collect();
        expected.extend(["GET /after HTTP/1.1".to_owned(), "GET /from-h2 HTTP/1.1".to_owned()]);
        expected.sort();
        assert_eq!(lines, expected, "{d}: one copy of each GET, none of POST or DELETE");
        for head in seen_shadow.heads() {
            assert!(head.contains("\r\nx-gateway-mirror: 1\r\n"), "{d}: marked: {head}");
            assert!(!head.contains("forged"), "{d}: the client's marker is dropped: {head}");
            assert!(head.to_ascii_lowercase().contains("\r\nhost: split.test\r\n"), "{d}: host kept: {head}");
            assert!(head.contains("\r\nx-user: u\r\n") || !head.contains("/get/"), "{d}: {head}");
        }
        assert!(seen_primary.heads().iter().all(|h| !h.contains("x-gateway-mirror")), "{d}: primary unmarked");
        assert_eq!(seen_primary.count(), 24, "{d}");
    });
}

/// Sends `n` GETs to `path`, each on a new connection; all must be answered by the primary
/// and none may take `limit`. Returns the total time.
fn timed_gets(gw: &TestGateway, path: &str, n: usize, limit: Duration) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        let r = Client::new(gw.addr).get(path, "");
        assert_eq!((r.status, r.text().as_str()), (200, "primary"), "request {i} to {path}");
        assert!(t.elapsed() < limit, "request {i} to {path} took {:?}", t.elapsed());
    }
    started.elapsed()
}

#[test]
fn a_hanging_or_down_shadow_never_delays_or_fails_the_primary() {
    each_driver(|d| {
        let (primary, _) = test_origin("primary", false);
        let (hanging, seen_hanging) = test_origin("hanging", true);
        let down = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let routes = r#"
[[routes]]
name = "plain"
match = { path_prefix = "/plain" }
cluster = "primary"

[[routes]]
name = "to-hanging"
match = { path_prefix = "/hanging" }
cluster = "primary"
timeout = "3s"
mirror = { cluster = "hanging", max_in_flight = 4 }

[[routes]]
name = "to-down"
match = { path_prefix = "/down" }
cluster = "primary"
timeout = "3s"
mirror = { cluster = "down" }
"#;
        let workers = 2;
        let gw = start(d, workers, routes, &[("primary", primary), ("hanging", hanging), ("down", down)]);
        // A request that waited for the hanging shadow would take the 3 s route timeout.
        let limit = Duration::from_secs(1);
        let baseline = timed_gets(&gw, "/plain", 60, limit);
        let with_hanging = timed_gets(&gw, "/hanging", 60, limit);
        let with_down = timed_gets(&gw, "/down", 60, limit);
        // Loose: timing on a shared machine is noisy; waiting on the shadow would cost 60 x 3 s.
        let loose = baseline * 5 + Duration::from_secs(2);
        assert!(with_hanging < loose, "{d}: {with_hanging:?} vs baseline {baseline:?}");
        assert!(with_down < loose, "{d}: {with_down:?} vs baseline {baseline:?}");
        // The hanging shadow holds at most max_in_flight copies per worker, and reaches it.
        assert!(wait_until(Duration::from_secs(2), || seen_hanging.count() >= 4), "{d}");
        let peak = seen_hanging.peak.load(SeqCst);
        assert!((4..=4 * workers).contains(&peak), "{d}: {peak} copies in flight at once");
        let dropped =
            metric(&gw, "gateway_route_mirror_requests_total", &[("route", "to-hanging"), ("result", "dropped")]);
        assert!(dropped >= (60 - 4 * workers) as f64, "{d}: {dropped} dropped");
        let failed =
            || metric(&gw, "gateway_route_mirror_requests_total", &[("route", "to-down"), ("result", "failed")]);
        assert!(wait_until(Duration::from_secs(3), || failed() == 60.0), "{d}: {} failed", failed());
        // The hanging copies end at the route timeout and count as failed; the bound frees up.
        let ended =
            || metric(&gw, "gateway_route_mirror_requests_total", &[("route", "to-hanging"), ("result", "failed")]);
        assert!(wait_until(Duration::from_secs(6), || ended() == seen_hanging.count() as f64), "{d}");
        assert!(wait_until(Duration::from_secs(2), || seen_hanging.open.load(SeqCst) == 0), "{d}: copies closed");
        timed_gets(&gw, "/hanging", 1, limit);
        assert!(wait_until(Duration::from_secs(2), || seen_hanging.open.load(SeqCst) == 1), "{d}: mirrored again");
    });
}

#[test]
fn mirror_percent_samples_roughly_that_share() {
    each_driver(|d| {
        let (primary, _) = test_origin("primary", false);
        let (shadow, seen_shadow) = test_origin("shadow", false);
        let routes = r#"
[[routes]]
name = "sampled"
cluster = "primary"
mirror = { cluster = "shadow", percent = 25, max_in_flight = 1000 }
"#;
        let gw = start(d, 1, routes, &[("primary", primary), ("shadow", shadow)]);
        let mut c = Client::new(gw.addr);
        for _ in 0..800 {
            assert_eq!(c.get("/x", "").text(), "primary");
        }
        settle(&gw, &seen_shadow, 1);
        // Binomial(800, 0.25): mean 200, sd 12.2; 140..=260 is about 4.9 sd (failure near 1e-6).
        let n = seen_shadow.count();
        assert!((140..=260).contains(&n), "{d}: {n} of 800 mirrored at 25%");
    });
}

#[test]
fn a_reload_changes_the_weights_and_keeps_the_mirror_bound() {
    let (v1, _) = test_origin("v1", false);
    let (v2, _) = test_origin("v2", false);
    let (hanging, seen_hanging) = test_origin("hanging", true);
    let routes = |w1: u32, w2: u32| {
        format!(
            r#"
[[routes]]
name = "canary"
split = [{{ cluster = "v1", weight = {w1} }}, {{ cluster = "v2", weight = {w2} }}]
timeout = "5s"
mirror = {{ cluster = "hanging", max_in_flight = 2 }}
"#
        )
    };
    let clusters = [("v1", v1), ("v2", v2), ("hanging", hanging)];
    let gw = start("epoll", 1, &routes(1, 0), &clusters);
    let mut c = Client::new(gw.addr);
    for _ in 0..5 {
        assert_eq!(c.get("/x", "").text(), "v1");
    }
    let dropped = || metric(&gw, "gateway_route_mirror_requests_total", &[("result", "dropped")]);
    assert_eq!(dropped(), 3.0, "two copies hang, three were dropped");
    // Same route name, new weights: the two hanging copies still hold the route's bound.
    let text = config_text("epoll", 1, &routes(0, 1), &clusters);
    let gateway = gw.gw.as_ref().unwrap();
    gateway.apply(gateway_config::parse(&text, "<reload>").unwrap()).unwrap();
    for _ in 0..5 {
        assert_eq!(c.get("/x", "").text(), "v2", "the new weights apply");
    }
    assert_eq!(dropped(), 8.0, "the bound held across the reload");
    assert!(wait_until(Duration::from_secs(2), || seen_hanging.count() == 2));
    assert_eq!(seen_hanging.peak.load(SeqCst), 2);
}
