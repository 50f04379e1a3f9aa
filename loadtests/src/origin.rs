//! A blocking HTTP/1.1 origin server for the gateway's end-to-end tests and for benchmarks.
//!
//! One thread accepts, one thread serves each connection. Requests are parsed strictly
//! (Content-Length and chunked bodies, keep-alive, pipelining) and every request is recorded, so
//! a test can check exactly what reached the origin. What the origin answers is chosen per
//! request by its path (see `modes` and `loadtests/README.md`): `/bytes/{n}`, `/chunked/{n}`,
//! `/echo`, `/headers`, `/status/{code}`, `/delay/{ms}`, `/close`, `/ws/echo` (WebSocket
//! handshake, then a byte echo) and the `/bad/...` misbehaviours; any other path gets the
//! configured default response.

mod bad;
mod conn;
mod framing;
mod modes;
mod reply;
mod request;
mod ws;

pub use ws::accept_token as websocket_accept;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// At most this many requests are kept for [`Origin::received`]; later ones are only counted.
pub const RECORD_MAX_REQUESTS: usize = 100_000;
/// At most this many request body bytes, summed, are kept for [`Origin::received`]; once a
/// request would exceed it, it and all later requests are only counted.
pub const RECORD_MAX_BODY_BYTES: usize = 256 << 20;

/// What the origin answers on a path that selects no mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginConfig {
    /// Status of the default response; 200 to 599.
    pub status: u16,
    /// Length of the default body: `ok` repeated and cut to this length (`ok` for 2).
    pub body_size: usize,
    /// Added before every answer, on every path.
    pub latency: Duration,
    /// `false`: every response carries `Connection: close` and the connection is closed after it.
    pub keep_alive: bool,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig { status: 200, body_size: 2, latency: Duration::ZERO, keep_alive: true }
    }
}

/// One request as the origin received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedRequest {
    /// The TCP connection it came on: 1 for the first connection accepted, then 2, ...
    pub connection: u64,
    pub method: String,
    /// The request target exactly as sent (path and query for origin-form).
    pub target: String,
    /// HTTP minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub version: u8,
    /// Header fields in the order received, names as sent (case kept); values that are not
    /// UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunk framing removed).
    pub body: Vec<u8>,
    /// The body came with `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// Trailer fields of a chunked body, in order.
    pub trailers: Vec<(String, String)>,
    /// `Some(why)` when the origin refused the request after reading its head (bad framing):
    /// it answered 400 and closed the connection. Such requests are recorded but not counted
    /// by [`Origin::requests`], and their body is empty.
    pub error: Option<String>,
}

impl ReceivedRequest {
    /// The value of the first header field with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The number of header fields with this name (case-insensitive).
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).count()
    }
}

/// The bytes `/bytes/{n}`, `/chunked/{n}` and the misbehaviours send: byte `i` is
/// `b'a' + i % 26`, so a test can check any body for integrity.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64).map(pattern_byte).collect()
}

fn pattern_byte(i: u64) -> u8 {
    b"abcdefghijklmnopqrstuvwxyz".get((i % 26) as usize).copied().unwrap_or(b'a')
}

/// A running origin. It stops accepting and closes every connection on [`Origin::shutdown`] or
/// when dropped.
pub struct Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Origin {
    /// Binds `addr` (e.g. `127.0.0.1:0`) and starts serving. Fails if the address cannot be
    /// bound or `cfg.status` is not 200 to 599.
    pub fn spawn(addr: &str, cfg: OriginConfig) -> io::Result<Origin> {
        if !(200..=599).contains(&cfg.status) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("origin status {} is not 200 to 599", cfg.status),
            ));
        }
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(cfg));
        let acceptor = thread::Builder::new().name("origin-accept".into()).spawn({
            let shared = Arc::clone(&shared);
            move || accept_loop(&listener, &shared)
        })?;
        Ok(Origin { addr, shared, acceptor: Some(acceptor) })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Complete, well-framed requests received so far. A request is counted before its answer
    /// is sent, so a client that has read an answer sees its request counted.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// WebSocket echo tunnels (`/ws/echo`) that ended: the peer closed or failed.
    pub fn websocket_closed(&self) -> u64 {
        self.shared.ws_closed.load(Ordering::SeqCst)
    }

    /// Every request seen, in the order they completed (up to [`RECORD_MAX_REQUESTS`] and
    /// [`RECORD_MAX_BODY_BYTES`]; later requests are counted but not recorded).
    pub fn received(&self) -> Vec<ReceivedRequest> {
        lock(&self.shared.log).requests.clone()
    }

    /// Stops accepting, closes every connection (stalled ones included) and waits for the
    /// server's threads to end.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        let (streams, threads) = {
            let mut state = lock(&self.shared.state);
            state.closed = true;
            (std::mem::take(&mut state.streams), std::mem::take(&mut state.threads))
        };
        self.shared.changed.notify_all();
        for stream in streams.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // The accept thread is blocked in accept(2): a connection wakes it up to see `closed`.
        if TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
        for handle in threads {
            let _ = handle.join();
        }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Origin")
            .field("addr", &self.addr)
            .field("connections", &self.connections())
            .field("requests", &self.requests())
            .finish()
    }
}

