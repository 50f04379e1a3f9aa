//! An HTTP/2 client's side of forwarding: its DATA sent to an HTTP/1.1 upstream (chunked when
//! it has no length) or pumped into an HTTP/2 upstream stream by a task of its own while the
//! response comes back (bidirectional streams, gRPC), with flow control carried end to end
//! (the client's window is given back only as the upstream accepts the bytes, and the response
//! is read from the upstream only as fast as the client's window allows).

use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use gateway_h2::frame::Reason;
use monoio::time::Instant;

use crate::runtime::idle_timer::Expiry;

use super::server::ConnCtx;
use crate::codec::body::{self, Dest, Side, Source, TransferError};
use crate::codec::chunked::{encode_chunk, LAST_CHUNK};
use crate::codec::h1::{self, ResponseFraming, ResponseHead};
use crate::codec::h2io::FlowWatch;
use crate::codec::h2shared::{BodyReader, H2Stream};
use crate::pipeline::answer::Refusal;
use crate::pipeline::exchange::Exchange;
use crate::pipeline::forward::{Downstream, H1Response, H2Response, Response, Try};
use crate::pipeline::h2up;
use crate::pipeline::interim::Interim;
use crate::pipeline::replay::{Keep, PumpEnd, Replay, Signal};
use crate::runtime::io::{write_from, write_from_by};
use crate::runtime::stream::Stream;
use crate::upstream::h2pool::H2Endpoint;
use crate::upstream::{EndpointState, UpstreamError};
use crate::worker::Worker;
use gateway_h2::server::RequestHead;

/// One stream on its way to an upstream.
pub struct H2Forward<'a> {
    pub ctx: &'a ConnCtx,
    pub stream: &'a H2Stream,
    /// The request body read whole (and its trailers), so that every try can send it.
    pub held: Option<(Bytes, Option<http::HeaderMap>)>,
    /// What a failed try had sent of a streamed body (all of it that was taken from the client),
    /// for the next try to send first.
    pub replay: Option<Box<Replay>>,
    pub ex: &'a mut Exchange,
}

