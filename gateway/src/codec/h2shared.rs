//! What one HTTP/2 connection's task and its streams' tasks share: the protocol state
//! (`gateway_h2::server::Conn`, which encodes every frame straight into the connection's write
//! buffer) and each stream's received body and wakers. One worker thread: a `RefCell`, no lock,
//! no frame queue.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use gateway_h2::frame::Reason;
use gateway_h2::server::{Conn, HeadWriter, IdHasher, RequestHead, SendError};

use crate::codec::h2io::FlowWatch;

/// Bytes queued for the client above which a stream's `send_data` waits for the connection
/// to write them (a client that reads slowly holds back its streams, not the worker's memory).
const OUT_HIGH: usize = 256 * 1024;

/// The connection's shared state.
pub struct Shared {
    pub conn: Conn,
    streams: HashMap<u32, StreamIo, BuildHasherDefault<IdHasher>>,
    /// The connection's task, woken when there is something to write.
    conn_waker: Option<Waker>,
    /// Streams waiting for the write buffer to drain.
    drain_waiters: Vec<Waker>,
    /// Bytes the connection task has taken from `conn.out` and not written yet.
    pub writing: usize,
    /// The connection is gone: every wait ends.
    pub closed: bool,
}

/// One stream's side of the shared state.
#[derive(Default)]
struct StreamIo {
    chunks: VecDeque<Bytes>,
    /// The client ended its body (END_STREAM, or trailers).
    end: bool,
    trailers: Option<RequestHead>,
    reset: Option<Reason>,
    recv_waker: Option<Waker>,
    send_waker: Option<Waker>,
}

/// Why a stream can no longer send or receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// Reset (by the client, or by the server for a rule the client broke).
    Reset(Reason),
    /// The connection ended.
    Closed,
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gone::Reset(r) => write!(f, "stream reset: {}", r.name()),
            Gone::Closed => f.write_str("connection closed"),
        }
    }
}

impl std::error::Error for Gone {}

impl Shared {
    pub fn new(conn: Conn) -> Rc<RefCell<Self>> {
        Rc::new(RefCell::new(Self {
            conn,
            streams: HashMap::default(),
            conn_waker: None,
            drain_waiters: Vec::new(),
            writing: 0,
            closed: false,
        }))
    }

    /// Registers the connection task's waker.
    pub fn set_conn_waker(&mut self, w: &Waker) {
        if !self.conn_waker.as_ref().is_some_and(|c| c.will_wake(w)) {
            self.conn_waker = Some(w.clone());
        }
    }

    fn wake_conn(&mut self) {
        if self.conn.wants_write() {
            if let Some(w) = &self.conn_waker {
                w.wake_by_ref();
            }
        }
    }

    /// A new stream's side (before its task starts).
    pub fn open(&mut self, id: u32, end: bool) {
        self.streams.insert(id, StreamIo { end, ..StreamIo::default() });
    }

    /// Body bytes for `id`; given back to the client at once when nobody reads the stream.
    pub fn data(&mut self, id: u32, data: &[u8], end: bool) {
        match self.streams.get_mut(&id) {
            Some(s) => {
                if !data.is_empty() {
                    s.chunks.push_back(Bytes::copy_from_slice(data));
                }
                s.end |= end;
                if let Some(w) = s.recv_waker.take() {
                    w.wake();
                }
            }
            None => self.conn.release(id, data.len()),
        }
    }

    pub fn trailers(&mut self, id: u32, head: RequestHead) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.trailers = Some(head);
            s.end = true;
            if let Some(w) = s.recv_waker.take() {
                w.wake();
            }
        }
    }

    pub fn reset(&mut self, id: u32, reason: Reason) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.reset = Some(reason);
            for w in [s.recv_waker.take(), s.send_waker.take()].into_iter().flatten() {
                w.wake();
            }
        }
    }

    pub fn writable(&mut self, id: u32) {
        if let Some(w) = self.streams.get_mut(&id).and_then(|s| s.send_waker.take()) {
            w.wake();
        }
    }

    /// The connection wrote what was queued: streams held back by `OUT_HIGH` go on.
    pub fn drained(&mut self) {
        for w in self.drain_waiters.drain(..) {
            w.wake();
        }
    }

    /// The connection ended: every stream's wait ends with [`Gone::Closed`].
    pub fn close(&mut self) {
        self.closed = true;
        for s in self.streams.values_mut() {
            for w in [s.recv_waker.take(), s.send_waker.take()].into_iter().flatten() {
                w.wake();
            }
        }
        self.drained();
    }

    fn gone(&self, id: u32) -> Option<Gone> {
        if self.closed {
            return Some(Gone::Closed);
        }
        match self.streams.get(&id) {
            Some(s) => s.reset.map(Gone::Reset),
            None => Some(Gone::Closed),
        }
    }
}

/// One stream, as its task sees it. Dropping it resets the stream (CANCEL) unless it ended.
pub struct H2Stream {
    shared: Rc<RefCell<Shared>>,
    id: u32,
}

