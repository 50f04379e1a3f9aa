//! An HTTP/1.1 origin that fails on command, for the resilience tests: its behaviour is an
//! `AtomicU8` the test switches, and it counts the requests it served (health checks apart).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every request answered 200 with the origin's name as body.
pub const OK: u8 = 0;
/// Every request but health checks answered 500.
pub const FAIL_5XX: u8 = 1;
/// Health checks (`/healthz`) answered 503, other requests 200.
pub const HEALTH_503: u8 = 2;
/// Nothing listens on the port: connections are refused.
pub const REFUSE: u8 = 3;

pub struct SwitchOrigin {
    pub addr: SocketAddr,
    pub name: String,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    mode: AtomicU8,
    hits: AtomicU64,
    health_hits: AtomicU64,
    last_health_head: Mutex<String>,
    stop: AtomicBool,
}

impl SwitchOrigin {
    pub fn start(name: &str) -> Self {
        Self::start_with(name, None)
    }

    /// An origin speaking HTTP/1.1 over TLS with `tls`.
    pub fn start_with(name: &str, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let (s, n) = (Arc::clone(&state), name.to_owned());
        std::thread::spawn(move || accept_loop(Some(listener), addr, &n, &s, tls.as_ref()));
        Self { addr, name: name.to_owned(), state }
    }

    pub fn set(&self, mode: u8) {
        self.state.mode.store(mode, SeqCst);
    }

    /// Requests served, health checks not counted.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(SeqCst)
    }

    pub fn health_hits(&self) -> u64 {
        self.state.health_hits.load(SeqCst)
    }

    /// The head of the last health check request, in lower case.
    pub fn last_health_head(&self) -> String {
        self.state.last_health_head.lock().unwrap().clone()
    }
}

impl Drop for SwitchOrigin {
    fn drop(&mut self) {
        self.state.stop.store(true, SeqCst);
    }
}

fn accept_loop(
    mut listener: Option<TcpListener>,
    addr: SocketAddr,
    name: &str,
    state: &Arc<State>,
    tls: Option<&Arc<rustls::ServerConfig>>,
) {
    while !state.stop.load(SeqCst) {
        let refuse = state.mode.load(SeqCst) == REFUSE;
        match (&listener, refuse) {
            (Some(_), true) => listener = None,
            (None, false) => listener = TcpListener::bind(addr).ok(),
            _ => {}
        }
        let Some(l) = &listener else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        l.set_nonblocking(true).unwrap();
        match l.accept() {
            Ok((stream, _)) => {
                let (s, n) = (Arc::clone(state), name.to_owned());
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                match tls {
                    None => std::thread::spawn(move || serve(stream, &n, &s)),
                    Some(config) => {
                        let conn = rustls::ServerConnection::new(Arc::clone(config)).unwrap();
                        std::thread::spawn(move || serve(rustls::StreamOwned::new(conn, stream), &n, &s))
                    }
                };
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn serve(stream: impl Read + Write, name: &str, state: &State) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let health = head.starts_with("GET /healthz ");
        let mode = state.mode.load(SeqCst);
        if mode == REFUSE {
            // Connections opened before the switch end without an answer.
            return;
        }
        let status = match (mode, health) {
            (HEALTH_503, true) => 503,
            (FAIL_5XX, false) => 500,
            _ => 200,
        };
        if health {
            state.health_hits.fetch_add(1, SeqCst);
            *state.last_health_head.lock().unwrap() = head.to_ascii_lowercase();
        } else {
            state.hits.fetch_add(1, SeqCst);
        }
        let lower = head.to_ascii_lowercase();
        let close = lower.contains("connection: close");
        // A request body (content-length only) is read whole: `/echo` answers with it.
        let length = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        // `/bytes/{n}`: n bytes of the origin pattern; `/echo`: the request body; else the name.
        let path = head.split(' ').nth(1).unwrap_or("");
        let body = match (path.strip_prefix("/bytes/"), path) {
            (Some(n), _) => loadtests::origin::pattern(n.parse().unwrap()),
            (None, "/echo") => body,
            _ => name.as_bytes().to_vec(),
        };
        let mut response = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
        response.extend_from_slice(&body);
        let out = reader.get_mut();
        if out.write_all(&response).and_then(|()| out.flush()).is_err() || close {
            return;
        }
    }
}