impl Downstream for H2Forward<'_> {
    type Done = ();
    // The head is encoded into the connection's write buffer.
    const RESPONSE_HEAD_ROOM: bool = false;
    // Its chunks are kept as they go (`pipeline::replay`).
    const KEEPS_STREAMED_BODY: bool = true;

    fn ex(&mut self) -> &mut Exchange {
        self.ex
    }

    async fn hold_body(&mut self, t: &Try<'_>, n: u64) -> Result<bool, Option<Refusal>> {
        if self.held.is_some() {
            return Ok(true);
        }
        let timeout = t.local.snap.config.server.timeouts.body_io;
        let mut data = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        loop {
            let chunk = match crate::runtime::timeout(timeout, self.stream.data()).await {
                Err(_) => return Err(Refusal::for_client_body(&TransferError::ReadTimeout)),
                Ok(None) => break,
                // The client reset the stream: nobody to answer.
                Ok(Some(Err(_))) => return Err(None),
                Ok(Some(Ok(chunk))) => chunk,
            };
            // The codec holds DATA to the declared content-length; this bounds the buffer
            // whatever it does.
            if data.len() + chunk.len() > usize::try_from(n).unwrap_or(usize::MAX) {
                return Err(Refusal::for_client_body(&TransferError::Framing));
            }
            data.extend_from_slice(&chunk);
            self.stream.release(chunk.len());
        }
        let trailers = self.stream.take_trailers().map(|t| trailer_map(&t));
        let len = data.len() as u64;
        t.worker.stats.downstream_bytes_in.add(len);
        self.ex.bytes_in += len;
        self.held = Some((Bytes::from(data), trailers));
        Ok(true)
    }

    fn body_arrived(&self) -> Option<u64> {
        match &self.held {
            Some((data, _)) => Some(data.len() as u64),
            None => self.stream.arrived(),
        }
    }

    fn body_replayable(&self) -> bool {
        self.held.is_some() || self.replay.is_some()
    }

    async fn send_h1(
        &mut self,
        t: &Try<'_>,
        up: &mut Stream,
        head: &mut Vec<u8>,
        timer: Pin<&mut Expiry<'_>>,
    ) -> Result<(), UpstreamError> {
        let len = head.len();
        // A held body goes out with the head, in one write (a Content-Length body: its
        // trailers, if any, have no place in HTTP/1.1 and are dropped).
        if let Some((data, _)) = &self.held {
            head.extend_from_slice(data);
        }
        let (res, b) = write_from_by(up, std::mem::take(head), 0, timer).await;
        *head = b;
        head.truncate(len);
        res.map_err(UpstreamError::Send)?;
        if self.held.is_none() && t.req.body != crate::request::Body::None {
            let chunked = t.req.body == crate::request::Body::Stream;
            let server = &t.local.snap.config.server;
            // What an earlier try sent goes first; what this one sends is kept for the next
            // (`pipeline::replay`), until the response comes.
            let prefix = self.replay.take();
            let mut keep = Keep::new(keep_limit(t));
            let deadline = t.try_deadline;
            let sent =
                send_body(t.worker, server, self.stream, self.ex, up, chunked, deadline, prefix, &mut keep).await;
            self.replay = keep.into_replay();
            return sent;
        }
        Ok(())
    }

    fn interim(&mut self, _: &Try<'_>) -> Interim<'_> {
        Interim::H2(self.stream)
    }

    async fn try_h2(
        &mut self,
        t: &Try<'_>,
        endpoint: &Rc<H2Endpoint>,
        up: http::Request<()>,
    ) -> Result<Response, UpstreamError> {
        let server = &t.local.snap.config.server;
        if let Some((data, trailers)) = self.held.clone() {
            return Box::pin(self.try_h2_held(t, endpoint, up, data, trailers)).await;
        }
        let no_body = self.replay.as_ref().map_or_else(|| self.stream.is_end_stream(), |r| r.is_empty());
        let (slot, response, tx) =
            h2up::send_head(t.worker, endpoint, up, no_body, t.try_deadline, t.connect_limit).await?;
        // The body (if any) is pumped while the response comes back (a stream both ways), after
        // what an earlier try sent. A copy of what goes out is kept when a retry could use it
        // (see `pipeline::replay`).
        let prefix = self.replay.take();
        let keep = keep_limit(t);
        let pump = tx.map(|tx| {
            let limits = PumpLimits { idle: server.timeouts.body_io, max_bytes: server.limits.max_body_bytes, keep };
            let signal = Rc::new(Signal::default());
            (monoio::spawn(pump(self.stream.body(), tx, prefix, limits, Rc::clone(&signal))), signal)
        });
        let head = h2up::response_head(t.worker, response, &mut Interim::H2(self.stream), t.try_deadline).await;
        match head {
            Ok(resp) => {
                let pump = pump.map(|(pump, signal)| {
                    signal.answered();
                    pump
                });
                Ok(Response::H2(Box::new(H2Response { slot, resp, pump })))
            }
            Err(e) => {
                let Some((pump, signal)) = pump else { return Err(e) };
                // The try failed before its response: the pump stops (resetting the upstream
                // stream) and hands back what it kept of the body for the next try.
                signal.stop();
                let PumpEnd { taken, replay } = pump.await;
                t.worker.stats.downstream_bytes_in.add(taken);
                self.ex.bytes_in += taken;
                self.replay = replay;
                match e {
                    // Refused after the body went out, which was not kept: the request cannot be
                    // sent again.
                    UpstreamError::RefusedStream if self.replay.is_none() => {
                        Err(UpstreamError::Send(std::io::Error::other("stream refused after its body was sent")))
                    }
                    e => Err(e),
                }
            }
        }
    }

    async fn relay(&mut self, t: &Try<'_>, endpoint: &EndpointState, resp: Response) {
        // The response came: what was kept of the body for a retry is not needed any more.
        self.replay = None;
        match resp {
            Response::H1(r) => from_h1(t, self.stream, self.ex, endpoint, r, &self.ctx.flow).await,
            Response::H2(r) => {
                let H2Response { slot, resp, pump } = *r;
                Box::pin(from_h2(t, self.stream, self.ex, resp, pump, &self.ctx.flow)).await;
                drop(slot);
            }
        }
    }

    async fn refuse(&mut self, t: &Try<'_>, refusal: Refusal, _keep: bool) {
        super::stream::reply(t.worker, t.local, self.stream, self.ex, &refusal, t.req.is_head()).await;
    }

    fn abort(&mut self) {
        self.stream.reset(Reason::CANCEL);
    }
}

