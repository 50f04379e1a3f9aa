//! End-to-end: the real gateway proxying to a real origin, on both I/O drivers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Read, Write};
use std::time::Duration;

use common::*;

const ROUTES: &str = r#"
[[routes]]
name = "home"
match = { path = "/" }
direct_response = { status = 200, body = "hello\n", headers = { "content-type" = "text/plain" } }

[[routes]]
name = "moved"
match = { path_prefix = "/old" }
redirect = { status = 308, path = "/new", keep_query = true }

[[routes]]
name = "api-only-get"
match = { host = "*.example.com", path_prefix = "/only", methods = ["GET"], headers = [{ name = "x-canary", value = "1" }] }
direct_response = { status = 202, body = "canary" }
"#;

fn start(driver: &str, origin: &Origin) -> TestGateway {
    TestGateway::start(&config(driver, origin.addr(), "", ROUTES))
}

#[test]
fn proxies_get_and_adds_forwarding_headers() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let r = exchange(gw.addr, b"GET /bytes/10?x=1 HTTP/1.1\r\nhost: app.local\r\nx-forwarded-for: 10.0.0.1\r\nx-forwarded-proto: https\r\n\r\n");
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(r.body, loadtests::origin::pattern(10));
        let seen = o.received();
        let req = seen.last().expect("origin saw the request");
        assert_eq!(req.target, "/bytes/10?x=1");
        assert_eq!(req.header("host"), Some("app.local"));
        assert_eq!(req.header("x-forwarded-for"), Some("127.0.0.1"), "an untrusted client's list is replaced");
        assert_eq!(req.header("x-forwarded-proto"), Some("http"), "client value replaced");
        assert_eq!(req.header_count("x-forwarded-proto"), 1);
        assert_eq!(req.header("via"), Some("1.1 gateway"));
    });
}

#[test]
fn hop_by_hop_headers_never_reach_the_origin() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let r = exchange(
            gw.addr,
            b"GET /headers HTTP/1.1\r\nhost: a\r\nconnection: keep-alive, x-secret\r\nx-secret: 1\r\nkeep-alive: 5\r\nte: trailers\r\nproxy-connection: keep-alive\r\nupgrade: h2c\r\nx-kept: yes\r\n\r\n",
        );
        assert_eq!(r.status, 200, "{d}");
        let req = o.received().pop().expect("request");
        for h in ["connection", "x-secret", "keep-alive", "te", "proxy-connection", "upgrade", "transfer-encoding"] {
            assert_eq!(req.header(h), None, "{d}: {h} must be stripped");
        }
        assert_eq!(req.header("x-kept"), Some("yes"));
    });
}

#[test]
fn post_bodies_stream_both_ways_content_length_and_chunked() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let r = exchange(gw.addr, b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 11\r\n\r\nhello world");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world"[..]), "{d}");
        let r = exchange(gw.addr, b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\ntrailer-x: 1\r\n\r\n");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world"[..]), "{d}");
        let last = o.received().pop().expect("request");
        assert!(last.chunked, "forwarded chunked");
        assert_eq!(last.body, b"hello world");
    });
}

#[test]
fn bodies_larger_than_every_buffer_arrive_intact() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let body = loadtests::origin::pattern(3 * 1024 * 1024 + 17);
        // Content-Length upload echoed back.
        let mut s = connect(gw.addr);
        let head = format!("POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n", body.len());
        s.write_all(head.as_bytes()).unwrap();
        let writer = {
            let mut s2 = s.try_clone().unwrap();
            let body = body.clone();
            std::thread::spawn(move || s2.write_all(&body).unwrap())
        };
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        writer.join().unwrap();
        assert_eq!(resp.status, 200, "{d}");
        assert!(resp.body == body, "{d}: echoed body differs");
        // Chunked upload in many chunks.
        let mut s = connect(gw.addr);
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
        let writer = {
            let mut s2 = s.try_clone().unwrap();
            let body = body.clone();
            std::thread::spawn(move || {
                for piece in body.chunks(70_001) {
                    s2.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).unwrap();
                    s2.write_all(piece).unwrap();
                    s2.write_all(b"\r\n").unwrap();
                }
                s2.write_all(b"0\r\n\r\n").unwrap();
            })
        };
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        writer.join().unwrap();
        assert_eq!(resp.status, 200, "{d}");
        assert!(resp.body == body, "{d}: chunked echo differs");
        // Large chunked download re-framed for the client.
        let r = get(gw.addr, "/chunked/2000000");
        assert_eq!(r.status, 200);
        assert!(r.body == loadtests::origin::pattern(2_000_000), "{d}: chunked download differs");
        let r = get(gw.addr, "/bytes/5000000");
        assert!(r.body == loadtests::origin::pattern(5_000_000), "{d}: length download differs");
    });
}

