//! One downstream HTTP/2 connection: the h2 crate's server connection, driven by this task,
//! with a frame guard in front of it; each stream is handled by a task of its own.

use std::cell::Cell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};

use super::guard::{FrameGuard, GuardLimits, Violation};
use super::stall::Stall;
use crate::admission::penalty::{Admit, MAX_STREAMS};
use crate::codec::h2io::FlowWatch;
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

// One Event per accepted stream, moved once from the select to the match: boxing the large
// variant would only add an allocation per stream.
#[allow(clippy::large_enum_variant)]
enum Event {
    Stream(http::Request<h2::RecvStream>, h2::server::SendResponse<Bytes>),
    Closed(Option<h2::Error>),
    Tripped(Violation),
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
    let in_block = Rc::new(Cell::new(false));
    let io = FrameGuard::new(io, limits, Rc::clone(&tripped)).observe_header_blocks(Rc::clone(&in_block));
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(if penalized.is_some() { MAX_STREAMS } else { settings.max_concurrent_streams })
        // The guard enforces the limit on the encoded block first (and counts the abuse); the
        // h2 crate's own check, on the decoded list, is the backstop.
        .max_header_list_size(settings.max_header_list_bytes.saturating_mul(2))
        .initial_window_size(settings.initial_stream_window_bytes)
        .initial_connection_window_size(settings.initial_connection_window_bytes)
        .max_frame_size(settings.max_frame_bytes)
        // Bounds what one stream may have queued for sending (the upstream is read no faster).
        .max_send_buffer_size(64 * 1024)
        // The guard counts every reset; h2's own rapid-reset check is the backstop.
        .max_pending_accept_reset_streams(settings.max_resets.saturating_mul(2) as usize)
        .max_local_error_reset_streams(Some(settings.max_resets as usize));
    let handshake = monoio::time::timeout(server.timeouts.header_read, builder.handshake::<_, Bytes>(io)).await;
    let mut connection = match handshake {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "HTTP/2 handshake failed");
            worker.stats.h2_protocol_errors.inc();
            return;
        }
        Err(_) => {
            worker.stats.header_read_timeouts.inc();
            return;
        }
    };
    worker.stats.h2_connections.inc();
    let idle_timeout = server.timeouts.idle;
    let ctx = Rc::new(ConnCtx {
        client,
        active: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        flow: FlowWatch::default(),
    });
    let mut stall = Stall::new(settings.stall_timeout);
    drop(local);
    let tick = stall.tick();
    // One timer and one stop registration for the connection's life, not one per stream: a
    // burst of streams would otherwise set and cancel a timer and a drain waiter for each. The
    // timer is a deadline, so streams arriving faster than the tick never postpone the idle and
    // stall checks.
    let ticker = monoio::time::sleep(tick);
    let mut ticker = std::pin::pin!(ticker);
    let stop = stop_signal(&ctx.client.listener, false);
    let mut stop = std::pin::pin!(stop);
    let mut stopping = false;
    loop {
        let event = monoio::select! {
            e = poll_fn(|cx| {
                if let Some(v) = tripped.get() {
                    return Poll::Ready(Event::Tripped(v));
                }
                match connection.poll_accept(cx) {
                    Poll::Ready(Some(Ok((req, respond)))) => Poll::Ready(Event::Stream(req, respond)),
                    Poll::Ready(Some(Err(e))) => Poll::Ready(Event::Closed(Some(e))),
                    Poll::Ready(None) => Poll::Ready(Event::Closed(None)),
                    Poll::Pending => Poll::Pending,
                }
            }) => e,
            _ = &mut ticker => Event::Tick,
            _ = &mut stop => Event::Stop,
        };
        match event {
            Event::Stream(req, respond) => {
                worker.stats.h2_streams.inc();
                ctx.active.set(ctx.active.get() + 1);
                monoio::spawn(super::stream::handle(Rc::clone(worker), Rc::clone(&ctx), req, respond));
            }
            Event::Closed(err) => {
                if let Some(e) = err {
                    count_close(worker, &e, in_block.get());
                    tracing::debug!(%peer, error = %e, "HTTP/2 connection ended");
                }
                return;
            }
            Event::Tripped(v) => {
                count_violation(worker, v);
                tracing::info!(%peer, violation = v.label(), "HTTP/2 client flood: GOAWAY ENHANCE_YOUR_CALM");
                connection.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                let _ = monoio::time::timeout(GOAWAY_FLUSH, poll_fn(|cx| connection.poll_closed(cx))).await;
                return;
            }
            Event::Tick => {
                ticker.as_mut().reset(monoio::time::Instant::now() + tick);
                if stall.check(ctx.flow.waiting(), ctx.flow.granted(), Instant::now()) {
                    worker.stats.h2_abuse_stall.inc();
                    worker.h2_penalty.penalize(peer.ip(), Instant::now());
                    let waiting = ctx.flow.waiting();
                    tracing::info!(%peer, waiting, "HTTP/2 client stalled flow control: GOAWAY ENHANCE_YOUR_CALM");
                    // ENHANCE_YOUR_CALM as for the floods: the client holds resources without
                    // using them. Dropping the connection fails every stream's pending send at
                    // once, which frees its upstream connection, buffers and cluster slot.
                    connection.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    let _ = monoio::time::timeout(GOAWAY_FLUSH, poll_fn(|cx| connection.poll_closed(cx))).await;
                    return;
                }
                if !stopping && ctx.active.get() == 0 && ctx.idle_since.get().elapsed() >= idle_timeout {
                    stopping = true;
                    stop.set(stop_signal(&ctx.client.listener, true));
                    connection.graceful_shutdown();
                }
            }
            Event::Stop => {
                stopping = true;
                // Resolved once: from now on it never resolves (a finished future is not
                // polled again).
                stop.set(stop_signal(&ctx.client.listener, true));
                connection.graceful_shutdown();
            }
        }
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

/// Counts a connection the h2 crate ended with an error: its own abuse checks (too many
/// CONTINUATION frames, a header list far over the limit, too many resets) end it with GOAWAY
/// ENHANCE_YOUR_CALM and are counted with the guard's; other errors as protocol errors.
fn count_close(worker: &Worker, e: &h2::Error, in_header_block: bool) {
    if e.reason() == Some(h2::Reason::NO_ERROR) || e.is_io() {
        return;
    }
    if e.is_go_away() && e.is_library() && e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) {
        let v = if in_header_block { Violation::HeaderBlockTooLarge } else { Violation::ResetFlood };
        count_violation(worker, v);
        return;
    }
    worker.stats.h2_protocol_errors.inc();
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