impl H2Forward<'_> {
    /// [`Downstream::try_h2`] with a held body: sent from memory, so that the request can be
    /// sent again on the next try.
    async fn try_h2_held(
        &mut self,
        t: &Try<'_>,
        endpoint: &Rc<H2Endpoint>,
        up: http::Request<()>,
        data: Bytes,
        trailers: Option<http::HeaderMap>,
    ) -> Result<Response, UpstreamError> {
        let no_body = data.is_empty() && trailers.is_none();
        let (slot, response, tx) =
            h2up::send_head(t.worker, endpoint, up, no_body, t.try_deadline, t.connect_limit).await?;
        if let Some(mut tx) = tx {
            let left = t.try_deadline.saturating_duration_since(Instant::now());
            let sent = crate::runtime::timeout(left, crate::codec::h2io::send_data(&mut tx, data, trailers.is_none()))
                .await
                .map_err(|_| UpstreamError::Timeout)?;
            sent.map_err(|e| UpstreamError::Send(std::io::Error::other(e)))?;
            if let Some(trailers) = trailers {
                tx.send_trailers(trailers).map_err(|e| UpstreamError::Send(std::io::Error::other(e)))?;
            }
        }
        let resp = h2up::response_head(t.worker, response, &mut Interim::H2(self.stream), t.try_deadline).await?;
        Ok(Response::H2(Box::new(H2Response { slot, resp, pump: None })))
    }
}

/// Sends an HTTP/2 upstream's response to the client: the head (connection-specific fields
/// dropped, the gateway's own added), the body and trailers; then waits for the request body's
/// pump.
async fn from_h2(
    t: &Try<'_>,
    stream: &H2Stream,
    ex: &mut Exchange,
    resp: http::Response<h2::RecvStream>,
    pump: Option<monoio::task::JoinHandle<PumpEnd>>,
    flow: &FlowWatch,
) {
    let worker = t.worker;
    let (parts, body) = resp.into_parts();
    ex.status = parts.status.as_u16();
    let end = body.is_end_stream();
    let decor = crate::pipeline::decor::Decor::for_relay(&t.local.snap.config, t, ex);
    let sent = stream.send_head_with(parts.status.as_u16(), end, |w| {
        for (name, value) in &parts.headers {
            let n = name.as_str();
            if !h2up::connection_specific(n) && n != "te" && !decor.replaces(n.as_bytes()) {
                w.field(n.as_bytes(), value.as_bytes());
            }
        }
        decor.push_h2(w);
    });
    match sent {
        Ok(()) if !end => match relay(body, stream, t.action.timeout, flow).await {
            Ok(n) | Err(n) => {
                worker.stats.downstream_bytes_out.add(n);
                ex.bytes_out += n;
            }
        },
        Ok(()) => {}
        Err(e) => tracing::debug!(error = %e, "HTTP/2 response not sent"),
    }
    if let Some(p) = pump {
        let n = p.await.taken;
        worker.stats.downstream_bytes_in.add(n);
        ex.bytes_in += n;
    }
}

