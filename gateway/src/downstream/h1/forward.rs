//! An HTTP/1.1 client's side of forwarding: its body sent to an HTTP/1.1 upstream (as is or
//! re-chunked) or into an HTTP/2 stream, interim responses written back to it, and the answer
//! relayed (`relay`) or refused.

use std::io;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use monoio::time::Instant;

use crate::runtime::idle_timer::Expiry;

use super::{relay, Conn, Next};
use crate::codec::body::{self, Dest, Side, Source, TransferError};
use crate::codec::chunked::ChunkedDecoder;
use crate::codec::h1::{BodyFraming, RequestHead};
use crate::pipeline::answer::Refusal;
use crate::pipeline::forward::{Downstream, H1Response, H2Response, Response, Try};
use crate::pipeline::interim::Interim;
use crate::pipeline::{exchange::Exchange, h2up};
use crate::runtime::io::{read_append_timeout, write_from, write_from_by};
use crate::runtime::stream::Stream;
use crate::upstream::h2pool::H2Endpoint;
use crate::upstream::{EndpointState, UpstreamError};

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// One request of an HTTP/1.1 connection on its way to an upstream.
pub struct H1Forward<'c> {
    pub conn: &'c mut Conn,
    pub head: &'c RequestHead,
    /// Where the body starts in `conn.rbuf` (each try sends it from there).
    pub body_start: usize,
}

