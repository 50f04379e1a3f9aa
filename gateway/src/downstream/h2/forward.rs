//! An HTTP/2 client's side of forwarding: its DATA sent to an HTTP/1.1 upstream (chunked when
//! it has no length) or pumped into an HTTP/2 upstream stream by a task of its own while the
//! response comes back (bidirectional streams, gRPC), with flow control carried end to end
//! (the client's window is given back only as the upstream accepts the bytes, and the response
//! is read from the upstream only as fast as the client's window allows).

use std::rc::Rc;

use bytes::Bytes;
use monoio::time::Instant;

use super::server::ConnCtx;
use crate::codec::body::{self, Dest, Side, Source, TransferError};
use crate::codec::chunked::{encode_chunk, LAST_CHUNK};
use crate::codec::h1::{self, HeadScratch, ResponseFraming, ResponseHead};
use crate::codec::h2io::FlowWatch;
use crate::pipeline::answer::Refusal;
use crate::pipeline::exchange::Exchange;
use crate::pipeline::forward::{Downstream, Response, Try};
use crate::pipeline::h2up;
use crate::pipeline::interim::Interim;
use crate::runtime::io::write_from;
use crate::runtime::stream::Stream;
use crate::upstream::h2pool::H2Endpoint;
use crate::upstream::{EndpointState, UpConn, UpstreamError};
use crate::worker::Worker;

/// One stream on its way to an upstream.
pub struct H2Forward<'a> {
    pub ctx: &'a ConnCtx,
    pub respond: &'a mut h2::server::SendResponse<Bytes>,
    /// The request body, until a pump took it or it was held whole.
    pub body: Option<h2::RecvStream>,
    /// The request body read whole (and its trailers), so that every try can send it.
    pub held: Option<(Bytes, Option<http::HeaderMap>)>,
    pub ex: &'a mut Exchange,
}