/// Copies a response body (and trailers) from the upstream's stream to the client's. Returns
/// the bytes moved; `Err` when it could not be completed: the client's stream is then reset
/// with CANCEL (RFC 9113 §7: the gateway gave up on the stream, because the upstream failed or
/// went idle mid-body, or the client stopped reading; neither is an internal error).
async fn relay(
    mut from: h2::RecvStream,
    to: &H2Stream,
    idle: std::time::Duration,
    watch: &FlowWatch,
) -> Result<u64, u64> {
    let mut total = 0u64;
    loop {
        let data = match crate::runtime::timeout(idle, from.data()).await {
            Ok(Some(Ok(d))) => d,
            Ok(None) => break,
            _ => {
                to.reset(Reason::CANCEL);
                return Err(total);
            }
        };
        let n = data.len();
        total += n as u64;
        let send = to.send_data(&data, false, Some(watch));
        let sent = crate::runtime::timeout(idle, send).await;
        let _ = from.flow_control().release_capacity(n);
        if sent.map_or(true, |r| r.is_err()) {
            to.reset(Reason::CANCEL);
            return Err(total);
        }
    }
    let end = match from.trailers().await {
        Ok(Some(t)) => to.send_trailers_with(|w| {
            for (name, value) in &t {
                if !h2up::connection_specific(name.as_str()) {
                    w.field(name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }),
        Ok(None) => crate::runtime::timeout(idle, to.send_data(&[], true, Some(watch)))
            .await
            .unwrap_or(Err(crate::codec::h2shared::Gone::Closed)),
        Err(_) => {
            to.reset(Reason::CANCEL);
            return Err(total);
        }
    };
    end.map(|_| total).map_err(|_| total)
}

/// The most bytes of a streamed body a try keeps for the next (0 when no retry could use them).
fn keep_limit(t: &Try<'_>) -> u64 {
    let retry = &t.action.retry;
    if retry.num_retries > 0 && !retry.retry_on.is_empty() {
        retry.max_replay_bytes
    } else {
        0
    }
}

/// What bounds a request body's pump.
struct PumpLimits {
    /// Longest wait for the client's next bytes, or for the upstream to take some.
    idle: std::time::Duration,
    /// The body's most bytes (`server.limits.max_body_bytes`).
    max_bytes: u64,
    /// The most bytes kept for a replay (0: none).
    keep: u64,
}

/// Copies a request body from a client's HTTP/2 stream to the upstream's, with trailers, after
/// `prefix` (what an earlier try sent: sent again first); the client's window is given back as
/// the upstream takes the bytes. Keeps what it sends within `limits.keep`, for the next try should
/// this one fail, until the response came. Ends (resetting the upstream stream) when `signal`
/// says so or the client's stream fails; it just returns when the upstream's fails.
async fn pump(
    from: BodyReader,
    mut to: h2::SendStream<Bytes>,
    prefix: Option<Box<Replay>>,
    limits: PumpLimits,
    signal: Rc<Signal>,
) -> PumpEnd {
    let mut keep = Keep::new(limits.keep);
    let mut taken = 0u64;
    let mut total = 0u64;
    // `Some(trailers)` once the body ended.
    let mut ended = None;
    if let Some(p) = prefix {
        keep.keep_all(&p);
        total = p.bytes;
        for chunk in p.chunks {
            if !send_chunk(&signal, &mut to, chunk, limits.idle).await {
                return PumpEnd { taken, replay: keep.into_replay() };
            }
        }
        if p.complete {
            ended = Some(p.trailers);
        }
    }
    let trailers = loop {
        if let Some(trailers) = ended {
            break trailers;
        }
        let data = match signal.or(crate::runtime::timeout(limits.idle, from.data())).await {
            Some(Ok(Some(Ok(d)))) => d,
            Some(Ok(None)) => {
                ended = Some(from.take_trailers());
                continue;
            }
            // The client's stream failed or went idle: nothing to send again.
            Some(_) => {
                to.send_reset(h2::Reason::CANCEL);
                return PumpEnd { taken, replay: None };
            }
            None => {
                to.send_reset(h2::Reason::CANCEL);
                return PumpEnd { taken, replay: keep.into_replay() };
            }
        };
        let n = data.len();
        taken += n as u64;
        total += n as u64;
        if signal.is_answered() {
            keep.drop_copy();
        }
        if total > limits.max_bytes {
            to.send_reset(h2::Reason::CANCEL);
            return PumpEnd { taken, replay: None };
        }
        keep.push(&data);
        let sent = send_chunk(&signal, &mut to, data, limits.idle).await;
        // Sent, or kept for the next try, or dropped with the request: no longer the client's.
        from.release(n);
        if !sent {
            return PumpEnd { taken, replay: keep.into_replay() };
        }
    };
    keep.end(trailers.as_ref());
    match trailers {
        Some(t) => {
            let _ = to.send_trailers(trailer_map(&t));
        }
        None => {
            let _ = to.send_data(Bytes::new(), true);
        }
    }
    PumpEnd { taken, replay: keep.into_replay() }
}

/// Sends one chunk of a pumped body; false when the pump must end: the upstream's stream failed
/// or took nothing for `idle`, or the try stopped the pump (the stream is then reset).
async fn send_chunk(signal: &Signal, to: &mut h2::SendStream<Bytes>, chunk: Bytes, idle: std::time::Duration) -> bool {
    match signal.or(crate::runtime::timeout(idle, crate::codec::h2io::send_data(to, chunk, false))).await {
        Some(Ok(Ok(()))) => true,
        Some(_) => false,
        None => {
            to.send_reset(h2::Reason::CANCEL);
            false
        }
    }
}

/// A client's trailers as a header map (for an HTTP/2 upstream).
fn trailer_map(head: &RequestHead) -> http::HeaderMap {
    let mut map = http::HeaderMap::with_capacity(head.fields.len());
    for (name, value) in head.iter() {
        if let (Ok(n), Ok(v)) = (http::HeaderName::from_bytes(name), http::HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    map
}

/// Connection-specific fields (RFC 9110 §7.6.1) never forwarded to an HTTP/1.1 upstream.
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" | b"te" | b"trailer"
    )
}

/// Streams the client's DATA to the upstream, after `prefix` (what an earlier try sent), giving
/// window back only once the upstream took the bytes, and keeping what goes out in `keep`.
/// Client trailers go into the last chunk when the body is chunked.
#[allow(clippy::too_many_arguments)]
async fn send_body(
    worker: &Worker,
    server: &gateway_config::Server,
    body: &H2Stream,
    ex: &mut Exchange,
    up: &mut Stream,
    chunked: bool,
    deadline: Instant,
    prefix: Option<Box<Replay>>,
    keep: &mut Keep,
) -> Result<(), UpstreamError> {
    let mut out = worker.buffers.take();
    // Bytes taken from the client by this try, and before it.
    let mut total: u64 = 0;
    let mut before: u64 = 0;
    // `Some(trailers)` when the prefix is the whole body.
    let mut ended = None;
    let io = server.timeouts.body_io;
    let mut result = Ok(());
    if let Some(p) = prefix {
        keep.keep_all(&p);
        before = p.bytes;
        for chunk in &p.chunks {
            result = write_piece(up, &mut out, chunk, chunked, deadline, io).await;
            if result.is_err() {
                break;
            }
        }
        if p.complete {
            ended = Some(p.trailers);
        }
    }
    let result = if result.is_err() || ended.is_some() {
        result
    } else {
        loop {
            let next = crate::runtime::timeout(server.timeouts.body_io, body.data()).await;
            let data = match next {
                Err(_) => break Err(UpstreamError::ClientBody(TransferError::ReadTimeout)),
                Ok(None) => break Ok(()),
                Ok(Some(Err(e))) => {
                    break Err(UpstreamError::ClientBody(TransferError::Read(std::io::Error::other(e))))
                }
                Ok(Some(Ok(d))) => d,
            };
            total += data.len() as u64;
            if before + total > server.limits.max_body_bytes {
                break Err(UpstreamError::ClientBody(TransferError::TooLarge));
            }
            keep.push(&data);
            let written = write_piece(up, &mut out, &data, chunked, deadline, io).await;
            // The client may send more only once the upstream took these bytes (or they are
            // kept for the next try, or dropped with the request).
            body.release(data.len());
            if written.is_err() {
                break written;
            }
        }
    };
    let trailers = match ended {
        Some(t) => t,
        None if result.is_ok() => {
            let t = body.take_trailers();
            keep.end(t.as_ref());
            t
        }
        None => None,
    };
    if result.is_ok() && chunked {
        out.clear();
        match trailers {
            Some(trailers) => {
                out.extend_from_slice(b"0\r\n");
                for (name, value) in trailers.iter() {
                    if connection_specific(name) || name == b"content-length" {
                        continue;
                    }
                    out.extend_from_slice(name);
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
            None => out.extend_from_slice(LAST_CHUNK),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let (res, b) = write_from(up, std::mem::take(&mut out), 0, left).await;
        out = b;
        if let Err(e) = res {
            worker.buffers.give(out);
            return Err(UpstreamError::Send(e));
        }
    }
    worker.buffers.give(out);
    worker.stats.downstream_bytes_in.add(total);
    ex.bytes_in += total;
    result
}

/// Writes one piece of a request body to an HTTP/1.1 upstream (as a chunk when `chunked`),
/// within the try's `deadline` and `io`.
async fn write_piece(
    up: &mut Stream,
    out: &mut Vec<u8>,
    data: &[u8],
    chunked: bool,
    deadline: Instant,
    io: std::time::Duration,
) -> Result<(), UpstreamError> {
    out.clear();
    if chunked {
        encode_chunk(data, out);
    } else {
        out.extend_from_slice(data);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let (res, b) = write_from(up, std::mem::take(out), 0, left.min(io)).await;
    *out = b;
    res.map_err(UpstreamError::Send)
}

/// Sends the response head to the client and streams the body; pools the upstream
/// connection when the exchange ended cleanly.
#[allow(clippy::too_many_arguments)]
async fn from_h1(
    t: &Try<'_>,
    stream: &H2Stream,
    ex: &mut Exchange,
    endpoint: &EndpointState,
    mut r: Box<H1Response>,
    flow: &FlowWatch,
) {
    // `r` is used in place, in its box, not moved into this function's state (see `Response`).
    let (worker, local, action, is_head) = (t.worker, t.local, t.action, t.req.is_head());
    let server = &local.snap.config.server;
    let source = match r.head.framing {
        ResponseFraming::None => None,
        ResponseFraming::Length(0) => None,
        ResponseFraming::Length(n) => Some(Source::Length(n)),
        ResponseFraming::Chunked => Some(Source::Chunked),
        ResponseFraming::UntilClose => Some(Source::UntilClose),
    };
    ex.status = r.head.status;
    let decor = crate::pipeline::decor::Decor::for_relay(&local.snap.config, t, ex);
    let sent = {
        let buf = r.ubuf.get(r.upos..).unwrap_or_default();
        stream.send_head_with(r.head.status, source.is_none() || is_head, |w| {
            response_head(w, buf, &r.head, &r.scratch, &decor);
        })
    };
    worker.give_scratch(r.scratch);
    r.upos += r.head.head_len;
    if sent.is_err() {
        worker.buffers.give_response(r.ubuf);
        return;
    }
    let ok = match source {
        None => true,
        Some(_) if is_head => true,
        // The whole body came with the head (a small answer): sent at once, ending the stream
        // with its last DATA frame rather than an empty one after it.
        Some(Source::Length(n)) if r.ubuf.len().saturating_sub(r.upos) as u64 >= n => {
            let body = r.ubuf.get(r.upos..r.upos + n as usize).unwrap_or_default();
            let sent = stream.send_data(body, true, Some(flow));
            r.upos += body.len();
            let sent = worker.idle_timer.within(server.timeouts.body_io, sent).await.is_some_and(|res| res.is_ok());
            if sent {
                worker.stats.downstream_bytes_out.add(n);
                ex.bytes_out += n;
            } else {
                stream.reset(Reason::CANCEL);
            }
            sent
        }
        Some(source) => {
            let limits = body::Limits {
                max_bytes: u64::MAX,
                read_timeout: action.timeout,
                write_timeout: server.timeouts.body_io,
            };
            let mut scratch = worker.buffers.take();
            let mut out = Vec::new();
            let side = Side { stream: &mut r.up.stream, buf: &mut r.ubuf, pos: &mut r.upos };
            let result = body::transfer(
                side,
                Some(Dest::H2Native(stream, Some(flow))),
                &mut out,
                source,
                false,
                &limits,
                &mut scratch,
            )
            .await;
            worker.buffers.give(scratch);
            match result {
                Ok(n) => {
                    worker.stats.downstream_bytes_out.add(n);
                    ex.bytes_out += n;
                    let end = stream.send_data(&[], true, Some(flow));
                    worker.idle_timer.within(server.timeouts.body_io, end).await.is_some_and(|res| res.is_ok())
                }
                Err(e) => {
                    if matches!(e, TransferError::Framing | TransferError::Truncated) {
                        worker.stats.upstream_protocol_errors.inc();
                    }
                    tracing::debug!(upstream = %endpoint.address, error = ?e, "response body relay failed (HTTP/2 client)");
                    // CANCEL (RFC 9113 §7): the gateway gave up on the stream, because the
                    // client stopped reading (a write timeout: zero-window stall) or the upstream
                    // failed mid-body. Neither is an internal error of the gateway.
                    stream.reset(Reason::CANCEL);
                    false
                }
            }
        }
    };
    let reusable = ok && r.head.keep_alive && r.upos == r.ubuf.len() && source != Some(Source::UntilClose);
    worker.buffers.give_response(r.ubuf);
    if reusable {
        endpoint.pool.put(r.up, &worker.buffers, &worker.armed);
    }
}

/// The HTTP/2 response head's fields for an HTTP/1.1 upstream response: end-to-end fields
/// (connection-specific ones, and those the Connection field names, are dropped; the gateway's
/// own replace the upstream's), the length the answer is framed by.
fn response_head(
    w: &mut gateway_h2::server::HeadWriter<'_>,
    buf: &[u8],
    resp: &ResponseHead,
    scratch: &h1::HeadScratch,
    decor: &crate::pipeline::decor::Decor<'_>,
) {
    for h in scratch.headers() {
        let name = h.name(buf);
        // The length the answer is framed by goes in below, once.
        if h1::is_hop_by_hop(name, buf, scratch) || h1::eq_lower(name, b"content-length") || decor.replaces(name) {
            continue;
        }
        w.field(name, h.value(buf));
    }
    if let ResponseFraming::Length(n) = resp.framing {
        let mut digits = [0u8; 20];
        w.field(b"content-length", crate::codec::response::num(&mut digits, n));
    }
    decor.push_h2(w);
}