impl Downstream for H1Forward<'_> {
    type Done = Next;
    // The rewritten head goes right before the body, and both leave in one write.
    const RESPONSE_HEAD_ROOM: bool = true;
    // A body streams from the socket's buffer, which is not kept.
    const KEEPS_STREAMED_BODY: bool = false;

    fn ex(&mut self) -> &mut Exchange {
        &mut self.conn.ex
    }

    async fn hold_body(&mut self, t: &Try<'_>, n: u64) -> Result<bool, Option<Refusal>> {
        if self.head.body == BodyFraming::Chunked {
            return self.hold_chunked(t, n).await;
        }
        let conn = &mut *self.conn;
        let server = &t.local.snap.config.server;
        let end =
            self.body_start + usize::try_from(n).map_err(|_| Refusal::for_client_body(&TransferError::TooLarge))?;
        if conn.rbuf.len() >= end {
            return Ok(true);
        }
        conn.rbuf.reserve(end - conn.rbuf.len());
        continue_body(conn, self.head, self.body_start, server).await?;
        while conn.rbuf.len() < end {
            read_body(conn, server).await?;
        }
        Ok(true)
    }

    fn body_arrived(&self) -> Option<u64> {
        // (A chunked body's end is known only once it is decoded: `hold_chunked`.)
        match self.head.body {
            BodyFraming::Length(n) => {
                let end = self.body_start.checked_add(usize::try_from(n).ok()?)?;
                (self.conn.rbuf.len() >= end).then_some(n)
            }
            _ => None,
        }
    }

    // A body streamed from an HTTP/1.1 client is not kept (only held whole, before the tries).
    fn body_replayable(&self) -> bool {
        false
    }

    async fn send_h1(
        &mut self,
        t: &Try<'_>,
        up: &mut Stream,
        head: &mut Vec<u8>,
        timer: Pin<&mut Expiry<'_>>,
    ) -> Result<(), UpstreamError> {
        // The head (kept in `head` for a resend when there is no body), then the body streamed
        // from the client.
        self.conn.rpos = self.body_start;
        let server = &t.local.snap.config.server;
        let conn = &mut *self.conn;
        let source = match self.head.body {
            BodyFraming::None => {
                let len = head.len();
                let (res, b) = write_from_by(up, std::mem::take(head), 0, timer).await;
                *head = b;
                head.truncate(len);
                return res.map_err(UpstreamError::Send);
            }
            BodyFraming::Length(n) => Source::Length(n),
            BodyFraming::Chunked => Source::Chunked,
        };
        let left = t.try_deadline.saturating_duration_since(Instant::now());
        if self.head.expect_continue && conn.rbuf.len() == conn.rpos {
            let (res, _) = write_from(&mut conn.stream, CONTINUE.to_vec(), 0, server.timeouts.body_io).await;
            res.map_err(|e| UpstreamError::ClientBody(TransferError::Write(e)))?;
            conn.ex.continued = true;
        }
        let limits = body::Limits {
            max_bytes: server.limits.max_body_bytes,
            read_timeout: server.timeouts.body_io,
            write_timeout: left,
        };
        let mut scratch = t.worker.buffers.take();
        let side = Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos };
        let chunked = source == Source::Chunked;
        // Boxed: requests with a body are the rarer kind, and the transfer's state would
        // otherwise size every request's future.
        let transfer = body::transfer(side, Some(body::Dest::Stream(up)), head, source, chunked, &limits, &mut scratch);
        let result = Box::pin(transfer).await;
        t.worker.buffers.give(scratch);
        match result {
            Ok(n) => {
                t.worker.stats.downstream_bytes_in.add(n);
                conn.ex.bytes_in += n;
                Ok(())
            }
            Err(TransferError::Write(e)) => Err(UpstreamError::Send(e)),
            Err(e) => Err(UpstreamError::ClientBody(e)),
        }
    }

    fn interim(&mut self, t: &Try<'_>) -> Interim<'_> {
        let timeout = t.local.snap.config.server.timeouts.body_io;
        Interim::h1(&mut self.conn.stream, self.head.version_minor, self.conn.ex.continued, timeout)
    }

    async fn try_h2(
        &mut self,
        t: &Try<'_>,
        endpoint: &Rc<H2Endpoint>,
        up: http::Request<()>,
    ) -> Result<Response, UpstreamError> {
        let server = &t.local.snap.config.server;
        self.conn.rpos = self.body_start;
        let no_body = self.head.body == BodyFraming::None;
        let (slot, response, tx) =
            h2up::send_head(t.worker, endpoint, up, no_body, t.try_deadline, t.connect_limit).await?;
        if let Some(mut tx) = tx {
            let conn = &mut *self.conn;
            let source = match self.head.body {
                BodyFraming::Length(n) => Source::Length(n),
                _ => Source::Chunked,
            };
            if self.head.expect_continue && conn.rbuf.len() == conn.rpos {
                let (res, _) = write_from(&mut conn.stream, CONTINUE.to_vec(), 0, server.timeouts.body_io).await;
                res.map_err(|e| UpstreamError::ClientBody(TransferError::Write(e)))?;
                conn.ex.continued = true;
            }
            let left = t.try_deadline.saturating_duration_since(Instant::now());
            let limits = body::Limits {
                max_bytes: server.limits.max_body_bytes,
                read_timeout: server.timeouts.body_io,
                write_timeout: left,
            };
            let mut scratch = t.worker.buffers.take();
            let mut out = Vec::new();
            let side = Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos };
            let result =
                body::transfer(side, Some(Dest::H2(&mut tx, None)), &mut out, source, false, &limits, &mut scratch)
                    .await;
            t.worker.buffers.give(scratch);
            match result {
                Ok(n) => {
                    t.worker.stats.downstream_bytes_in.add(n);
                    conn.ex.bytes_in += n;
                    tx.send_data(Bytes::new(), true).map_err(|e| UpstreamError::Send(io::Error::other(e)))?;
                }
                Err(TransferError::Write(e)) => return Err(UpstreamError::Send(e)),
                Err(e) => {
                    tx.send_reset(h2::Reason::CANCEL);
                    return Err(UpstreamError::ClientBody(e));
                }
            }
        }
        let (minor, continued) = (self.head.version_minor, self.conn.ex.continued);
        let mut interim = Interim::h1(&mut self.conn.stream, minor, continued, server.timeouts.body_io);
        let resp = h2up::response_head(t.worker, response, &mut interim, t.try_deadline).await?;
        Ok(Response::H2(Box::new(H2Response { slot, resp, pump: None })))
    }

    async fn relay(&mut self, t: &Try<'_>, endpoint: &EndpointState, resp: Response) -> Next {
        match resp {
            Response::H1(r) if r.head.status == 101 => {
                let H1Response { up, ubuf, upos, head, scratch } = *r;
                Box::pin(super::tunnel::tunnel(t.worker, self.conn, t.local, up, ubuf, upos, &head, scratch)).await
            }
            Response::H1(r) => relay::from_h1(t, self.conn, self.head, endpoint, r).await,
            Response::H2(r) => {
                let H2Response { slot, resp, pump: _ } = *r;
                let next = Box::pin(relay::from_h2(t, self.conn, self.head, resp)).await;
                drop(slot);
                next
            }
        }
    }

    async fn refuse(&mut self, t: &Try<'_>, refusal: Refusal, keep: bool) -> Next {
        // The connection stays usable only when no request body is left unread on it.
        let keep = keep && self.head.body == BodyFraming::None && self.head.keep_alive && !self.conn.closing();
        let written =
            super::answer::write_refusal(t.worker, self.conn, t.local, &refusal, !keep, t.req.is_head()).await;
        if written && keep {
            Next::KeepAlive
        } else {
            Next::Close
        }
    }

    fn abort(&mut self) -> Next {
        Next::Close
    }
}