impl Downstream for H2Forward<'_> {
    type Done = ();

    fn ex(&mut self) -> &mut Exchange {
        self.ex
    }

    async fn hold_body(&mut self, t: &Try<'_>, n: u64) -> Result<bool, Option<Refusal>> {
        let Some(mut body) = self.body.take() else { return Ok(false) };
        let timeout = t.local.snap.config.server.timeouts.body_io;
        let mut data = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        loop {
            let chunk = match monoio::time::timeout(timeout, body.data()).await {
                Err(_) => return Err(Refusal::for_client_body(&TransferError::ReadTimeout)),
                Ok(None) => break,
                // The client reset the stream: nobody to answer.
                Ok(Some(Err(_))) => return Err(None),
                Ok(Some(Ok(chunk))) => chunk,
            };
            // The h2 crate holds DATA to the declared content-length; this bounds the buffer
            // whatever it does.
            if data.len() + chunk.len() > usize::try_from(n).unwrap_or(usize::MAX) {
                return Err(Refusal::for_client_body(&TransferError::Framing));
            }
            data.extend_from_slice(&chunk);
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = match monoio::time::timeout(timeout, body.trailers()).await {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => return Err(None),
            Err(_) => return Err(Refusal::for_client_body(&TransferError::ReadTimeout)),
        };
        let len = data.len() as u64;
        t.worker.stats.downstream_bytes_in.add(len);
        self.ex.bytes_in += len;
        self.held = Some((Bytes::from(data), trailers));
        Ok(true)
    }

    async fn send_h1(&mut self, t: &Try<'_>, up: &mut Stream, head: &mut Vec<u8>) -> Result<(), UpstreamError> {
        let left = t.try_deadline.saturating_duration_since(Instant::now());
        let len = head.len();
        // A held body goes out with the head, in one write (a Content-Length body: its
        // trailers, if any, have no place in HTTP/1.1 and are dropped).
        if let Some((data, _)) = &self.held {
            head.extend_from_slice(data);
        }
        let (res, b) = write_from(up, std::mem::take(head), 0, left).await;
        *head = b;
        head.truncate(len);
        res.map_err(UpstreamError::Send)?;
        match self.body.as_mut() {
            Some(body) if t.req.body != crate::request::Body::None => {
                let chunked = t.req.body == crate::request::Body::Stream;
                let server = &t.local.snap.config.server;
                send_body(t.worker, server, body, self.ex, up, chunked, t.try_deadline).await
            }
            _ => Ok(()),
        }
    }

    fn interim(&mut self, _: &Try<'_>) -> Interim<'_> {
        Interim::H2(self.respond)
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
        let no_body = self.body.as_ref().is_none_or(h2::RecvStream::is_end_stream);
        let (slot, response, tx) = h2up::send_head(t.worker, endpoint, up, no_body, t.try_deadline).await?;
        // The body (if any) is pumped by its own task; a bodyless request is kept, so that a
        // stream the upstream refused (not processed, RFC 9113 §8.7) can be sent again.
        let pump = match (tx, self.body.take()) {
            (Some(tx), Some(body)) => {
                let pump = h2up::pump(body, tx, server.timeouts.body_io, server.limits.max_body_bytes);
                Some(monoio::spawn(pump))
            }
            (_, body) => {
                self.body = body;
                None
            }
        };
        let head = h2up::response_head(t.worker, response, &mut Interim::H2(self.respond), t.try_deadline).await;
        match head {
            Ok(resp) => Ok(Response::H2 { slot, resp, pump }),
            // Refused after the body went out: it is gone, the request cannot be sent again.
            Err(UpstreamError::RefusedStream) if pump.is_some() => {
                Err(UpstreamError::Send(std::io::Error::other("stream refused after its body was sent")))
            }
            Err(e) => Err(e),
        }
    }

    async fn relay(&mut self, t: &Try<'_>, endpoint: &EndpointState, resp: Response) {
        match resp {
            Response::H1 { up, ubuf, upos, head, scratch } => {
                let flow = &self.ctx.flow;
                from_h1(t, self.respond, self.ex, endpoint, up, ubuf, upos, head, scratch, flow).await;
            }
            Response::H2 { slot, resp, pump } => {
                Box::pin(from_h2(t, self.respond, self.ex, resp, pump, &self.ctx.flow)).await;
                drop(slot);
            }
        }
    }

    async fn refuse(&mut self, t: &Try<'_>, refusal: Refusal, _keep: bool) {
        super::stream::reply(t.worker, t.local, self.respond, self.ex, &refusal, t.req.is_head());
    }

    fn abort(&mut self) {
        self.respond.send_reset(h2::Reason::CANCEL);
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
        let (slot, response, tx) = h2up::send_head(t.worker, endpoint, up, no_body, t.try_deadline).await?;
        if let Some(mut tx) = tx {
            let left = t.try_deadline.saturating_duration_since(Instant::now());
            let sent = monoio::time::timeout(left, crate::codec::h2io::send_data(&mut tx, data, trailers.is_none()))
                .await
                .map_err(|_| UpstreamError::Timeout)?;
            sent.map_err(|e| UpstreamError::Send(std::io::Error::other(e)))?;
            if let Some(trailers) = trailers {
                tx.send_trailers(trailers).map_err(|e| UpstreamError::Send(std::io::Error::other(e)))?;
            }
        }
        let resp = h2up::response_head(t.worker, response, &mut Interim::H2(self.respond), t.try_deadline).await?;
        Ok(Response::H2 { slot, resp, pump: None })
    }
}

/// Sends an HTTP/2 upstream's response to the client: the head (connection-specific fields
/// dropped, the gateway's own added), the body and trailers; then waits for the request body's
/// pump.
async fn from_h2(
    t: &Try<'_>,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    resp: http::Response<h2::RecvStream>,
    pump: Option<monoio::task::JoinHandle<u64>>,
    flow: &FlowWatch,
) {
    let worker = t.worker;
    let (parts, body) = resp.into_parts();
    ex.status = parts.status.as_u16();
    let end = body.is_end_stream();
    let mut head = h2up::client_head(&parts);
    crate::pipeline::decor::Decor::for_relay(&t.local.snap.config, t, ex).apply_h2(head.headers_mut());
    match respond.send_response(head, end) {
        Ok(mut tx) if !end => match h2up::relay(body, &mut tx, t.action.timeout, flow).await {
            Ok(n) | Err(n) => {
                worker.stats.downstream_bytes_out.add(n);
                ex.bytes_out += n;
            }
        },
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "HTTP/2 response not sent"),
    }
    if let Some(p) = pump {
        let n = p.await;
        worker.stats.downstream_bytes_in.add(n);
        ex.bytes_in += n;
    }
}

/// Connection-specific fields (RFC 9110 §7.6.1) never forwarded to an HTTP/1.1 upstream, nor
/// back to an HTTP/2 client.
fn connection_specific(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "te" | "trailer"
    )
}

