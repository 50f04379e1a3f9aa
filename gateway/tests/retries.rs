//! End-to-end: retries (conditions, idempotency, budget, per-try timeout, replayed bodies) and
//! deadlines (expired -> 504 without upstream work, propagated and shrinking), against real
//! origins that fail on command.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::flaky::{Flaky, Mode};
use common::*;

/// One worker, listener `main`, route `r` (`/`) to cluster `c` with `route_extra` keys and the
/// cluster's `endpoints` and `cluster_extra` keys.
fn gateway(
    driver: &str,
    server_extra: &str,
    route_extra: &str,
    endpoints: &[SocketAddr],
    cluster_extra: &str,
) -> TestGateway {
    TestGateway::start(&config_text(driver, server_extra, route_extra, endpoints, cluster_extra))
}

/// The config of [`gateway`].
fn config_text(
    driver: &str,
    server_extra: &str,
    route_extra: &str,
    endpoints: &[SocketAddr],
    cluster_extra: &str,
) -> String {
    let endpoints: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        r#"
[server]
workers = 1
io_driver = "{driver}"
admin = false
drain_timeout = "5s"
log_level = "warn"
{server_extra}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "r"
cluster = "c"
{route_extra}

[[clusters]]
name = "c"
endpoints = [{}]
connect_timeout = "500ms"
balancer = "round_robin"
{cluster_extra}
"#,
        endpoints.join(", ")
    )
}

fn dead_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn request(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    let mut r = BufReader::new(s);
    read_response(&mut r, false).unwrap()
}

#[test]
fn connect_failures_are_retried_on_another_endpoint_by_default() {
    each_driver(|d| {
        let ok = Flaky::start(Mode::Ok);
        let gw = gateway(d, "", "", &[dead_port(), ok.addr], "");
        for i in 0..20 {
            let resp = get(gw.addr, &format!("/{i}"));
            assert_eq!(resp.status, 200, "{d}: request {i}");
        }
        assert_eq!(ok.attempts(), 20, "{d}");
        // Round robin sends every other first try to the dead endpoint and its retry goes to the
        // other one, until outlier detection (on by default: 3 consecutive gateway errors)
        // ejects the dead endpoint: then no try goes there at all.
        assert_eq!(gw.total("upstream_retries"), 3, "{d}");
        assert_eq!(gw.total("upstream_connect_errors"), 3, "{d}");
    });
}

#[test]
fn only_listed_conditions_and_idempotent_requests_are_retried() {
    let origin = Flaky::start(Mode::Error);
    // Default policy: a 500 is not a connect failure, so it is not retried.
    let gw = gateway("io_uring", "", "", &[origin.addr], "");
    assert_eq!(get(gw.addr, "/").status, 500);
    assert_eq!(origin.attempts(), 1);
    drop(gw);
    // Widened to 5xx: a GET is tried 1 + 2 times, a POST once (not idempotent).
    let gw = gateway(
        "io_uring",
        "",
        r#"retry = { retry_on = ["5xx"], backoff = { base = "1ms", max = "2ms" } }"#,
        &[origin.addr],
        "",
    );
    assert_eq!(get(gw.addr, "/").status, 500);
    assert_eq!(origin.attempts(), 1 + 3);
    let resp = request(gw.addr, b"POST /p HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabc");
    assert_eq!(resp.status, 500);
    assert_eq!(origin.attempts(), 4 + 1, "a POST is never retried");
    // retriable-status-codes retries only the listed statuses.
    drop(gw);
    let gw = gateway(
        "io_uring",
        "",
        r#"retry = { retry_on = ["retriable-status-codes"], retriable_status_codes = [503], backoff = { base = "1ms", max = "2ms" } }"#,
        &[origin.addr],
        "",
    );
    assert_eq!(get(gw.addr, "/").status, 500);
    assert_eq!(origin.attempts(), 6, "500 is not listed");
    origin.set(Mode::Unavailable);
    assert_eq!(get(gw.addr, "/").status, 503);
    assert_eq!(origin.attempts(), 6 + 3, "503 is listed");
    assert_eq!(gw.total("upstream_retries"), 2);
}

