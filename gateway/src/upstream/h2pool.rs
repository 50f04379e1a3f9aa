//! HTTP/2 connections to one upstream endpoint, per worker, shared by many requests at once.
//!
//! An [`H2Endpoint`] hands out [`H2Stream`]s: the right to open one stream on one connection. It
//! fills live connections up to the stream limit the peer announced (SETTINGS_MAX_CONCURRENT_STREAMS,
//! as h2 reports it), opens another connection only when all are full, never more than
//! `max_connections`, and beyond that makes callers wait for a slot. A connection whose driver task
//! ended (GOAWAY honoured, error, EOF) leaves the endpoint; one that received GOAWAY takes no new
//! streams. Everything lives on one worker thread: `Rc`, `Cell`, `RefCell`, tasks from
//! `monoio::spawn`, no locks.
//!
//! Connections are opened one at a time per endpoint, and each one's SETTINGS are learned (a PING
//! round trip after the handshake) before a second stream goes on it: the common upstream allows
//! 100 or more streams, so waiters are better served by the connection being opened than by
//! opening their own. Until its SETTINGS are known, a new connection carries only the stream of
//! the caller that opened it, which is not delayed by the PING.

mod dial;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::SendStream;
use rustls_pki_types::ServerName;
use std::future::poll_fn;

/// How bytes reach the endpoint.
#[derive(Clone)]
pub enum Transport {
    Plain,
    /// TLS whose handshake must negotiate ALPN "h2"; `config.alpn_protocols` must offer it.
    Tls {
        config: Arc<rustls::ClientConfig>,
        server_name: ServerName<'static>,
    },
}

#[derive(Debug, Clone)]
pub struct H2Settings {
    /// Bounds everything `acquire` may wait for: TCP connect, TLS and h2 handshakes, a free slot.
    pub connect_timeout: Duration,
    /// A connection without streams for this long is closed by `evict_idle`.
    pub idle_timeout: Duration,
    /// Connections per endpoint per worker.
    pub max_connections: usize,
    /// Receive windows we announce; clamped to 2^31-1.
    pub initial_stream_window: u32,
    pub initial_connection_window: u32,
    pub max_header_list_bytes: u32,
}

