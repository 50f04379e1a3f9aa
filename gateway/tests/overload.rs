//! End-to-end: priority-class shedding, caps, rate limits and the priority header.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::*;

/// One worker; routes by class (`x-class` header) to one origin with `caps.max_requests = cap`
/// and the adaptive limit off, so the class limit is fixed (`cap` minus the first class's
/// headroom: 1 for a cap of 2) and tests are deterministic.
fn cfg(driver: &str, origin: std::net::SocketAddr, cap: usize, overload: &str, route_extra: &str) -> String {
    format!(
        r#"
[server]
workers = 1
io_driver = "{driver}"
admin = false
log_level = "warn"

[overload]
{overload}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "critical"
match = {{ headers = [{{ name = "x-class", value = "critical" }}] }}
cluster = "origin"
priority = "critical"
timeout = "5s"

[[routes]]
name = "high"
match = {{ headers = [{{ name = "x-class", value = "high" }}] }}
cluster = "origin"
priority = "high"
timeout = "5s"

[[routes]]
name = "normal"
match = {{ headers = [{{ name = "x-class", value = "normal" }}] }}
cluster = "origin"
priority = "normal"
timeout = "5s"

[[routes]]
name = "sheddable"
match = {{ headers = [{{ name = "x-class", value = "sheddable" }}] }}
cluster = "origin"
priority = "sheddable"
timeout = "5s"
{route_extra}

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
caps = {{ max_requests = {cap}, max_pending = 4 }}
adaptive_concurrency = {{ enabled = false, initial_limit = 1, min_limit = 1 }}
"#
    )
}

/// A GET of `path` in priority class `class` (routes match on the `x-class` header).
fn get_as(addr: std::net::SocketAddr, class: &str, path: &str) -> Resp {
    exchange(addr, format!("GET {path} HTTP/1.1\r\nhost: a\r\nx-class: {class}\r\n\r\n").as_bytes())
}

/// Occupies one upstream slot for `ms` on a `class` route; returns the thread.
fn hold(addr: std::net::SocketAddr, class: &str, ms: u64) -> std::thread::JoinHandle<Resp> {
    let (class, path) = (class.to_string(), format!("/delay/{ms}"));
    std::thread::spawn(move || get_as(addr, &class, &path))
}

fn wait_in_flight(o: &Origin, n: usize) {
    assert!(wait_until(Duration::from_secs(3), || o.received().len() >= n), "origin saw {}", o.received().len());
}

#[test]
fn sheddable_is_refused_at_once_with_503_and_reaches_no_origin() {
    each_driver(|d| {
        let o = origin();
        let toml = cfg(d, o.addr(), 2, "", "").replace("admin = false", "admin = { address = \"127.0.0.1:0\" }");
        let gw = TestGateway::start(&toml);
        let busy = hold(gw.addr, "normal", 600);
        wait_in_flight(&o, 1);
        let started = Instant::now();
        let r = get_as(gw.addr, "sheddable", "/x");
        let took = started.elapsed();
        assert_eq!(r.status, 503, "{d}");
        assert_eq!(r.header("x-gateway-reason"), Some("shed"));
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(took < Duration::from_millis(300), "{d}: refused quickly, took {took:?}");
        assert_eq!(busy.join().unwrap().status, 200);
        assert_eq!(o.received().len(), 1, "{d}: the shed request never reached the origin");
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_shed") == 1));
        let admin = gw.gw.as_ref().unwrap().admin_addr().unwrap();
        let metrics = get(admin, "/metrics?per_worker=1").text();
        for line in [
            r#"gateway_priority_requests_total{priority="sheddable",outcome="shed",worker="0"} 1"#,
            r#"gateway_priority_requests_total{priority="normal",outcome="served",worker="0"} 1"#,
            r#"gateway_admission_decisions_total{decision="shed",worker="0"} 1"#,
            r#"gateway_route_admission_total{route="sheddable",outcome="shed",worker="0"} 1"#,
            r#"gateway_route_admission_total{route="normal",outcome="served",worker="0"} 1"#,
        ] {
            assert!(metrics.lines().any(|l| l == line), "{d}: missing {line}");
        }
    });
}

#[test]
fn classes_are_served_in_order_critical_uses_headroom_normal_waits_briefly() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&cfg(d, o.addr(), 2, "", ""));
        let busy = hold(gw.addr, "normal", 800);
        wait_in_flight(&o, 1);
        // Critical is admitted on the headroom above the limit.
        let r = get_as(gw.addr, "critical", "/bytes/3");
        assert_eq!(r.status, 200, "{d}");
        // Normal waits for a slot only briefly (a share of the no-load latency), then is shed.
        let started = Instant::now();
        let r = get_as(gw.addr, "normal", "/bytes/3");
        assert_eq!((r.status, r.header("x-gateway-reason")), (503, Some("shed")), "{d}");
        assert!(started.elapsed() < Duration::from_millis(500), "{d}: bounded wait {:?}", started.elapsed());
        assert_eq!(busy.join().unwrap().status, 200);
        // With the slot free, every class is served.
        for class in ["critical", "normal", "sheddable"] {
            assert_eq!(get_as(gw.addr, class, "/bytes/1").status, 200, "{d}: {class}");
        }
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_queued") >= 1));
    });
}