#[test]
fn a_shed_503_is_never_retried() {
    let origin = Flaky::start(Mode::Shed);
    let gw = gateway("epoll", "", r#"retry = { retry_on = ["5xx"], num_retries = 3 }"#, &[origin.addr], "");
    let resp = get(gw.addr, "/");
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("x-gateway-reason"), Some("shed"), "the upstream's reason is passed on");
    assert_eq!(origin.attempts(), 1);
    assert_eq!(gw.total("upstream_retries"), 0);
}

/// A total outage (every try answered 503) with retries widened to 5xx: attempts at the origin
/// stay within requests x (1 + percent) plus the bank of retries earned before the outage.
#[test]
fn retries_stay_within_the_budget_during_a_total_outage() {
    let origin = Flaky::start(Mode::Unavailable);
    let gw = Arc::new(gateway(
        "io_uring",
        "",
        r#"retry = { retry_on = ["5xx"], num_retries = 2, backoff = { base = "1ms", max = "4ms" } }"#,
        &[origin.addr],
        "retry_budget = { percent = 20, min_concurrent = 0 }",
    ));
    let (clients, each) = (16, 40);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let addr = gw.addr;
            std::thread::spawn(move || {
                let mut s = connect(addr);
                let mut r = BufReader::new(s.try_clone().unwrap());
                for _ in 0..each {
                    s.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
                    assert_eq!(read_response(&mut r, false).unwrap().status, 503);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let requests = clients * each;
    let attempts = origin.attempts();
    let bound = requests as f64 * 1.2 + 10.0;
    println!(
        "outage: {requests} requests, {attempts} attempts at the origin ({:.3} per request), bound {bound}",
        attempts as f64 / requests as f64
    );
    assert!(attempts as f64 <= bound, "{attempts} attempts for {requests} requests");
    assert!(attempts > requests, "some retries happened");
    assert!(gw.total("upstream_retries_budget_exhausted") > 0);
}

#[test]
fn a_per_try_timeout_moves_the_request_to_a_healthy_endpoint() {
    each_driver(|d| {
        let hang = Flaky::start(Mode::Hang);
        let ok = Flaky::start(Mode::Ok);
        let gw = gateway(
            d,
            "",
            r#"timeout = "3s"
retry = { retry_on = ["reset"], per_try_timeout = "200ms", backoff = { base = "1ms", max = "2ms" } }"#,
            &[hang.addr, ok.addr],
            "",
        );
        for _ in 0..4 {
            let started = Instant::now();
            let resp = get(gw.addr, "/");
            assert_eq!(resp.status, 200, "{d}");
            assert_eq!(resp.text(), format!("ok {}", ok.addr.port()));
            assert!(started.elapsed() < Duration::from_secs(2), "{d}: took {:?}", started.elapsed());
        }
        assert_eq!(hang.attempts(), 2, "{d}: round robin sent every other first try to the hanging endpoint");
    });
}

#[test]
fn a_held_body_is_sent_again_in_full() {
    let reset = Flaky::start(Mode::Reset);
    let ok = Flaky::start(Mode::Ok);
    let gw = gateway(
        "io_uring",
        "",
        r#"retry = { retry_on = ["reset"], backoff = { base = "1ms", max = "2ms" } }"#,
        &[reset.addr, ok.addr],
        "",
    );
    let body = "x".repeat(20_000);
    for _ in 0..2 {
        let raw = format!("PUT /doc HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        assert_eq!(request(gw.addr, raw.as_bytes()).status, 200);
    }
    assert_eq!(reset.attempts(), 1);
    let seen = ok.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.method == "PUT" && s.body == body.as_bytes()));
    // A body larger than max_replay_bytes is not held: the reset is answered 502, not retried.
    drop(gw);
    let gw = gateway("io_uring", "", r#"retry = { retry_on = ["reset"], max_replay_bytes = 1024 }"#, &[reset.addr], "");
    let raw = format!("PUT /doc HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    assert_eq!(request(gw.addr, raw.as_bytes()).status, 502);
    assert_eq!(reset.attempts(), 2);
}

#[test]
fn a_held_chunked_body_is_sent_again_in_full() {
    each_driver(|d| {
        let reset = Flaky::start(Mode::Reset);
        let ok = Flaky::start(Mode::Ok);
        let gw = gateway(
            d,
            "",
            r#"retry = { retry_on = ["reset"], backoff = { base = "1ms", max = "2ms" } }"#,
            &[reset.addr, ok.addr],
            "",
        );
        // A chunked PUT (idempotent) is read whole before its first try, its last chunk arriving
        // after the head and first chunks; the try meeting a reset is followed by one that sends
        // all of it.
        let chunk = "y".repeat(5_000);
        let body = chunk.repeat(4);
        for _ in 0..2 {
            let mut s = connect(gw.addr);
            let mut raw = b"PUT /doc HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            for _ in 0..3 {
                raw.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
            }
            s.write_all(&raw).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(format!("{:x}\r\n{chunk}\r\n0\r\n\r\n", chunk.len()).as_bytes()).unwrap();
            assert_eq!(read_response(&mut BufReader::new(s), false).unwrap().status, 200, "{d}");
        }
        assert_eq!(reset.attempts(), 1, "{d}");
        let seen = ok.seen();
        assert_eq!(seen.len(), 2, "{d}");
        assert!(seen.iter().all(|s| s.method == "PUT" && s.body == body.as_bytes()), "{d}");
        // Longer on the wire than max_replay_bytes: not held, so the reset is answered 502.
        drop(gw);
        let route = r#"retry = { retry_on = ["reset"], max_replay_bytes = 1024 }"#;
        let gw = gateway(d, "", route, &[reset.addr], "");
        let raw = format!(
            "PUT /doc HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        );
        assert_eq!(request(gw.addr, raw.as_bytes()).status, 502, "{d}");
        assert_eq!(reset.attempts(), 2, "{d}");
    });
}

#[test]
fn a_chunked_body_that_breaks_while_held_never_reaches_the_upstream() {
    each_driver(|d| {
        let ok = Flaky::start(Mode::Ok);
        let gw = gateway(d, "", r#"retry = { retry_on = ["reset"] }"#, &[ok.addr], "");
        // A bad chunk size after a good chunk: 400, before any try.
        let raw = b"PUT /doc HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\nzz\r\n";
        let resp = request(gw.addr, raw);
        assert_eq!(resp.status, 400, "{d}");
        // The client goes away part way: no answer, the connection closed.
        let mut s = connect(gw.addr);
        s.write_all(b"PUT /doc HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut rest);
        assert!(rest.is_empty(), "{d}: {}", String::from_utf8_lossy(&rest));
        assert_eq!(ok.attempts(), 0, "{d}: nothing reached the upstream");
        // The gateway is unharmed.
        assert_eq!(request(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").status, 200, "{d}");
    });
}

#[test]
fn an_expired_deadline_is_answered_504_without_touching_the_origin() {
    each_driver(|d| {
        let origin = Flaky::start(Mode::Ok);
        let gw = gateway(d, "deadline_header = \"x-deadline-ms\"", "", &[origin.addr], "");
        for raw in [
            &b"GET / HTTP/1.1\r\nhost: a\r\ngrpc-timeout: 0m\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nhost: a\r\nx-deadline-ms: 0\r\n\r\n",
        ] {
            let resp = request(gw.addr, raw);
            assert_eq!(resp.status, 504, "{d}");
            assert_eq!(resp.header("x-gateway-reason"), Some("deadline"));
        }
        assert_eq!(origin.attempts(), 0, "{d}");
        assert_eq!(gw.total("requests_deadline_expired"), 2);
        // A short deadline cuts the route timeout: a hanging origin is given up on in time.
        origin.set(Mode::Hang);
        let started = Instant::now();
        let resp = request(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nx-deadline-ms: 300\r\n\r\n");
        assert_eq!(resp.status, 504, "{d}");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(3), "{d}: {took:?}");
    });
}

#[test]
fn the_propagated_deadline_shrinks_with_each_try() {
    let hang = Flaky::start(Mode::Hang);
    let ok = Flaky::start(Mode::Ok);
    let gw = gateway(
        "io_uring",
        "deadline_header = \"x-deadline-ms\"",
        r#"timeout = "10s"
retry = { retry_on = ["reset"], per_try_timeout = "300ms", backoff = { base = "1ms", max = "2ms" } }"#,
        &[hang.addr, ok.addr],
        "",
    );
    // The first try goes to the hanging endpoint (round robin), the retry to the healthy one.
    let resp = request(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\nx-deadline-ms: 5000\r\ngrpc-timeout: 4S\r\n\r\n");
    assert_eq!(resp.status, 200);
    let first = &hang.seen()[0];
    let second = &ok.seen()[0];
    let ms = |s: &common::flaky::Seen, h: &str| -> u64 { s.header(h).unwrap().trim_end_matches('m').parse().unwrap() };
    // grpc-timeout (4 s) was the shorter deadline; both headers carry what remains of it.
    assert!(ms(first, "x-deadline-ms") <= 4000 && ms(first, "x-deadline-ms") > 3000, "{first:?}");
    assert!(ms(first, "grpc-timeout") <= 4000, "{first:?}");
    assert!(ms(second, "x-deadline-ms") <= ms(first, "x-deadline-ms") - 300, "{second:?}");
    assert!(ms(second, "grpc-timeout") <= ms(first, "grpc-timeout") - 300, "{second:?}");
    assert_eq!(second.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("x-deadline-ms")).count(), 1);
    // Without an incoming deadline the route's own is sent.
    let resp = request(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\n\r\n");
    assert_eq!(resp.status, 200);
    let last = ok.seen().pop().unwrap();
    assert!(last.header("grpc-timeout").is_none(), "only sent when the client sent one");
    assert!(ms(&last, "x-deadline-ms") <= 10_000 && ms(&last, "x-deadline-ms") > 9_000, "{last:?}");
}

#[test]
fn http2_clients_get_retries_too() {
    let ok = Flaky::start(Mode::Ok);
    let endpoints = format!("\"{}\", \"{}\"", dead_port(), ok.addr);
    let gw = TestGateway::start(&format!(
        r#"
[server]
workers = 1
admin = false
log_level = "warn"
deadline_header = "x-deadline-ms"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["http/1.1", "h2"]

[[routes]]
name = "r"
cluster = "c"

[[clusters]]
name = "c"
endpoints = [{endpoints}]
balancer = "round_robin"
"#
    ));
    let rt = clients::runtime();
    rt.block_on(async {
        let mut send = clients::h2_connect(gw.addr, None).await;
        for i in 0..6 {
            let resp =
                clients::h2_request(&mut send, clients::h2_get("http", "a", &format!("/{i}")), None).await.unwrap();
            assert_eq!(resp.status, 200, "request {i}");
        }
        let mut expired = clients::h2_get("http", "a", "/late");
        expired.headers_mut().insert("grpc-timeout", http::HeaderValue::from_static("0n"));
        let resp = clients::h2_request(&mut send, expired, None).await.unwrap();
        assert_eq!(resp.status, 504);
    });
    assert_eq!(ok.attempts(), 6);
    assert!(gw.total("upstream_retries") >= 2);
    assert!(ok.seen().iter().all(|s| s.header("x-deadline-ms").is_some()));
}

/// Attempts per client request during an outage, under the default policy and with retries
/// widened to 5xx, for the note and docs/configuration.md (printed with `--nocapture`). 16 clients on
/// keep-alive connections send 40 requests each.
#[test]
fn attempts_per_request_during_outages() {
    let run = |gw: &TestGateway| {
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let addr = gw.addr;
                std::thread::spawn(move || {
                    let mut s = connect(addr);
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    for _ in 0..40 {
                        s.write_all(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
                        assert!(read_response(&mut r, false).unwrap().status >= 500);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        640.0
    };
    let widened = r#"retry = { retry_on = ["5xx"] }"#;
    // Connection refused: attempts are connect attempts.
    for (label, route, budget) in [
        ("refused, default policy", "", ""),
        ("refused, default policy, min_concurrent = 0", "", "retry_budget = { min_concurrent = 0 }"),
    ] {
        let gw = gateway("io_uring", "", route, &[dead_port()], budget);
        let requests = run(&gw);
        let per = gw.total("upstream_connect_errors") as f64 / requests;
        println!("{label}: {per:.3} attempts per request");
        assert!(per <= 3.0);
    }
    // Every try answered 503.
    for (label, route, budget) in [
        ("503s, default policy", "", ""),
        ("503s, retry_on 5xx, default budget", widened, ""),
        ("503s, retry_on 5xx, min_concurrent = 0", widened, "retry_budget = { min_concurrent = 0 }"),
    ] {
        let origin = Flaky::start(Mode::Unavailable);
        let gw = gateway("io_uring", "", route, &[origin.addr], budget);
        let requests = run(&gw);
        let per = origin.attempts() as f64 / requests;
        println!("{label}: {per:.3} attempts per request");
        assert!(per <= 3.0);
        if route.is_empty() {
            assert!((per - 1.0).abs() < f64::EPSILON, "5xx is not retried by default");
        }
    }
}

/// A gateway whose listener also speaks h2c, retrying resets (1-2 ms backoff) from `reset` to
/// `ok`, round robin.
fn h2_reset_then_ok(d: &str, reset: &Flaky, ok: &Flaky) -> TestGateway {
    let route = r#"retry = { retry_on = ["reset"], backoff = { base = "1ms", max = "2ms" } }"#;
    let text = config_text(d, "", route, &[reset.addr, ok.addr], "")
        .replace("address = \"127.0.0.1:0\"\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n");
    TestGateway::start(&text)
}

#[test]
fn an_http2_clients_held_body_is_sent_again_in_full() {
    // The HTTP/2 path holds a body for a retry as the HTTP/1.1 path does (one forwarding loop):
    // a PUT whose first try meets a reset is sent again, whole, to the other endpoint.
    each_driver(|d| {
        let (reset, ok) = (Flaky::start(Mode::Reset), Flaky::start(Mode::Ok));
        let gw = h2_reset_then_ok(d, &reset, &ok);
        let body = "y".repeat(20_000);
        let rt = clients::runtime();
        rt.block_on(async {
            let mut send = clients::h2_connect(gw.addr, None).await;
            for _ in 0..2 {
                let req = http::Request::builder()
                    .method("PUT")
                    .uri("http://a/doc")
                    .header("content-length", body.len())
                    .body(())
                    .unwrap();
                let resp = clients::h2_request(&mut send, req, Some(bytes::Bytes::from(body.clone()))).await.unwrap();
                assert_eq!(resp.status, 200, "{d}");
            }
        });
        assert_eq!(reset.attempts(), 1, "{d}");
        let seen = ok.seen();
        assert_eq!(seen.len(), 2, "{d}");
        assert!(seen.iter().all(|s| s.method == "PUT" && s.body == body.as_bytes()), "{d}");
        assert_eq!(gw.total("upstream_retries"), 1, "{d}");
    });
}

#[test]
fn an_http2_clients_streamed_body_is_kept_and_sent_again_in_full() {
    // A PUT without a length whose body is still arriving streams to the first try (chunked, to
    // an HTTP/1.1 upstream); what went out is kept (`pipeline::replay`), so the reset is retried
    // with all of it.
    each_driver(|d| {
        let (reset, ok) = (Flaky::start(Mode::Reset), Flaky::start(Mode::Ok));
        let gw = h2_reset_then_ok(d, &reset, &ok);
        let rt = clients::runtime();
        rt.block_on(async {
            let send = clients::h2_connect(gw.addr, None).await;
            for i in 0..2 {
                let mut ready = send.clone().ready().await.unwrap();
                let req = http::Request::builder().method("PUT").uri("http://a/doc").body(()).unwrap();
                let (resp, mut tx) = ready.send_request(req, false).unwrap();
                tx.send_data(bytes::Bytes::from_static(b"first part, "), false).unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                tx.send_data(bytes::Bytes::from_static(b"second part"), true).unwrap();
                let resp = tokio::time::timeout(Duration::from_secs(10), resp).await.expect("an answer").unwrap();
                assert_eq!(resp.status(), 200, "{d}: {i}");
            }
        });
        assert_eq!(reset.attempts(), 1, "{d}");
        let seen = ok.seen();
        assert_eq!(seen.len(), 2, "{d}");
        assert!(seen.iter().all(|s| s.method == "PUT" && s.body == b"first part, second part"), "{d}: {seen:?}");
        assert_eq!(gw.total("upstream_retries"), 1, "{d}");
    });
}
