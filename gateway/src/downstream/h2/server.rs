//! One downstream HTTP/2 connection: the gateway's own codec (`gateway_h2::server::Conn`)
//! driven by this task, with a frame guard in front of it; each stream is handled by a task of
//! its own ([`super::stream`]), which shares the codec through [`Shared`].
//!
//! The task reads what the client sent, lets the codec turn it into events (a request, body
//! bytes, a reset, a window opened) and hands each to its stream; it writes whatever the codec
//! and the streams queued, in one write per wake-up, however many streams answered meanwhile.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use gateway_h2::frame::Reason;
use gateway_h2::server::{Config as H2Config, Conn, ConnError, Event};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::guard::{FrameGuard, GuardLimits, Violation};
use super::stall::Stall;
use crate::admission::penalty::{Admit, MAX_STREAMS};
use crate::codec::h2io::FlowWatch;
use crate::codec::h2shared::{H2Stream, Shared};
use crate::downstream::{LINGER, LINGER_BYTES};
use crate::request::Client;
use crate::runtime::signal::ListenerHandle;
use crate::worker::Worker;

/// What every stream of a connection shares.
pub struct ConnCtx {
    pub client: Rc<Client>,
    /// Streams being handled.
    pub active: Cell<usize>,
    /// When the last stream ended (for the idle timeout).
    pub idle_since: Cell<Instant>,
    /// The streams' waits for the client's flow-control window (for the stall timeout).
    pub flow: FlowWatch,
}

/// Longest wait for the GOAWAY of a connection being closed to be written.
const GOAWAY_FLUSH: Duration = Duration::from_secs(1);

/// Longest wait, in a graceful shutdown, for the client to acknowledge the first GOAWAY's PING
/// before the final GOAWAY goes out anyway (checked on the connection's tick, so up to one tick
/// more).
const SHUTDOWN_ACK_WAIT: Duration = Duration::from_secs(1);

/// Reads per wake-up before the task lets the streams it woke run (and write).
const READS_PER_WAKE: usize = 4;

/// How the connection's I/O ended.
enum End {
    /// The socket failed.
    Io,
    /// The client closed its side (end of stream).
    Closed,
    /// A connection error of the protocol (GOAWAY queued).
    Protocol(ConnError),
    /// The frame guard tripped.
    Tripped(Violation),
    /// The client stalled flow control (GOAWAY queued).
    Stalled,
    /// GOAWAY went out (or came) and every stream finished.
    Done,
}

enum Event2 {
    Io(End),
    Tick,
    Stop,
}

