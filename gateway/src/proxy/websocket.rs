//! WebSocket (RFC 6455) over HTTP/1.1: which handshakes are forwarded, and the tunnel that
//! copies bytes both ways once the upstream has answered `101 Switching Protocols`.
//!
//! The gateway does not parse frames: after the 101 it is a byte pipe with a 16 KiB buffer per
//! direction. The tunnel ends when both directions have ended (an end of stream read on one
//! side is passed on as a half-close of the other, so a close handshake completes), when
//! neither side sent anything for `server.timeouts.idle`, when an I/O error occurs, or when the
//! listener stops (drain, reload). The upstream connection is never pooled afterwards.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use monoio::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::head::build_switch_head;
use crate::http::conn::{Downstream, Next};
use crate::http::h1::{self, BodyFraming, HeadScratch, Method, RequestHead, ResponseHead};
use crate::runtime::io::write_from;
use crate::runtime::stream::PollStream;
use crate::runtime::worker::{Local, Worker};
use crate::stats::WorkerStats;
use crate::upstream::UpConn;

/// Buffer of each direction of a tunnel.
const TUNNEL_BUFFER: usize = 16 * 1024;
/// How long closing a tunnel's connections may take (TLS close_notify, FIN).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// A WebSocket handshake the gateway answers itself instead of forwarding: status and extra
/// header lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub headers: &'static [u8],
}

/// Checks the client's opening handshake (RFC 6455 §4.2.1) for a request with
/// `head.websocket` on a route that allows WebSocket: GET without a body, exactly one
/// `Sec-WebSocket-Key` that is 16 bytes in base64 (else 400), and `Sec-WebSocket-Version: 13`
/// (400 when missing; any other version is 426 with `sec-websocket-version: 13`, §4.4).
pub fn check_handshake(buf: &[u8], head: &RequestHead, scratch: &HeadScratch) -> Result<(), Refusal> {
    const BAD: Refusal = Refusal { status: 400, headers: b"" };
    const VERSION: Refusal = Refusal { status: 426, headers: b"sec-websocket-version: 13\r\n" };
    if head.method != Method::Get || !matches!(head.body, BodyFraming::None | BodyFraming::Length(0)) {
        return Err(BAD);
    }
    let mut key = None;
    let mut version = None;
    for h in scratch.headers() {
        let name = h.name(buf);
        let slot = if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            &mut key
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            &mut version
        } else {
            continue;
        };
        if slot.replace(h.value(buf)).is_some() {
            return Err(BAD);
        }
    }
    if !key.is_some_and(is_key) {
        return Err(BAD);
    }
    match version {
        None => Err(BAD),
        Some(b"13") => Ok(()),
        Some(_) => Err(VERSION),
    }
}

/// Whether the upstream's 101 accepts a WebSocket upgrade: its `Upgrade` lists `websocket`.
pub fn accepts_websocket(buf: &[u8], scratch: &HeadScratch) -> bool {
    scratch
        .headers()
        .iter()
        .any(|h| h.name(buf).eq_ignore_ascii_case(b"upgrade") && h1::list_contains(h.value(buf), b"websocket"))
}