#[test]
fn a_waiting_request_gets_the_freed_slot_before_any_sheddable() {
    each_driver(|d| {
        let o = origin();
        // A generous wait for `high`: 20 ms default baseline x 10 = 200 ms.
        let gw = TestGateway::start(&cfg(d, o.addr(), 2, "queue_wait_factor = 10.0", ""));
        let busy = hold(gw.addr, "normal", 60);
        wait_in_flight(&o, 1);
        let addr = gw.addr;
        let waiting = std::thread::spawn(move || get_as(addr, "high", "/bytes/2"));
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(get_as(gw.addr, "sheddable", "/bytes/1").status, 503, "{d}: a waiter outranks sheddable");
        assert_eq!(busy.join().unwrap().status, 200);
        assert_eq!(waiting.join().unwrap().status, 200, "{d}: the waiter got the freed slot");
    });
}

#[test]
fn with_shedding_off_a_full_cluster_overflows() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&cfg(d, o.addr(), 1, "enabled = false", ""));
        let busy = hold(gw.addr, "critical", 500);
        wait_in_flight(&o, 1);
        let r = get_as(gw.addr, "critical", "/x");
        assert_eq!((r.status, r.header("x-gateway-reason")), (503, Some("overflow")), "{d}");
        assert_eq!(busy.join().unwrap().status, 200);
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_overflow") == 1));
    });
}

#[test]
fn rate_limits_answer_429_with_retry_after_and_ratelimit_headers() {
    each_driver(|d| {
        let o = origin();
        let limited = r#"
[[routes]]
name = "limited"
match = { path_prefix = "/limited" }
cluster = "origin"
rate_limit = { rate = 1, burst = 2 }
"#;
        let gw = TestGateway::start(&cfg(d, o.addr(), 8, "", limited));
        assert_eq!(get(gw.addr, "/limited/a").status, 200);
        assert_eq!(get(gw.addr, "/limited/b").status, 200);
        let r = get(gw.addr, "/limited/c");
        assert_eq!(r.status, 429, "{d}");
        assert_eq!(r.header("x-gateway-reason"), Some("rate-limited"));
        let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=2).contains(&retry), "{retry}");
        assert!(r.header("ratelimit-policy").unwrap().contains("q=2"), "{:?}", r.headers);
        assert!(r.header("ratelimit").unwrap().contains("r=0"), "{:?}", r.headers);
        assert_eq!(o.received().len(), 2, "{d}: the limited request reached no origin");
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_rate_limited") == 1));
    });
}

#[test]
fn delay_mode_waits_for_a_token_within_its_bound() {
    each_driver(|d| {
        let o = origin();
        let routes = r#"
[[routes]]
name = "smooth"
match = { path_prefix = "/smooth" }
cluster = "origin"
rate_limit = { rate = 10, burst = 1, mode = "delay", max_delay = "500ms" }

[[routes]]
name = "strict"
match = { path_prefix = "/strict" }
cluster = "origin"
rate_limit = { rate = 1, burst = 1, mode = "delay", max_delay = "50ms" }
"#;
        let gw = TestGateway::start(&cfg(d, o.addr(), 8, "", routes));
        let started = Instant::now();
        for _ in 0..3 {
            assert_eq!(get(gw.addr, "/smooth/x").status, 200, "{d}");
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(150),
            "{d}: 3 requests at 10/s take >= 200 ms minus slack, took {took:?}"
        );
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_delayed") >= 2));
        assert_eq!(get(gw.addr, "/strict/x").status, 200);
        let started = Instant::now();
        let r = get(gw.addr, "/strict/x");
        assert_eq!(r.status, 429, "{d}: a token is a second away, beyond the 50 ms bound");
        assert!(started.elapsed() < Duration::from_millis(400), "{d}: never an unbounded wait");
    });
}

