//! The admin server over real sockets against clients that try to hold it: idle connections,
//! half-sent requests, more connections than it serves, a slow and a panicking handler. The
//! readiness probe it exists for (Kubernetes: 1 s timeout, one failure takes the host out of
//! rotation) must still be answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_admin::{AdminServer, Handler, Limits, Request, Response};

/// The probe's own timeout, as in the DaemonSet's readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// What a probe may take here: far below the probe timeout, far above a loaded machine's
/// scheduling noise. A check that the answer does not wait behind other clients, not a benchmark.
const PROBE_BOUND: Duration = Duration::from_millis(500);

#[test]
fn ready_is_answered_while_idle_and_half_sent_connections_are_held() {
    let srv = server(Limits::default());
    let addr = srv.local_addr();
    let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let half: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /ready HTTP/1.1\r\nhost: admin\r\n").unwrap();
            s
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let (answer, took) = probe(addr, b"GET /ready HTTP/1.1\r\nhost: admin\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
        assert!(answer.ends_with("\r\n\r\nready\n"), "{answer:?}");
        assert!(took < PROBE_BOUND, "probe took {took:?} with 80 connections held");
        slowest = slowest.max(took);
    }
    println!("slowest of 20 /ready probes with 64 idle and 16 half-sent connections held: {slowest:?}");
    // Stopping does not wait for the held connections either.
    let stopping = Instant::now();
    srv.stop();
    assert!(stopping.elapsed() < PROBE_BOUND, "stop took {:?}", stopping.elapsed());
    drop((idle, half));
}

#[test]
fn idle_connections_are_closed_and_partial_requests_answered_408_at_the_request_timeout() {
    let timeout = Duration::from_millis(300);
    let srv = server(Limits { request_timeout: timeout, ..Limits::default() });
    let addr = srv.local_addr();
    let opened = Instant::now();
    let mut idle = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /ready HTTP/1.1\r\nhost: ad").unwrap();
    for s in [&idle, &half] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let mut buf = [0u8; 64];
    assert_eq!(idle.read(&mut buf).unwrap(), 0, "an idle connection is closed without an answer");
    let closed = opened.elapsed();
    assert!(closed >= timeout - Duration::from_millis(20), "closed after {closed:?}, before the timeout");
    let mut answer = String::new();
    half.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer:?}");
    // The server serves on.
    assert!(probe(addr, b"GET /ready HTTP/1.1\r\n\r\n").0.starts_with("HTTP/1.1 200"));
}

#[test]
fn connections_over_the_limit_are_answered_503_at_once_not_queued() {
    let srv = server(Limits { max_connections: 4, request_timeout: Duration::from_secs(30), ..Limits::default() });
    let addr = srv.local_addr();
    let mut held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // The held connections are accepted before the next one (one listening socket, in order).
    let (answer, took) = probe(addr, b"GET /ready HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer:?}");
    assert!(answer.ends_with("too many admin connections\n"), "{answer:?}");
    assert!(took < PROBE_BOUND, "refusal took {took:?}");
    // A slot freed by a client that leaves is served again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (answer, _) = probe(addr, b"GET /ready HTTP/1.1\r\n\r\n");
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
        assert!(Instant::now() < deadline, "the freed slot was never reused");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_slow_handler_does_not_hold_other_requests() {
    let srv = server(Limits::default());
    let addr = srv.local_addr();
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /slow HTTP/1.1\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    });
    std::thread::sleep(Duration::from_millis(100));
    let (answer, took) = probe(addr, b"GET /ready HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert!(took < PROBE_BOUND, "probe took {took:?} behind a slow handler");
    assert!(slow.join().unwrap().ends_with("\r\n\r\nslow\n"));
}

#[test]
fn a_panicking_handler_answers_500_and_the_server_serves_on() {
    let srv = server(Limits { handler_threads: 1, ..Limits::default() });
    let addr = srv.local_addr();
    let (answer, _) = probe(addr, b"GET /panic HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 500 Internal Server Error\r\n"), "{answer:?}");
    // The only handler thread survived the panic.
    assert!(probe(addr, b"GET /ready HTTP/1.1\r\n\r\n").0.starts_with("HTTP/1.1 200"));
}

fn server(limits: Limits) -> AdminServer {
    let handler: Handler = Arc::new(|req: &Request| match req.path.as_str() {
        "/ready" => Response::text(200, "ready\n"),
        "/slow" => {
            std::thread::sleep(Duration::from_millis(1500));
            Response::text(200, "slow\n")
        }
        "/panic" => panic!("handler panics on purpose"),
        _ => Response::text(404, "not found\n"),
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    AdminServer::from_listener_with(listener, handler, limits).unwrap()
}

/// One request on a new connection, read to the end within [`PROBE_TIMEOUT`]; the answer and
/// how long it took from the connect.
fn probe(addr: SocketAddr, request: &[u8]) -> (String, Duration) {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).unwrap();
    s.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
    s.write_all(request).unwrap();
    let mut answer = Vec::new();
    if let Err(e) = s.read_to_end(&mut answer) {
        panic!("no answer within {PROBE_TIMEOUT:?}: {e} (read so far: {:?})", String::from_utf8_lossy(&answer));
    }
    (String::from_utf8_lossy(&answer).into_owned(), started.elapsed())
}