/// Serves an HTTP/2 connection until the client leaves, it idles out, it misbehaves, or the
/// listener stops (then in-flight streams finish after a GOAWAY).
pub async fn serve<T>(worker: &Rc<Worker>, io: T, client: Rc<Client>)
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let peer = client.peer;
    // A source recently cut for stalling flow control gets a few one-stream connections.
    let penalized = match worker.h2_penalty.admit(peer.ip(), Instant::now()) {
        Admit::Free => None,
        Admit::Limited => Some(Penalized { worker, ip: peer.ip() }),
        Admit::Refused => {
            worker.stats.h2_abuse_penalized.inc();
            return;
        }
    };
    let local = worker.local();
    let server = &local.snap.config.server;
    let settings = &server.http2;
    let tripped = Rc::new(Cell::new(None));
    let limits = GuardLimits {
        window: settings.flood_window,
        max_resets: settings.max_resets,
        max_control_frames: settings.max_control_frames,
        max_empty_frames: settings.max_empty_frames,
        // The compressed block of a header list within the limit is no larger than the list;
        // the decoded list is checked again per request (431).
        max_header_block_bytes: settings.max_header_list_bytes,
    };
    let io = FrameGuard::new(io, limits, Rc::clone(&tripped));
    let cfg = H2Config {
        max_concurrent_streams: if penalized.is_some() { MAX_STREAMS } else { settings.max_concurrent_streams },
        stream_window: settings.initial_stream_window_bytes,
        conn_window: settings.initial_connection_window_bytes,
        max_frame: settings.max_frame_bytes,
        max_header_list: settings.max_header_list_bytes,
        max_stream_errors: settings.max_resets,
    };
    let header_read = server.timeouts.header_read;
    let idle_timeout = server.timeouts.idle;
    let mut stall = Stall::new(settings.stall_timeout);
    drop(local);
    let shared = Shared::new(Conn::new(cfg));
    let ctx = Rc::new(ConnCtx {
        client,
        active: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        flow: FlowWatch::default(),
    });
    let mut driver = Driver {
        io,
        rbuf: vec![0; read_buffer_len(cfg.max_frame)],
        filled: 0,
        wbuf: Vec::new(),
        wpos: 0,
        events: Vec::new(),
        spawn: Vec::new(),
        flushing: false,
    };
    let tick = stall.tick();
    // One timer and one stop registration for the connection's life, not one per stream. The
    // timer is a deadline, so streams arriving faster than the tick never postpone the idle and
    // stall checks.
    let ticker = monoio::time::sleep(tick);
    let mut ticker = std::pin::pin!(ticker);
    let stop = stop_signal(&ctx.client.listener, false);
    let mut stop = std::pin::pin!(stop);
    let mut stopping = false;
    // When the graceful shutdown's first GOAWAY went out.
    let mut shutdown_at: Option<Instant> = None;
    let opened = Instant::now();
    let end = loop {
        let event = monoio::select! {
            e = poll_fn(|cx| {
                if let Some(v) = tripped.get() {
                    return Poll::Ready(End::Tripped(v));
                }
                driver.poll(cx, &shared, worker, &ctx)
            }) => Event2::Io(e),
            _ = &mut ticker => Event2::Tick,
            _ = &mut stop => Event2::Stop,
        };
        match event {
            Event2::Io(end) => break end,
            Event2::Tick => {
                ticker.as_mut().reset(monoio::time::Instant::now() + tick);
                if !shared.borrow().conn.started() && opened.elapsed() >= header_read {
                    // No preface and SETTINGS within the head's read timeout.
                    worker.stats.header_read_timeouts.inc();
                    shared.borrow_mut().close();
                    return;
                }
                if stall.check(ctx.flow.waiting(), ctx.flow.granted(), Instant::now()) {
                    worker.stats.h2_abuse_stall.inc();
                    worker.h2_penalty.penalize(peer.ip(), Instant::now());
                    let waiting = ctx.flow.waiting();
                    tracing::info!(%peer, waiting, "HTTP/2 client stalled flow control: GOAWAY ENHANCE_YOUR_CALM");
                    // ENHANCE_YOUR_CALM as for the floods: the client holds resources without
                    // using them. Every stream's pending send fails at once, which frees its
                    // upstream connection, buffers and cluster slot.
                    abort(&shared, Reason::ENHANCE_YOUR_CALM, "flow control stalled");
                    break End::Stalled;
                }
                if !stopping && ctx.active.get() == 0 && ctx.idle_since.get().elapsed() >= idle_timeout {
                    stopping = true;
                    stop.set(stop_signal(&ctx.client.listener, true));
                    shared.borrow_mut().conn.shutdown();
                    shutdown_at = Some(Instant::now());
                }
                if shutdown_at.is_some_and(|at| at.elapsed() >= SHUTDOWN_ACK_WAIT) {
                    // The client did not acknowledge the first GOAWAY's PING in time.
                    tracing::debug!(%peer, "HTTP/2 shutdown: no PING ACK, final GOAWAY");
                    shared.borrow_mut().conn.finish_shutdown();
                    shutdown_at = None;
                }
            }
            Event2::Stop => {
                stopping = true;
                // Resolved once: from now on it never resolves (a finished future is not
                // polled again).
                stop.set(stop_signal(&ctx.client.listener, true));
                shared.borrow_mut().conn.shutdown();
                shutdown_at = Some(Instant::now());
            }
        }
    };
    match end {
        End::Io => {}
        End::Closed => {
            // The client sends nothing more: a graceful shutdown waits for no ACK, and what is
            // queued goes out before this side closes too (TLS: close_notify).
            shared.borrow_mut().conn.finish_shutdown();
            let _ = crate::runtime::timeout(GOAWAY_FLUSH, driver.close(&shared)).await;
        }
        End::Done => {
            // Every answer is out: the transport closes cleanly (TLS: close_notify), then
            // lingers until the client closes its side.
            if let Ok(true) = crate::runtime::timeout(GOAWAY_FLUSH, driver.close(&shared)).await {
                Box::pin(driver.linger()).await;
            }
        }
        End::Protocol(e) => {
            if e.reason == Reason::ENHANCE_YOUR_CALM {
                // The codec's own abuse limits: an endless header block, or a client that keeps
                // breaking stream rules (each answered with a reset).
                let v = if e.what == gateway_h2::server::BLOCK_TOO_LARGE {
                    Violation::HeaderBlockTooLarge
                } else {
                    Violation::ResetFlood
                };
                count_violation(worker, v);
            } else {
                worker.stats.h2_protocol_errors.inc();
            }
            tracing::debug!(%peer, reason = e.reason.name(), what = e.what, "HTTP/2 connection error");
            let _ = crate::runtime::timeout(GOAWAY_FLUSH, driver.close(&shared)).await;
        }
        // Counted and logged where the stall was found.
        End::Stalled => {
            let _ = crate::runtime::timeout(GOAWAY_FLUSH, driver.close(&shared)).await;
        }
        End::Tripped(v) => {
            count_violation(worker, v);
            tracing::info!(%peer, violation = v.label(), "HTTP/2 client flood: GOAWAY ENHANCE_YOUR_CALM");
            abort(&shared, Reason::ENHANCE_YOUR_CALM, v.label());
            let _ = crate::runtime::timeout(GOAWAY_FLUSH, driver.close(&shared)).await;
        }
    }
    shared.borrow_mut().close();
    drop(penalized);
}