/// Relays the upstream's 101 (`ubuf[upos..]`) to the client and runs the tunnel until it ends.
/// The client connection always closes afterwards.
#[allow(clippy::too_many_arguments)]
pub(super) async fn tunnel(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Local,
    mut up: UpConn,
    ubuf: Vec<u8>,
    upos: usize,
    resp: &ResponseHead,
    mut wbuf: Vec<u8>,
) -> Next {
    let server = &local.snap.config.server;
    wbuf.clear();
    {
        let scratch = worker.resp_scratch(server.limits.max_headers);
        let decor = crate::http::decor::Decor::new(&local.snap.config, conn.ex.route, conn.ex.tls);
        build_switch_head(&mut wbuf, ubuf.get(upos..).unwrap_or_default(), resp, &scratch, &decor);
    }
    // Frames the upstream sent right behind its 101 go out with it.
    wbuf.extend_from_slice(ubuf.get(upos + resp.head_len..).unwrap_or_default());
    worker.buffers.give(ubuf);
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
                let (bytes_in, bytes_out) = pipe(worker, conn, client, upstream, idle).await;
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

/// Copies bytes both ways until the tunnel ends; returns the bytes read from and written to
/// the client.
async fn pipe(
    worker: &Worker,
    conn: &Downstream,
    client: PollStream,
    upstream: PollStream,
    idle: Duration,
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
            _ = conn.listener.stop.wait() => End::Stopped,
        }
    };
    tracing::debug!(end = ?end, "websocket tunnel ended");
    if !matches!(end, End::Closed(Ok(_))) {
        // Tell both sides (TLS: close_notify), but never wait long for a peer that stopped reading.
        let shutdown = async {
            let _ = poll_fn(|cx| Pin::new(&mut a).poll_shutdown(cx)).await;
            let _ = poll_fn(|cx| Pin::new(&mut b).poll_shutdown(cx)).await;
        };
        let _ = monoio::time::timeout(SHUTDOWN_LIMIT, shutdown).await;
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
        monoio::time::sleep_until(deadline).await;
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

/// `Sec-WebSocket-Key`: base64 of 16 bytes, i.e. 22 base64 characters and `==`.
fn is_key(value: &[u8]) -> bool {
    let is_b64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    value.len() == 24 && value.ends_with(b"==") && value.get(..22).is_some_and(|k| k.iter().all(is_b64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::http::h1::{parse_request, RequestLimits};

    const LIMITS: RequestLimits = RequestLimits { max_request_line: 8192, max_header_bytes: 65536, max_headers: 64 };
    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    fn check(req: &str) -> Result<(), Refusal> {
        let mut scratch = HeadScratch::new(64);
        let head = parse_request(req.as_bytes(), &LIMITS, &mut scratch).unwrap().unwrap();
        assert!(head.websocket, "test request must be an upgrade");
        check_handshake(req.as_bytes(), &head, &scratch)
    }

    fn req(method: &str, extra: &str) -> String {
        format!("{method} /ws HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\nconnection: Upgrade\r\n{extra}\r\n")
    }

    #[test]
    fn a_complete_handshake_passes() {
        let ok = format!("sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n");
        assert_eq!(check(&req("GET", &ok)), Ok(()));
        assert_eq!(check(&req("GET", &format!("{ok}content-length: 0\r\n"))), Ok(()));
    }

    #[test]
    fn incomplete_handshakes_are_refused() {
        let bad = |r: &str| check(r).map_err(|e| e.status);
        let v13 = "sec-websocket-version: 13\r\n";
        assert_eq!(bad(&req("GET", v13)), Err(400), "no key");
        assert_eq!(bad(&req("GET", &format!("sec-websocket-key: abc\r\n{v13}"))), Err(400), "short key");
        let key = format!("sec-websocket-key: {KEY}\r\n");
        assert_eq!(bad(&req("GET", &format!("{key}{key}{v13}"))), Err(400), "two keys");
        assert_eq!(bad(&req("POST", &format!("{key}{v13}"))), Err(400), "not GET");
        assert_eq!(bad(&req("GET", &format!("{key}{v13}content-length: 3\r\n"))), Err(400), "body");
        assert_eq!(bad(&req("GET", &key)), Err(400), "no version");
        let old = check(&req("GET", &format!("{key}sec-websocket-version: 8\r\n")));
        assert_eq!(old, Err(Refusal { status: 426, headers: b"sec-websocket-version: 13\r\n" }));
    }

    #[test]
    fn keys_are_16_bytes_of_base64() {
        assert!(is_key(KEY.as_bytes()));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25jZQ="));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25j!Q=="));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25jZQ==="));
    }
}