#[test]
fn responses_at_the_edges_of_the_response_buffer_arrive_intact() {
    // The upstream's response is read into a 32 KiB buffer after 512 bytes kept for the
    // rewritten head: bodies that end just before, at and after its edges (and those of the
    // 16 KiB buffers) arrive whole, one after another on one client connection.
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let mut r = BufReader::new(connect(gw.addr));
        for n in [0, 1, 16_383, 16_384, 16_385, 32_000, 32_255, 32_256, 32_257, 32_768, 32_769, 65_536, 100_001] {
            let req = format!("GET /bytes/{n} HTTP/1.1\r\nhost: a\r\n\r\n");
            r.get_mut().write_all(req.as_bytes()).unwrap();
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.status, 200, "{d}: {n}");
            assert!(resp.body == loadtests::origin::pattern(n), "{d}: a {n}-byte body differs");
        }
    });
}

#[test]
fn upstream_connections_are_reused() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        for _ in 0..20 {
            assert_eq!(get(gw.addr, "/bytes/100").status, 200);
        }
        // Also on one client connection.
        let mut s = connect(gw.addr);
        let mut r = BufReader::new(s.try_clone().unwrap());
        for _ in 0..20 {
            s.write_all(b"GET /chunked/300 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            assert_eq!(read_response(&mut r, false).unwrap().status, 200);
        }
        assert_eq!(o.requests(), 40);
        assert_eq!(o.connections(), 1, "{d}: one upstream connection for 40 sequential requests");
        assert_eq!(gw.total("upstream_connects"), 1);
        assert_eq!(gw.total("upstream_reuses"), 39);
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let mut s = connect(gw.addr);
        let mut batch = Vec::new();
        for i in 1..=5 {
            batch.extend_from_slice(format!("GET /bytes/{i} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes());
        }
        batch.extend_from_slice(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n");
        batch.extend_from_slice(b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 3\r\n\r\nabc");
        batch.extend_from_slice(b"GET /bytes/7 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n");
        s.write_all(&batch).unwrap();
        let mut r = BufReader::new(s);
        for i in 1..=5 {
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.body.len(), i, "{d}: response {i} in order");
        }
        assert_eq!(read_response(&mut r, false).unwrap().body, b"hello\n");
        assert_eq!(read_response(&mut r, false).unwrap().body, b"abc");
        let last = read_response(&mut r, false).unwrap();
        assert_eq!(last.body.len(), 7);
        assert_eq!(last.header("connection"), Some("close"));
        assert!(is_closed(&mut r));
    });
}

#[test]
fn direct_responses_redirects_and_matching() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let r = get(gw.addr, "/");
        assert_eq!((r.status, r.text().as_str()), (200, "hello\n"), "{d}");
        assert_eq!(r.header("content-type"), Some("text/plain"));
        let r = exchange(gw.addr, b"HEAD / HTTP/1.1\r\nhost: a\r\n\r\n");
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert_eq!(r.header("content-length"), Some("6"));
        let r = get(gw.addr, "/old/page?a=b");
        assert_eq!(r.status, 308);
        assert_eq!(r.header("location"), Some("http://test.local/new?a=b"));
        let canary = b"GET /only HTTP/1.1\r\nhost: x.example.com\r\nx-canary: 1\r\n\r\n";
        assert_eq!(exchange(gw.addr, canary).status, 202);
        // Any mismatch falls through to the default proxy route.
        let before = o.requests();
        assert_eq!(exchange(gw.addr, b"GET /only HTTP/1.1\r\nhost: example.com\r\nx-canary: 1\r\n\r\n").status, 200);
        assert_eq!(
            exchange(
                gw.addr,
                b"POST /only HTTP/1.1\r\nhost: x.example.com\r\nx-canary: 1\r\ncontent-length: 0\r\n\r\n"
            )
            .status,
            200
        );
        assert_eq!(exchange(gw.addr, b"GET /only HTTP/1.1\r\nhost: x.example.com\r\nx-canary: 2\r\n\r\n").status, 200);
        assert_eq!(o.requests(), before + 3);
        // A direct response with a body in the request keeps the connection in sync.
        let mut s = connect(gw.addr);
        s.write_all(b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 4\r\n\r\nabcdGET / HTTP/1.1\r\nhost: a\r\n\r\n")
            .unwrap();
        let mut r = BufReader::new(s);
        assert_eq!(read_response(&mut r, false).unwrap().status, 200);
        assert_eq!(read_response(&mut r, false).unwrap().status, 200);
    });
}

