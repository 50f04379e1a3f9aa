use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use super::*;

fn origin(capacity: usize, service_ms: u64, halve_after: Option<Duration>) -> CapacityOrigin {
    let cfg = CapacityConfig { capacity, service: Duration::from_millis(service_ms), halve_after, mode: Mode::Pool };
    CapacityOrigin::spawn("127.0.0.1:0", cfg).unwrap()
}

/// Sends one GET on `conn` and reads one Content-Length framed answer: (status, body).
fn get(conn: &mut TcpStream, path: &str) -> (u16, String) {
    conn.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).unwrap();
    read_answer(conn)
}

fn read_answer(conn: &mut TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = conn.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before a full answer: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(len) = resp.parse(&buf).unwrap() {
            let cl: usize = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap();
            if buf.len() >= len + cl {
                assert_eq!(buf.len(), len + cl, "nothing after the answer");
                return (resp.code.unwrap(), String::from_utf8(buf[len..].to_vec()).unwrap());
            }
        }
    }
}

fn connect(origin: &CapacityOrigin) -> TcpStream {
    let conn = TcpStream::connect(origin.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn
}

#[test]
fn serves_at_most_capacity_at_once_and_queues_the_rest() {
    let origin = origin(2, 50, None);
    let started = Instant::now();
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let mut conn = connect(&origin);
            thread::spawn(move || get(&mut conn, "/work"))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (200, "ok".to_string()));
    }
    // Three waves of two.
    assert!(started.elapsed() >= Duration::from_millis(150), "{:?}", started.elapsed());
    // A slot is released (and counted) just after its answer is written: the last answer can
    // reach the client first.
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.stats().served < 6 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    let stats = origin.stats();
    assert_eq!((stats.served, stats.max_in_service, stats.unanswered), (6, 2, 0));
    assert!(stats.max_queued >= 1 && stats.max_in_flight <= 6, "{stats:?}");
    assert_eq!((stats.in_service, stats.queued), (0, 0));
}

#[test]
fn keeps_connections_alive_and_answers_stats_without_a_slot() {
    let origin = origin(1, 200, None);
    let mut busy = connect(&origin);
    let worker = thread::spawn(move || get(&mut busy, "/critical"));
    while origin.stats().in_service == 0 {
        thread::yield_now();
    }
    let mut conn = connect(&origin);
    let started = Instant::now();
    let (status, body) = get(&mut conn, "/__stats?x=1");
    assert!(started.elapsed() < Duration::from_millis(150), "stats waited for the slot");
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["in_service"], 1);
    assert_eq!(json["capacity"], 1);
    assert_eq!(worker.join().unwrap().0, 200);
    // Same connection, next requests.
    assert_eq!(get(&mut conn, "/normal").0, 200);
    assert_eq!(get(&mut conn, "/__reset").0, 200);
    assert_eq!(origin.stats().served, 0);
}

#[test]
fn a_request_whose_client_left_is_still_served_and_counted_unanswered() {
    let origin = origin(1, 100, None);
    let mut first = connect(&origin);
    let worker = thread::spawn(move || get(&mut first, "/a"));
    while origin.stats().in_service == 0 {
        thread::yield_now();
    }
    let mut gone = connect(&origin);
    gone.write_all(b"GET /b HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    while origin.stats().queued == 0 {
        thread::yield_now();
    }
    drop(gone);
    assert_eq!(worker.join().unwrap().0, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.stats().served < 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let stats = origin.stats();
    assert_eq!((stats.served, stats.unanswered), (2, 1), "{stats:?}");
}

#[test]
fn capacity_halves_after_the_first_request() {
    let origin = origin(4, 10, Some(Duration::from_millis(50)));
    let mut conn = connect(&origin);
    assert_eq!(get(&mut conn, "/x").0, 200);
    assert_eq!(origin.stats().capacity, 4);
    thread::sleep(Duration::from_millis(60));
    let stats = origin.stats();
    assert_eq!((stats.capacity, stats.halved), (2, true));
    origin.reset();
    assert_eq!(origin.stats().capacity, 4);
}

#[test]
fn bad_requests_get_400_and_the_connection_closes() {
    let origin = origin(1, 1, None);
    let mut conn = connect(&origin);
    conn.write_all(b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
    let mut all = String::new();
    conn.read_to_string(&mut all).unwrap();
    assert!(all.starts_with("HTTP/1.1 400 "), "{all}");
    assert_eq!(origin.stats().served, 0);
    // The origin still serves others.
    assert_eq!(get(&mut connect(&origin), "/").0, 200);
}

#[test]
fn skips_request_bodies() {
    let origin = origin(1, 1, None);
    let mut conn = connect(&origin);
    conn.write_all(b"POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello").unwrap();
    assert_eq!(read_answer(&mut conn).0, 200);
    assert_eq!(get(&mut conn, "/b").0, 200);
}

#[test]
fn shutdown_refuses_new_connections() {
    let origin = origin(1, 1, None);
    let addr = origin.addr();
    origin.shutdown();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
}

#[test]
fn load_dependent_and_noisy_modes_serve_everything_at_once() {
    let modes =
        [Mode::LoadDependent { per_inflight: Duration::from_millis(1) }, Mode::Noisy { p99_ratio: 3.0, seed: 1 }];
    for mode in modes {
        let cfg = CapacityConfig { capacity: 1, service: Duration::from_millis(300), halve_after: None, mode };
        let origin = CapacityOrigin::spawn("127.0.0.1:0", cfg).unwrap();
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let mut conn = connect(&origin);
                thread::spawn(move || get(&mut conn, "/work"))
            })
            .collect();
        // All six are in service together although the capacity says 1: nothing queues.
        let deadline = Instant::now() + Duration::from_secs(5);
        while origin.stats().max_in_service < 6 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        for h in handles {
            assert_eq!(h.join().unwrap(), (200, "ok".to_string()));
        }
        let stats = origin.stats();
        assert_eq!((stats.capacity, stats.max_in_service, stats.max_queued), (0, 6, 0), "{stats:?}");
        let (status, body) = get(&mut connect(&origin), "/__stats");
        assert_eq!(status, 200);
        assert!(body.contains("\"capacity\":0"), "{body}");
    }
}