/// Ends the connection at once with GOAWAY `reason`.
fn abort(shared: &RefCell<Shared>, reason: Reason, what: &'static str) {
    let mut s = shared.borrow_mut();
    s.conn.abort(reason, what);
    s.close();
}

/// The read buffer: one frame of the largest size the client may send, and at least 16 KiB
/// (a read takes every frame a busy client sent since the last one: dozens of HEADERS).
fn read_buffer_len(max_frame: u32) -> usize {
    (max_frame as usize + gateway_h2::frame::HEAD_LEN).max(16 * 1024)
}

/// The connection's socket, its buffers and the events of the last read.
struct Driver<T> {
    io: FrameGuard<T>,
    /// Bytes read, `rbuf[..filled]`; the codec takes whole frames from the front.
    rbuf: Vec<u8>,
    filled: usize,
    /// Bytes being written, `wbuf[wpos..]`, taken from the codec's output.
    wbuf: Vec<u8>,
    wpos: usize,
    events: Vec<Event>,
    /// The streams a read opened, spawned once the codec is no longer borrowed.
    spawn: Vec<(u32, super::stream::Start)>,
    /// Bytes were written since the last flush.
    flushing: bool,
}

impl<T: AsyncRead + AsyncWrite + Unpin + 'static> Driver<T> {
    /// Writes, reads and dispatches until neither can go on; `Ready` when the connection ends.
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        shared: &Rc<RefCell<Shared>>,
        worker: &Rc<Worker>,
        ctx: &Rc<ConnCtx>,
    ) -> Poll<End> {
        shared.borrow_mut().set_conn_waker(cx.waker());
        for _ in 0..READS_PER_WAKE {
            if let Poll::Ready(Err(_)) = self.flush(cx, shared) {
                return Poll::Ready(End::Io);
            }
            if shared.borrow().conn.is_done() && self.wbuf.is_empty() && !self.flushing {
                return Poll::Ready(End::Done);
            }
            let spare = self.rbuf.get_mut(self.filled..).unwrap_or_default();
            if spare.is_empty() {
                // A frame larger than the buffer: the codec refused it already.
                return Poll::Ready(End::Io);
            }
            let mut rb = ReadBuf::new(spare);
            match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(End::Io),
                Poll::Ready(Ok(())) => {}
            }
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(End::Closed);
            }
            self.filled += n;
            if let Err(e) = self.process(shared, worker, ctx) {
                return Poll::Ready(End::Protocol(e));
            }
        }
        // More may be readable: let the streams woken so far run first.
        cx.waker().wake_by_ref();
        match self.flush(cx, shared) {
            Poll::Ready(Err(_)) => Poll::Ready(End::Io),
            _ => Poll::Pending,
        }
    }

    /// Hands what was read to the codec and its events to the streams.
    fn process(
        &mut self,
        shared: &Rc<RefCell<Shared>>,
        worker: &Rc<Worker>,
        ctx: &Rc<ConnCtx>,
    ) -> Result<(), ConnError> {
        let input = self.rbuf.get(..self.filled).unwrap_or_default();
        let mut s = shared.borrow_mut();
        let result = s.conn.recv(input, &mut self.events);
        for event in self.events.drain(..) {
            match event {
                Event::Request { stream, head, end_stream } => {
                    s.open(stream, end_stream);
                    self.spawn.push((stream, super::stream::Start::Request(head)));
                }
                Event::Refused { stream, status } => {
                    s.open(stream, true);
                    self.spawn.push((stream, super::stream::Start::Refused(status)));
                }
                Event::Data { stream, start, end, end_stream } => {
                    s.data(stream, input.get(start..end).unwrap_or_default(), end_stream);
                }
                Event::Trailers { stream, head } => s.trailers(stream, head),
                Event::Reset { stream, reason, .. } => s.reset(stream, reason),
                Event::Writable { stream } => s.writable(stream),
                Event::GoAway { .. } => {}
            }
        }
        drop(s);
        for (id, start) in self.spawn.drain(..) {
            worker.stats.h2_streams.inc();
            ctx.active.set(ctx.active.get() + 1);
            let stream = H2Stream::new(Rc::clone(shared), id);
            monoio::spawn(super::stream::handle(Rc::clone(worker), Rc::clone(ctx), stream, start));
        }
        let consumed = result?;
        self.rbuf.copy_within(consumed..self.filled, 0);
        self.filled -= consumed;
        Ok(())
    }

    /// Writes what is queued (a GOAWAY last), then closes the transport's sending side
    /// (TLS: close_notify); whether both went out.
    async fn close(&mut self, shared: &RefCell<Shared>) -> bool {
        poll_fn(|cx| self.flush(cx, shared)).await.is_ok()
            && poll_fn(|cx| Pin::new(&mut self.io).poll_shutdown(cx)).await.is_ok()
    }

    /// After [`Driver::close`]: reads and discards what the client still sends until it closes
    /// its side, for at most [`LINGER`] and [`LINGER_BYTES`]: frames racing the close (a request
    /// opened before the client read the GOAWAY) are not answered by a reset.
    async fn linger(&mut self) {
        let deadline = monoio::time::Instant::now() + LINGER;
        let mut total = 0;
        while total < LINGER_BYTES {
            let read = poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut self.rbuf);
                match Pin::new(self.io.get_mut()).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) => Poll::Ready(rb.filled().len()),
                    Poll::Ready(Err(_)) => Poll::Ready(0),
                    Poll::Pending => Poll::Pending,
                }
            });
            match crate::runtime::timeout_at(deadline, read).await {
                Ok(n) if n > 0 => total += n,
                _ => return,
            }
        }
    }

    /// Writes what the codec queued; `Ready(Ok)` once everything is written and flushed.
    fn flush(&mut self, cx: &mut Context<'_>, shared: &RefCell<Shared>) -> Poll<io::Result<()>> {
        loop {
            if self.wpos >= self.wbuf.len() {
                self.wbuf.clear();
                self.wpos = 0;
                let mut s = shared.borrow_mut();
                if !s.conn.wants_write() {
                    s.writing = 0;
                    s.drained();
                    break;
                }
                std::mem::swap(s.conn.out(), &mut self.wbuf);
                s.writing = self.wbuf.len();
            }
            let pending = self.wbuf.get(self.wpos..).unwrap_or_default();
            match Pin::new(&mut self.io).poll_write(cx, pending) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.wpos += n;
                    self.flushing = true;
                    shared.borrow_mut().writing = self.wbuf.len() - self.wpos;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        if self.flushing {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.flushing = false,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// A penalized source's connection, counted until it ends.
struct Penalized<'a> {
    worker: &'a Worker,
    ip: std::net::IpAddr,
}

impl Drop for Penalized<'_> {
    fn drop(&mut self) {
        self.worker.h2_penalty.closed(self.ip);
    }
}

/// Resolves when the listener stops, once; never again after the connection started stopping.
async fn stop_signal(listener: &ListenerHandle, stopping: bool) {
    if stopping {
        std::future::pending::<()>().await;
    }
    listener.stop.wait().await;
}

fn count_violation(worker: &Worker, v: Violation) {
    let c = match v {
        Violation::ResetFlood => &worker.stats.h2_abuse_reset_flood,
        Violation::ControlFlood => &worker.stats.h2_abuse_control_flood,
        Violation::EmptyFrameFlood => &worker.stats.h2_abuse_empty_frames,
        _ => &worker.stats.h2_abuse_header_block,
    };
    c.inc();
}
