//! The WebSocket tunnel of an HTTP/1.1 connection: after the upstream's `101 Switching
//! Protocols`, a byte pipe with a 16 KiB buffer per direction. It ends when both directions
//! have ended (an end of stream read on one side is passed on as a half-close of the other, so
//! a close handshake completes), when neither side sent anything for `server.timeouts.idle`,
//! when an I/O error occurs, or `server.drain_timeout` less a second after its listener stopped
//! (a drain, an upgrade, a reload that removed the listener): until then it carries on, as a
//! request in flight does, and the second left is for telling both sides (FIN, TLS
//! close_notify) before the draining process exits. Until 5 December it ended as the listener
//! stopped, which cut every WebSocket exchange in progress at an upgrade (the soak's smoke run
//! in CI caught one). The upstream connection is never pooled afterwards.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use monoio::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::relay::build_switch_head;
use super::{Conn, Next};
use crate::codec::h1::{HeadScratch, ResponseHead};
use crate::runtime::io::write_from;
use crate::runtime::stream::PollStream;
use crate::stats::WorkerStats;
use crate::upstream::UpConn;
use crate::worker::{Local, Worker};

/// Buffer of each direction of a tunnel.
const TUNNEL_BUFFER: usize = 16 * 1024;
/// How long closing a tunnel's connections may take (TLS close_notify, FIN).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// Relays the upstream's 101 (`ubuf[upos..]`) to the client and runs the tunnel until it ends.
/// The client connection always closes afterwards.
#[allow(clippy::too_many_arguments)]
pub(super) async fn tunnel(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    local: &Local,
    mut up: UpConn,
    ubuf: Vec<u8>,
    upos: usize,
    resp: &ResponseHead,
    scratch: HeadScratch,
) -> Next {
    let server = &local.snap.config.server;
    let mut wbuf = worker.buffers.take();
    {
        let decor = crate::pipeline::decor::Decor::new(&local.snap.config, conn.ex.route, conn.ex.tls);
        build_switch_head(&mut wbuf, ubuf.get(upos..).unwrap_or_default(), resp, &scratch, &decor);
    }
    worker.give_scratch(scratch);
    // Frames the upstream sent right behind its 101 go out with it.
    wbuf.extend_from_slice(ubuf.get(upos + resp.head_len..).unwrap_or_default());
    worker.buffers.give_response(ubuf);
    conn.ex.status = 101;
    worker.stats.websocket_upgrades.inc();
    worker.stats.websocket_active.inc();
    // Frames the client sent right behind its handshake go to the upstream first.
    let early = conn.rbuf.get(conn.rpos..).unwrap_or_default();
    let mut ok = true;
    if !early.is_empty() {
        let mut out = worker.buffers.take();
        out.extend_from_slice(early);
        let n = out.len() as u64;
        conn.rpos = conn.rbuf.len();
        let (res, out) = write_from(&mut up.stream, out, 0, server.timeouts.body_io).await;
        worker.buffers.give(out);
        conn.ex.bytes_in += n;
        ok = res.is_ok();
    }
    if ok {
        let n = wbuf.len() as u64;
        let (res, out) = write_from(&mut conn.stream, std::mem::take(&mut wbuf), 0, server.timeouts.body_io).await;
        wbuf = out;
        worker.stats.downstream_bytes_out.add(n);
        conn.ex.bytes_out += n;
        ok = res.is_ok();
    }
    worker.buffers.give(wbuf);
    if ok {
        match (conn.stream.take_poll(), up.stream.take_poll()) {
            (Ok(client), Ok(upstream)) => {
                let idle = server.timeouts.idle;
                let grace = server.drain_timeout.saturating_sub(SHUTDOWN_LIMIT);
                let (bytes_in, bytes_out) = pipe(worker, conn, client, upstream, idle, grace).await;
                conn.ex.bytes_in += bytes_in;
                conn.ex.bytes_out += bytes_out;
            }
            (c, u) => {
                let e = c.err().or(u.err());
                tracing::debug!(error = ?e, "websocket tunnel: switching to poll mode failed");
            }
        }
    }
    worker.stats.websocket_active.sub(1);
    drop(up);
    Next::Close
}

/// How a tunnel ended.
#[derive(Debug)]
enum End {
    /// Both directions reached end of stream (and were half-closed on the other side), or one
    /// failed.
    Closed(io::Result<(u64, u64)>),
    Idle,
    Stopped,
}

/// Copies bytes both ways until the tunnel ends (at the latest `grace` after its listener
/// stopped); returns the bytes read from and written to the client.
async fn pipe(
    worker: &Worker,
    conn: &Conn,
    client: PollStream,
    upstream: PollStream,
    idle: Duration,
    grace: Duration,
) -> (u64, u64) {
    let last = Cell::new(Instant::now());
    let (client_read, client_written) = (Cell::new(0), Cell::new(0));
    let (up_read, up_written) = (Cell::new(0), Cell::new(0));
    let mut a =
        Metered { io: client, last: &last, read: &client_read, written: &client_written, stats: Some(&*worker.stats) };
    let mut b = Metered { io: upstream, last: &last, read: &up_read, written: &up_written, stats: None };
    let end = {
        let copy = tokio::io::copy_bidirectional_with_sizes(&mut a, &mut b, TUNNEL_BUFFER, TUNNEL_BUFFER);
        monoio::select! {
            r = copy => End::Closed(r),
            _ = idle_watch(&last, idle) => End::Idle,
            _ = async {
                conn.client.listener.stop.wait().await;
                monoio::time::sleep(grace).await;
            } => End::Stopped,
        }
    };
    tracing::debug!(end = ?end, "websocket tunnel ended");
    if !matches!(end, End::Closed(Ok(_))) {
        // Tell both sides (TLS: close_notify), but never wait long for a peer that stopped reading.
        let shutdown = async {
            let _ = poll_fn(|cx| Pin::new(&mut a).poll_shutdown(cx)).await;
            let _ = poll_fn(|cx| Pin::new(&mut b).poll_shutdown(cx)).await;
        };
        let _ = crate::runtime::timeout(SHUTDOWN_LIMIT, shutdown).await;
    }
    (client_read.get(), client_written.get())
}

/// Returns once nothing was read on either side for `idle`.
async fn idle_watch(last: &Cell<Instant>, idle: Duration) {
    loop {
        let deadline = last.get() + idle;
        if Instant::now() >= deadline {
            return;
        }
        crate::runtime::boxed(|| monoio::time::sleep_until(deadline)).await;
    }
}

/// One side of a tunnel: counts the bytes read and written, and notes when it last read.
struct Metered<'a> {
    io: PollStream,
    last: &'a Cell<Instant>,
    read: &'a Cell<u64>,
    written: &'a Cell<u64>,
    /// The downstream side also moves the worker's downstream byte counters, as it goes.
    stats: Option<&'a WorkerStats>,
}

impl AsyncRead for Metered<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut me.io).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            me.last.set(Instant::now());
            me.read.set(me.read.get() + n);
            if let Some(s) = me.stats {
                s.downstream_bytes_in.add(n);
            }
        }
        res
    }
}

impl AsyncWrite for Metered<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let res = Pin::new(&mut me.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            me.written.set(me.written.get() + n as u64);
            if let Some(s) = me.stats {
                s.downstream_bytes_out.add(n as u64);
            }
        }
        res
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