#[test]
fn no_route_is_404_and_http10_is_served() {
    each_driver(|d| {
        let o = origin();
        let routes = r#"
[[routes]]
name = "only-a"
match = { host = "a.local" }
cluster = "origin"
"#;
        let toml = config(d, o.addr(), "", routes)
            .replace("[[routes]]\nname = \"default\"\ncluster = \"origin\"\ntimeout = \"2s\"\n", "");
        let gw = TestGateway::start(&toml);
        let r = exchange(gw.addr, b"GET / HTTP/1.1\r\nhost: b.local\r\n\r\n");
        assert_eq!(r.status, 404, "{d}");
        assert_eq!(o.requests(), 0);
        // HTTP/1.0 without keep-alive: answered, then closed.
        let mut s = connect(gw.addr);
        s.write_all(b"GET /bytes/3 HTTP/1.0\r\nhost: a.local\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.body, b"abc");
        assert!(is_closed(&mut r));
    });
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let mut s = connect(gw.addr);
        s.write_all(b"POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n").unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut r, &mut line).unwrap();
        assert_eq!(line, "HTTP/1.1 100 Continue\r\n", "{d}");
        std::io::BufRead::read_line(&mut r, &mut line).unwrap();
        s.write_all(b"hello").unwrap();
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"hello"[..]));
        assert_eq!(o.received().pop().unwrap().header("expect"), None);
    });
}

#[test]
fn stats_count_requests_and_statuses() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        get(gw.addr, "/bytes/1");
        get(gw.addr, "/status/503");
        get(gw.addr, "/");
        assert!(wait_until(Duration::from_secs(2), || gw.total("requests_total") == 3), "{d}");
        // Statuses are counted when the request finishes, just after the response is written.
        assert!(wait_until(Duration::from_secs(2), || gw.total("responses_2xx") == 2), "{d}");
        assert!(wait_until(Duration::from_secs(2), || gw.total("responses_5xx") == 1), "{d}");
        assert!(gw.total("downstream_bytes_out") > 0);
        assert!(wait_until(Duration::from_secs(2), || gw.total("connections_active") == 0));
    });
}

#[test]
fn admin_listener_serves_stats_health_and_server_info() {
    each_driver(|d| {
        let o = origin();
        let toml = config(d, o.addr(), "", "").replace("admin = false", "admin = { address = \"127.0.0.1:0\" }");
        let gw = TestGateway::start(&toml);
        let admin = gw.gw.as_ref().unwrap().admin_addr().expect("admin bound");
        assert_eq!(get(gw.addr, "/bytes/1").status, 200);
        let health = get(admin, "/healthz");
        assert_eq!((health.status, health.text().as_str()), (200, "ok\n"));
        assert_eq!(get(admin, "/ready").status, 200);
        let stats: serde_json::Value = serde_json::from_slice(&get(admin, "/stats").body).unwrap();
        assert_eq!(stats["totals"]["requests_total"], 1, "{d}");
        assert_eq!(stats["workers"].as_array().unwrap().len(), 1);
        let info: serde_json::Value = serde_json::from_slice(&get(admin, "/server_info").body).unwrap();
        let driver = info["workers"][0]["driver"].as_str().unwrap();
        assert!(driver.starts_with(if d == "epoll" { "epoll" } else { "io_uring" }), "{d}: {driver}");
        assert_eq!(get(admin, "/nope").status, 404);
    });
}