impl H1Forward<'_> {
    /// [`Downstream::hold_body`] of a chunked body: read into the connection's buffer (from
    /// `body_start`, where every try decodes it again) until its last chunk and trailers
    /// arrived, or until it takes more than `n` bytes on the wire (not held; what was read
    /// streams first).
    async fn hold_chunked(&mut self, t: &Try<'_>, n: u64) -> Result<bool, Option<Refusal>> {
        let conn = &mut *self.conn;
        let server = &t.local.snap.config.server;
        let limit = usize::try_from(n).unwrap_or(usize::MAX);
        continue_body(conn, self.head, self.body_start, server).await?;
        let mut decoder = ChunkedDecoder::new();
        let mut decoded = Vec::new();
        let mut pos = self.body_start;
        loop {
            decoded.clear();
            let fresh = conn.rbuf.get(pos..).unwrap_or_default();
            let progress =
                decoder.decode(fresh, &mut decoded).map_err(|_| Refusal::for_client_body(&TransferError::Framing))?;
            pos += progress.consumed;
            if progress.done {
                return Ok(true);
            }
            if conn.rbuf.len() - self.body_start >= limit {
                return Ok(false);
            }
            if conn.rbuf.capacity() - conn.rbuf.len() < 1024 {
                conn.rbuf.reserve(4096);
            }
            read_body(conn, server).await?;
        }
    }
}

/// Sends `100 Continue` when the client waits for it before sending its body (none of which
/// has come yet), for a body read before the first try.
async fn continue_body(
    conn: &mut Conn,
    head: &RequestHead,
    body_start: usize,
    server: &gateway_config::Server,
) -> Result<(), Option<Refusal>> {
    if head.expect_continue && conn.rbuf.len() == body_start {
        let (res, _) = write_from(&mut conn.stream, CONTINUE.to_vec(), 0, server.timeouts.body_io).await;
        res.map_err(|e| Refusal::for_client_body(&TransferError::Write(e)))?;
        conn.ex.continued = true;
    }
    Ok(())
}

/// Reads more of a body being held into the connection's buffer; the answer to give when the
/// client fails to send it.
async fn read_body(conn: &mut Conn, server: &gateway_config::Server) -> Result<(), Option<Refusal>> {
    let (res, b) = read_append_timeout(&mut conn.stream, std::mem::take(&mut conn.rbuf), server.timeouts.body_io).await;
    conn.rbuf = b;
    let failed = match res {
        Ok(0) => TransferError::Truncated,
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => TransferError::ReadTimeout,
        Err(e) => TransferError::Read(e),
    };
    Err(Refusal::for_client_body(&failed))
}