/// Streams the client's DATA to the upstream, giving window back only once the upstream took
/// the bytes. Client trailers go into the last chunk when the body is chunked.
async fn send_body(
    worker: &Worker,
    server: &gateway_config::Server,
    body: &mut h2::RecvStream,
    ex: &mut Exchange,
    up: &mut Stream,
    chunked: bool,
    deadline: Instant,
) -> Result<(), UpstreamError> {
    let mut out = worker.buffers.take();
    let mut total: u64 = 0;
    let result = loop {
        let next = monoio::time::timeout(server.timeouts.body_io, body.data()).await;
        let data = match next {
            Err(_) => break Err(UpstreamError::ClientBody(TransferError::ReadTimeout)),
            Ok(None) => break Ok(()),
            Ok(Some(Err(e))) => break Err(UpstreamError::ClientBody(TransferError::Read(std::io::Error::other(e)))),
            Ok(Some(Ok(d))) => d,
        };
        total += data.len() as u64;
        if total > server.limits.max_body_bytes {
            break Err(UpstreamError::ClientBody(TransferError::TooLarge));
        }
        out.clear();
        if chunked {
            encode_chunk(&data, &mut out);
        } else {
            out.extend_from_slice(&data);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let (res, b) = write_from(up, std::mem::take(&mut out), 0, left.min(server.timeouts.body_io)).await;
        out = b;
        if let Err(e) = res {
            break Err(UpstreamError::Send(e));
        }
        // The client may send more only once the upstream took these bytes.
        let _ = body.flow_control().release_capacity(data.len());
    };
    if result.is_ok() && chunked {
        out.clear();
        match body.trailers().await {
            Ok(Some(trailers)) => {
                out.extend_from_slice(b"0\r\n");
                for (name, value) in &trailers {
                    if connection_specific(name.as_str()) || name == "content-length" {
                        continue;
                    }
                    out.extend_from_slice(name.as_str().as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
            _ => out.extend_from_slice(LAST_CHUNK),
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

/// Sends the response head to the client and streams the body; pools the upstream
/// connection when the exchange ended cleanly.
#[allow(clippy::too_many_arguments)]
async fn from_h1(
    t: &Try<'_>,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    endpoint: &EndpointState,
    mut up: UpConn,
    mut ubuf: Vec<u8>,
    mut upos: usize,
    resp: ResponseHead,
    scratch: HeadScratch,
    flow: &FlowWatch,
) {
    let (worker, local, action, is_head) = (t.worker, t.local, t.action, t.req.is_head());
    let server = &local.snap.config.server;
    let mut response = response_head(ubuf.get(upos..).unwrap_or_default(), &resp, &scratch);
    worker.give_scratch(scratch);
    crate::pipeline::decor::Decor::for_relay(&local.snap.config, t, ex).apply_h2(response.headers_mut());
    upos += resp.head_len;
    let source = match resp.framing {
        ResponseFraming::None => None,
        ResponseFraming::Length(0) => None,
        ResponseFraming::Length(n) => Some(Source::Length(n)),
        ResponseFraming::Chunked => Some(Source::Chunked),
        ResponseFraming::UntilClose => Some(Source::UntilClose),
    };
    ex.status = resp.status;
    let Ok(mut tx) = respond.send_response(response, source.is_none() || is_head) else {
        worker.buffers.give(ubuf);
        return;
    };
    let ok = match source {
        None => true,
        Some(_) if is_head => true,
        Some(source) => {
            let limits = body::Limits {
                max_bytes: u64::MAX,
                read_timeout: action.timeout,
                write_timeout: server.timeouts.body_io,
            };
            let mut scratch = worker.buffers.take();
            let mut out = Vec::new();
            let side = Side { stream: &mut up.stream, buf: &mut ubuf, pos: &mut upos };
            let result = body::transfer(
                side,
                Some(Dest::H2(&mut tx, Some(flow))),
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
                    tx.send_data(Bytes::new(), true).is_ok()
                }
                Err(e) => {
                    if matches!(e, TransferError::Framing | TransferError::Truncated) {
                        worker.stats.upstream_protocol_errors.inc();
                    }
                    tracing::debug!(upstream = %endpoint.address, error = ?e, "response body relay failed (HTTP/2 client)");
                    // CANCEL (RFC 9113 §7): the gateway gave up on the stream, because the
                    // client stopped reading (a write timeout: zero-window stall) or the upstream
                    // failed mid-body. Neither is an internal error of the gateway.
                    tx.send_reset(h2::Reason::CANCEL);
                    false
                }
            }
        }
    };
    let reusable = ok && resp.keep_alive && upos == ubuf.len() && source != Some(Source::UntilClose);
    worker.buffers.give(ubuf);
    if reusable {
        endpoint.pool.put(up);
    }
}

/// The HTTP/2 response head for an HTTP/1.1 upstream response: status and end-to-end fields
/// (connection-specific ones, and those the Connection field names, are dropped).
fn response_head(buf: &[u8], resp: &ResponseHead, scratch: &h1::HeadScratch) -> http::Response<()> {
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(resp.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    for h in scratch.headers() {
        let name = h.name(buf);
        // The length the answer is framed by goes in below, once.
        if h1::is_hop_by_hop(name, buf, scratch) || name.eq_ignore_ascii_case(b"content-length") {
            continue;
        }
        let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(name), http::HeaderValue::from_bytes(h.value(buf)))
        else {
            continue;
        };
        headers.append(name, value);
    }
    if let ResponseFraming::Length(n) = resp.framing {
        headers.append(http::header::CONTENT_LENGTH, http::HeaderValue::from(n));
    }
    response
}