#[test]
fn keep_alive_requests_arriving_at_once_or_after_a_pause_are_served() {
    // Between requests an idle connection gives its buffer back and waits for readiness; the
    // next request may come at once, after a pause, or split across one.
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let mut s = connect(gw.addr);
        let mut r = BufReader::new(s.try_clone().unwrap());
        for (i, pause_ms) in [0u64, 30, 0, 2, 60, 0].into_iter().enumerate() {
            std::thread::sleep(Duration::from_millis(pause_ms));
            s.write_all(format!("GET /bytes/{} HTTP/1.1\r\nhost: a\r\n\r\n", i + 1).as_bytes()).unwrap();
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!(resp.body.len(), i + 1, "{d}: request {i} after {pause_ms} ms");
        }
        // A request split across the pause is assembled correctly too.
        s.write_all(b"GET /bytes/3 HT").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.write_all(b"TP/1.1\r\nhost: a\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut r, false).unwrap().body, b"abc", "{d}");
    });
}

#[test]
fn a_request_sent_while_the_previous_one_is_answered_is_served_next() {
    // The next request arrives while the gateway waits for the origin's answer to the previous
    // one (read whole, nothing after it): once that answer is out, the request is waiting. On
    // epoll the attempt to read that replaces the readiness wait takes it; the late answers
    // come on a reused upstream connection whose idle check told the driver it was drained, so
    // their read waits for them.
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let mut s = connect(gw.addr);
        let mut r = BufReader::new(s.try_clone().unwrap());
        for i in 0..5 {
            s.write_all(b"GET /delay/50 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            std::thread::sleep(Duration::from_millis(10));
            s.write_all(format!("GET /bytes/{} HTTP/1.1\r\nhost: a\r\n\r\n", i + 1).as_bytes()).unwrap();
            assert_eq!(read_response(&mut r, false).unwrap().status, 200, "{d}: the late answer {i}");
            assert_eq!(read_response(&mut r, false).unwrap().body.len(), i + 1, "{d}: the request that waited {i}");
        }
        assert_eq!(o.requests(), 10);
        assert_eq!(o.connections(), 1, "{d}: one upstream connection throughout");
    });
}

#[test]
fn http10_without_host_is_forwarded_with_the_cluster_name_as_host() {
    let o = origin();
    let gw = start("io_uring", &o);
    let mut s = connect(gw.addr);
    s.write_all(b"GET /bytes/4 HTTP/1.0\r\n\r\n").unwrap();
    let r = read_response(&mut BufReader::new(s), false).unwrap();
    assert_eq!(r.status, 200);
    let seen = o.received();
    assert_eq!(seen.last().unwrap().header("host"), Some("origin"), "HTTP/1.1 upstreams need a Host");
}

#[test]
fn an_answer_whose_head_and_body_the_upstream_wrote_apart_is_relayed_whole() {
    // The body reaches the gateway with the head, just after it or 50 ms later (or never):
    // the client gets the same answer each time, and its connection stays usable.
    each_driver(|d| {
        let o = origin();
        let gw = TestGateway::start(&config(d, o.addr(), "", &routes_head_apart()));
        let body = loadtests::origin::pattern(APART_BODY);
        let mut r = BufReader::new(connect(gw.addr));
        for round in 0..3 {
            for kind in ["length", "chunked", "close", "late"] {
                r.get_mut().write_all(format!("GET /apart/{kind} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes()).unwrap();
                let resp = read_response(&mut r, false).unwrap();
                assert_eq!(resp.status, 200, "{d}: {kind} {round}");
                assert!(resp.body == body, "{d}: the {kind} body differs ({} bytes, round {round})", resp.body.len());
            }
        }
        // A reset right after the head: the client sees the answer fail (the head, then the
        // close; or a 502 when the reset came first), never a complete answer.
        for _ in 0..5 {
            let mut s = connect(gw.addr);
            s.write_all(b"GET /apart/reset HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            let text = String::from_utf8_lossy(&got);
            assert!(
                text.starts_with("HTTP/1.1 502") || (text.starts_with("HTTP/1.1 200") && got.ends_with(b"\r\n\r\n")),
                "{d}: {text}"
            );
        }
        let resp = get(gw.addr, "/apart/length");
        assert!(resp.status == 200 && resp.body == body, "{d}: served as before after the resets");
    });
}