/// Why no stream could be had. No request byte was sent in any of these cases.
#[derive(Debug, thiserror::Error)]
pub enum H2Error {
    #[error("connecting to the upstream failed: {0}")]
    Connect(#[source] io::Error),
    #[error("connecting to the upstream timed out")]
    Timeout,
    #[error("TLS handshake with the upstream failed: {0}")]
    Tls(#[source] io::Error),
    #[error("the upstream did not negotiate ALPN h2")]
    NoH2Alpn,
    #[error("HTTP/2 handshake with the upstream failed: {0}")]
    Handshake(#[source] h2::Error),
    /// Every connection was full, none could be added, and no slot freed up in time.
    #[error("no HTTP/2 stream to the upstream became free in time")]
    Busy,
}

/// One upstream endpoint's HTTP/2 connections on this worker.
pub struct H2Endpoint {
    address: SocketAddr,
    transport: Transport,
    settings: H2Settings,
    conns: RefCell<Vec<Rc<Conn>>>,
    /// A connection is being opened or its SETTINGS are not known yet (see the module docs).
    warming: Cell<bool>,
    /// Stream slots held by live `H2Stream`s, on any connection (removed ones included).
    in_use: Cell<usize>,
    next_id: Cell<u64>,
    waiters: Waiters,
}

/// One stream slot on one connection, for one request. Keep it until the exchange is over (the
/// response body read or dropped): dropping it frees the slot and wakes a waiting `acquire`.
pub struct H2Stream {
    /// Ready for exactly one `send_request` (see [`start`]).
    pub sender: SendRequest<Bytes>,
    _slot: Slot,
}

/// Sends the head of `req` on `stream` and returns the response future and, unless
/// `end_of_stream`, the stream for the request body (see [`crate::codec::h2io::send_data`]).
pub fn start(
    stream: &mut H2Stream,
    req: http::Request<()>,
    end_of_stream: bool,
) -> Result<(ResponseFuture, Option<SendStream<Bytes>>), h2::Error> {
    let (response, body) = stream.sender.send_request(req, end_of_stream)?;
    Ok((response, (!end_of_stream).then_some(body)))
}

impl H2Endpoint {
    pub fn new(address: SocketAddr, transport: Transport, settings: H2Settings) -> Rc<Self> {
        Rc::new(Self {
            address,
            transport,
            settings,
            conns: RefCell::new(Vec::new()),
            warming: Cell::new(false),
            in_use: Cell::new(0),
            next_id: Cell::new(0),
            waiters: Waiters::default(),
        })
    }

    /// A sender ready for one more stream: on the oldest live connection with a free slot, else
    /// on a new connection (up to `max_connections`), else after waiting for a slot. Everything
    /// together is bounded by `connect_timeout`.
    pub async fn acquire(self: &Rc<Self>) -> Result<H2Stream, H2Error> {
        let deadline = Instant::now() + self.settings.connect_timeout;
        loop {
            if let Some(conn) = self.free_conn() {
                let slot = Slot::take(self, conn);
                // Why count slots when h2 has `ready()`: readiness is per `SendRequest` handle and
                // only covers a stream that handle itself left queued. A fresh clone is always
                // ready, and h2 queues streams beyond the peer's limit inside the connection
                // without bound, so `ready()` alone would pile every request onto one full
                // connection instead of opening another. It still reports what slots cannot see:
                // a received GOAWAY or a failed connection.
                match slot.conn.sender.clone().ready().await {
                    Ok(sender) => return Ok(H2Stream { sender, _slot: slot }),
                    Err(e) => {
                        tracing::debug!(upstream = %self.address, error = %e, "h2 connection takes no new streams");
                        slot.conn.draining.set(true);
                        continue;
                    }
                }
            }
            if !self.warming.get() && self.conns.borrow().len() < self.settings.max_connections {
                return dial::open(self, deadline).await;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if crate::runtime::timeout(left, self.waiters.changed()).await.is_err() {
                return Err(H2Error::Busy);
            }
        }
    }

    /// Closes connections without streams that were last used `idle_timeout` or longer before
    /// `now`, and forgets draining ones without streams.
    pub fn evict_idle(&self, now: Instant) {
        let limit = self.settings.idle_timeout;
        self.conns.borrow_mut().retain(|c| {
            c.in_use.get() > 0 || (!c.draining.get() && now.saturating_duration_since(c.last_used.get()) < limit)
        });
        // Dropping the last `SendRequest` makes h2 send GOAWAY and close the socket.
    }

    /// Closes every connection without streams (the endpoint left its cluster); connections
    /// with streams finish them and are closed when the endpoint is dropped.
    pub fn close_idle(&self) {
        self.conns.borrow_mut().retain(|c| c.in_use.get() > 0);
    }

    /// The longest [`Self::acquire`] waits, for a connection or a free stream slot.
    pub fn connect_timeout(&self) -> Duration {
        self.settings.connect_timeout
    }

    /// Live connections (including one still waiting for its SETTINGS).
    pub fn connections(&self) -> usize {
        self.conns.borrow().len()
    }

    pub fn streams_in_use(&self) -> usize {
        self.in_use.get()
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The oldest connection that takes another stream: packing streams onto old connections
    /// lets the newest go idle and be evicted.
    fn free_conn(&self) -> Option<Rc<Conn>> {
        self.conns.borrow().iter().find(|c| c.has_slot()).cloned()
    }

    /// Called by a connection's driver task when the connection ended.
    fn forget(&self, id: u64) {
        self.conns.borrow_mut().retain(|c| {
            if c.id == id {
                c.draining.set(true);
            }
            c.id != id
        });
        self.waiters.notify_all();
    }

    fn adopt(&self, conn: Rc<Conn>) {
        self.conns.borrow_mut().push(conn);
    }

    fn new_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }
}

/// One live HTTP/2 connection as the endpoint tracks it.
struct Conn {
    id: u64,
    sender: SendRequest<Bytes>,
    in_use: Cell<usize>,
    /// The peer's SETTINGS were processed, so h2's stream limit is the peer's.
    settled: Cell<bool>,
    /// GOAWAY received, failed or unresponsive: no new streams.
    draining: Cell<bool>,
    last_used: Cell<Instant>,
}

impl Conn {
    fn new(id: u64, sender: SendRequest<Bytes>) -> Self {
        Self {
            id,
            sender,
            in_use: Cell::new(0),
            settled: Cell::new(false),
            draining: Cell::new(false),
            last_used: Cell::new(Instant::now()),
        }
    }

    fn has_slot(&self) -> bool {
        let limit = if self.settled.get() { self.sender.current_max_send_streams() } else { 1 };
        !self.draining.get() && self.in_use.get() < limit
    }
}

/// A counted stream slot; frees itself on drop.
struct Slot {
    endpoint: Rc<H2Endpoint>,
    conn: Rc<Conn>,
}

impl Slot {
    fn take(endpoint: &Rc<H2Endpoint>, conn: Rc<Conn>) -> Self {
        conn.in_use.set(conn.in_use.get() + 1);
        conn.last_used.set(Instant::now());
        endpoint.in_use.set(endpoint.in_use.get() + 1);
        Self { endpoint: Rc::clone(endpoint), conn }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conn.in_use.set(self.conn.in_use.get().saturating_sub(1));
        self.conn.last_used.set(Instant::now());
        self.endpoint.in_use.set(self.endpoint.in_use.get().saturating_sub(1));
        self.endpoint.waiters.notify_all();
    }
}

/// Tasks waiting for the endpoint's state to change (a slot freed, a connection gone or settled).
/// All are woken and each re-checks; a waiter that gave up leaves its waker until the next wake.
#[derive(Default)]
struct Waiters {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Waiters {
    fn notify_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        // Waking only schedules the task, so the borrow is not re-entered.
        for waker in self.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    async fn changed(&self) {
        let start = self.generation.get();
        poll_fn(|cx| {
            if self.generation.get() != start {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}