#[test]
fn an_untrusted_client_cannot_raise_its_priority_and_the_header_never_reaches_the_origin() {
    each_driver(|d| {
        let o = origin();
        let untrusted = "priority_header = \"x-gateway-priority\"\ntrusted_sources = [\"10.0.0.0/8\"]";
        let gw = TestGateway::start(&cfg(d, o.addr(), 2, untrusted, ""));
        let busy = hold(gw.addr, "normal", 500);
        wait_in_flight(&o, 1);
        let r = exchange(
            gw.addr,
            b"GET /x HTTP/1.1\r\nhost: a\r\nx-class: sheddable\r\nx-gateway-priority: critical\r\n\r\n",
        );
        assert_eq!(r.status, 503, "{d}: the claim of an untrusted client is ignored");
        busy.join().unwrap();
        drop(gw);

        let trusted = "priority_header = \"x-gateway-priority\"\ntrusted_sources = [\"127.0.0.1/32\"]";
        let gw = TestGateway::start(&cfg(d, o.addr(), 2, trusted, ""));
        let busy = hold(gw.addr, "normal", 500);
        wait_in_flight(&o, 2);
        let r = exchange(
            gw.addr,
            b"GET /headers HTTP/1.1\r\nhost: a\r\nx-class: sheddable\r\nx-gateway-priority: critical\r\n\r\n",
        );
        assert_eq!(r.status, 200, "{d}: a trusted source may raise the class");
        assert!(!r.text().to_ascii_lowercase().contains("x-gateway-priority"), "{d}: header stripped: {}", r.text());
        busy.join().unwrap();
    });
}

#[test]
fn at_the_connection_limit_a_new_connection_waits_and_is_served_when_a_slot_frees() {
    each_driver(|d| {
        let o = origin();
        let toml = config(d, o.addr(), "[server.limits]\nmax_connections_per_worker = 2", "");
        let gw = TestGateway::start(&toml);
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut s = connect(gw.addr);
            s.write_all(b"GET /bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            let mut r = std::io::BufReader::new(s);
            assert_eq!(read_response(&mut r, false).unwrap().status, 200);
            held.push(r);
        }
        // The third connection completes its TCP handshake (kernel backlog) but is not served yet.
        let addr = gw.addr;
        let third = std::thread::spawn(move || {
            let started = Instant::now();
            let r = get(addr, "/bytes/2");
            (r, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(!third.is_finished(), "{d}: waits while the worker is full");
        drop(held.pop());
        let (r, took) = third.join().unwrap();
        assert_eq!(r.status, 200, "{d}: served once a slot freed");
        assert!(took >= Duration::from_millis(250), "{d}: {took:?}");
        assert!(gw.total("connections_rejected") >= 1);
    });
}

#[test]
fn the_connection_cap_of_a_cluster_answers_overflow_and_reuses_what_it_has() {
    each_driver(|d| {
        let o = origin();
        let toml = config(d, o.addr(), "", "").replace(
            "connect_timeout = \"1s\"",
            "connect_timeout = \"1s\"\ncaps = { max_connections = 1 }\nadaptive_concurrency = { enabled = false }",
        );
        let gw = TestGateway::start(&toml);
        let addr = gw.addr;
        let busy = std::thread::spawn(move || get(addr, "/delay/400"));
        assert!(wait_until(Duration::from_secs(3), || o.received().len() == 1));
        let r = get(gw.addr, "/bytes/1");
        assert_eq!((r.status, r.header("x-gateway-reason")), (503, Some("overflow")), "{d}");
        assert_eq!(busy.join().unwrap().status, 200);
        // The one connection, now idle in the pool, serves the next requests.
        for _ in 0..3 {
            assert_eq!(get(gw.addr, "/bytes/1").status, 200, "{d}");
        }
        assert_eq!(o.connections(), 1);
    });
}

#[test]
fn a_request_that_waited_for_a_slot_is_forwarded_with_its_own_headers() {
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&cfg(d, o.addr(), 2, "queue_wait_factor = 10.0", ""));
        let busy = hold(gw.addr, "normal", 150);
        wait_in_flight(&o, 1);
        let addr = gw.addr;
        let waiting = std::thread::spawn(move || {
            exchange(
                addr,
                b"GET /bytes/4?who=waiter HTTP/1.1\r\nhost: waiter.local\r\nx-class: high\r\nx-marker: waiter\r\n\r\n",
            )
        });
        std::thread::sleep(Duration::from_millis(20));
        // Other requests parsed on the same worker while it waits.
        for i in 0..3 {
            let raw = format!("GET /other/{i} HTTP/1.1\r\nhost: other.local\r\nx-class: sheddable\r\nx-other: {i}\r\nx-pad: {}\r\n\r\n", "p".repeat(i * 40));
            assert_eq!(exchange(gw.addr, raw.as_bytes()).status, 503);
        }
        assert_eq!(busy.join().unwrap().status, 200);
        assert_eq!(waiting.join().unwrap().status, 200, "{d}");
        let seen = o.received();
        let req = seen.iter().find(|r| r.target.contains("who=waiter")).expect("the waiter reached the origin");
        assert_eq!(req.header("x-marker"), Some("waiter"), "{d}: {:?}", req.headers);
        assert_eq!(req.header("host"), Some("waiter.local"));
        assert_eq!(req.header("x-other"), None);
    });
}