impl H2Stream {
    pub fn new(shared: Rc<RefCell<Shared>>, id: u32) -> Self {
        Self { shared, id }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// Sends the response head (or a 1xx head), fields written by `write`.
    pub fn send_head_with(
        &self,
        status: u16,
        end_stream: bool,
        write: impl FnOnce(&mut HeadWriter<'_>),
    ) -> Result<(), Gone> {
        let mut s = self.shared.borrow_mut();
        if let Some(g) = s.gone(self.id) {
            return Err(g);
        }
        let r = s.conn.send_head_with(self.id, status, end_stream, write);
        s.wake_conn();
        r.map_err(|_| Gone::Closed)
    }

    /// Sends trailers (which end the stream).
    pub fn send_trailers_with(&self, write: impl FnOnce(&mut HeadWriter<'_>)) -> Result<(), Gone> {
        let mut s = self.shared.borrow_mut();
        if let Some(g) = s.gone(self.id) {
            return Err(g);
        }
        let r = s.conn.send_trailers_with(self.id, write);
        s.wake_conn();
        r.map_err(|_| Gone::Closed)
    }

    /// Sends `data` within the client's windows, waiting for window as needed (reported to
    /// `watch`); `end_stream` ends the stream with it.
    pub async fn send_data(&self, mut data: &[u8], end_stream: bool, watch: Option<&FlowWatch>) -> Result<(), Gone> {
        let mut waiting = None;
        loop {
            let step = poll_fn(|cx| {
                let mut s = self.shared.borrow_mut();
                if let Some(g) = s.gone(self.id) {
                    return Poll::Ready(Err(g));
                }
                if s.conn.out().len() + s.writing > OUT_HIGH {
                    s.drain_waiters.push(cx.waker().clone());
                    return Poll::Pending;
                }
                let took = match s.conn.send_data(self.id, data, end_stream) {
                    Ok(n) => n,
                    Err(SendError::Closed | SendError::Order) => return Poll::Ready(Err(Gone::Closed)),
                };
                s.wake_conn();
                Poll::Ready(Ok(took))
            });
            let took = step.await?;
            if took > 0 && waiting.take().is_some() {
                if let Some(watch) = watch {
                    watch.grant();
                }
            }
            data = data.get(took..).unwrap_or_default();
            if data.is_empty() {
                return Ok(());
            }
            if waiting.is_none() {
                waiting = watch.map(FlowWatch::wait);
            }
            // Wait for window before trying again.
            self.wait_writable().await?;
        }
    }

    /// Waits until the stream may send some bytes.
    async fn wait_writable(&self) -> Result<(), Gone> {
        poll_fn(|cx| {
            let mut s = self.shared.borrow_mut();
            if let Some(g) = s.gone(self.id) {
                return Poll::Ready(Err(g));
            }
            if s.conn.send_capacity(self.id) > 0 {
                return Poll::Ready(Ok(()));
            }
            if let Some(io) = s.streams.get_mut(&self.id) {
                io.send_waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Resets the stream (the gateway gives up on it).
    pub fn reset(&self, reason: Reason) {
        let mut s = self.shared.borrow_mut();
        s.conn.reset(self.id, reason);
        s.wake_conn();
    }

    /// The request body's reader (for a task of its own: a pump to an HTTP/2 upstream).
    pub fn body(&self) -> BodyReader {
        BodyReader { shared: Rc::clone(&self.shared), id: self.id }
    }

    /// See [`BodyReader::data`].
    pub async fn data(&self) -> Option<Result<Bytes, Gone>> {
        self.body().data().await
    }

    /// See [`BodyReader::release`].
    pub fn release(&self, n: usize) {
        self.body().release(n);
    }

    /// See [`BodyReader::take_trailers`].
    pub fn take_trailers(&self) -> Option<RequestHead> {
        self.body().take_trailers()
    }

    /// See [`BodyReader::is_end_stream`].
    pub fn is_end_stream(&self) -> bool {
        self.body().is_end_stream()
    }

    /// See [`BodyReader::arrived`].
    pub fn arrived(&self) -> Option<u64> {
        self.body().arrived()
    }
}

/// A stream's request body, read apart from its answer. Dropping it changes nothing.
#[derive(Clone)]
pub struct BodyReader {
    shared: Rc<RefCell<Shared>>,
    id: u32,
}

impl BodyReader {
    /// The next chunk of the request body; `None` at its end (trailers may follow). The caller
    /// gives the chunk's window back with [`H2Stream::release`] once it dealt with it.
    pub async fn data(&self) -> Option<Result<Bytes, Gone>> {
        poll_fn(|cx| {
            let mut s = self.shared.borrow_mut();
            let closed = s.closed;
            let Some(io) = s.streams.get_mut(&self.id) else { return Poll::Ready(Some(Err(Gone::Closed))) };
            if let Some(chunk) = io.chunks.pop_front() {
                return Poll::Ready(Some(Ok(chunk)));
            }
            if let Some(r) = io.reset {
                return Poll::Ready(Some(Err(Gone::Reset(r))));
            }
            if io.end {
                return Poll::Ready(None);
            }
            if closed {
                return Poll::Ready(Some(Err(Gone::Closed)));
            }
            io.recv_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Gives `n` bytes of window back to the client.
    pub fn release(&self, n: usize) {
        let mut s = self.shared.borrow_mut();
        s.conn.release(self.id, n);
        s.wake_conn();
    }

    /// The request's trailers, once the body ended (`None`: it had none).
    pub fn take_trailers(&self) -> Option<RequestHead> {
        self.shared.borrow_mut().streams.get_mut(&self.id).and_then(|s| s.trailers.take())
    }

    /// The bytes of the request body waiting to be read, when the client has ended it (so
    /// that reading all of it waits for nothing); `None` while more may come, or after a reset.
    pub fn arrived(&self) -> Option<u64> {
        let s = self.shared.borrow();
        let io = s.streams.get(&self.id)?;
        (io.end && io.reset.is_none()).then(|| io.chunks.iter().map(|c| c.len() as u64).sum())
    }

    /// Whether the request has no more body (ended and nothing buffered).
    pub fn is_end_stream(&self) -> bool {
        let s = self.shared.borrow();
        s.streams.get(&self.id).is_none_or(|io| io.end && io.chunks.is_empty())
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        let mut s = self.shared.borrow_mut();
        s.streams.remove(&self.id);
        // A stream still open (the task ended without finishing its answer) is reset.
        s.conn.forget(self.id);
        s.wake_conn();
    }
}