/// State shared by the accept thread, the connection threads and the [`Origin`] handle.
struct Shared {
    cfg: OriginConfig,
    default_body: Vec<u8>,
    connections: AtomicU64,
    requests: AtomicU64,
    ws_closed: AtomicU64,
    log: Mutex<Log>,
    state: Mutex<State>,
    /// Signalled when `state.closed` becomes true.
    changed: Condvar,
}

struct Log {
    requests: Vec<ReceivedRequest>,
    body_bytes: usize,
    full: bool,
}

struct State {
    closed: bool,
    /// A handle on every open connection, to close it at shutdown.
    streams: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

impl Shared {
    fn new(cfg: OriginConfig) -> Shared {
        let default_body = b"ok".iter().copied().cycle().take(cfg.body_size).collect();
        Shared {
            cfg,
            default_body,
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            ws_closed: AtomicU64::new(0),
            log: Mutex::new(Log { requests: Vec::new(), body_bytes: 0, full: false }),
            state: Mutex::new(State { closed: false, streams: HashMap::new(), threads: Vec::new() }),
            changed: Condvar::new(),
        }
    }

    /// Records a request unless the log is full; `counted` also adds it to `requests()`.
    fn record(&self, body_len: usize, counted: bool, make: impl FnOnce() -> ReceivedRequest) {
        {
            let mut log = lock(&self.log);
            let body_bytes = log.body_bytes.saturating_add(body_len);
            if log.requests.len() >= RECORD_MAX_REQUESTS || body_bytes > RECORD_MAX_BODY_BYTES {
                log.full = true;
            }
            if !log.full {
                log.body_bytes = body_bytes;
                log.requests.push(make());
            }
        }
        if counted {
            self.requests.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Waits for `delay`; returns false, early, if the origin is shutting down.
    fn wait(&self, delay: Duration) -> bool {
        let state = lock(&self.state);
        let (state, _) =
            self.changed.wait_timeout_while(state, delay, |s| !s.closed).unwrap_or_else(PoisonError::into_inner);
        !state.closed
    }

    fn wait_for_shutdown(&self) {
        let state = lock(&self.state);
        let _state = self.changed.wait_while(state, |s| !s.closed);
    }

    fn forget(&self, id: u64) {
        lock(&self.state).streams.remove(&id);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut next_id: u64 = 0;
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) if lock(&shared.state).closed => return,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let mut state = lock(&shared.state);
        if state.closed {
            return;
        }
        next_id += 1;
        let id = next_id;
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let _ = stream.set_nodelay(true);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        state.streams.insert(id, handle);
        let spawned = thread::Builder::new().name(format!("origin-conn-{id}")).stack_size(256 * 1024).spawn({
            let shared = Arc::clone(shared);
            move || {
                conn::serve(&shared, id, &stream);
                shared.forget(id);
            }
        });
        match spawned {
            Ok(thread) => {
                state.threads.retain(|t| !t.is_finished());
                state.threads.push(thread);
            }
            Err(_) => {
                state.streams.remove(&id);
            }
        }
    }
}

/// Where to connect to reach a listener bound to `addr` (loopback for a wildcard address).
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// Locks a mutex; a connection thread that panicked cannot leave these states inconsistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
