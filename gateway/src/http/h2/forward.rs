//! Forwarding an HTTP/2 stream to an HTTP/1.1 upstream: the head is rewritten as HTTP/1.1,
//! the body streamed both ways with bounded buffers, and flow control carried end to end (the
//! client's window is given back only as the upstream accepts the bytes, and the response is
//! read from the upstream only as fast as the client's window allows).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use gateway_config::ProxyAction;
use monoio::time::Instant;

use super::server::ConnCtx;
use crate::admission::limiter::Permit;
use crate::http::body::{self, Dest, Side, Source, TransferError};
use crate::http::chunked::{encode_chunk, LAST_CHUNK};
use crate::http::exchange::Exchange;
use crate::http::h1::{self, ResponseFraming, ResponseHead};
use crate::http::response::push_num;
use crate::proxy::interim::Interim;
use crate::proxy::retry::{Failure, Retries};
use crate::proxy::{acquire, failure_status, read_response_head_pooled, retry_failure, retry_if_stale, UpstreamError};
use crate::runtime::io::write_from;
use crate::runtime::worker::{Local, Worker};
use crate::upstream::h2io::FlowWatch;
use crate::upstream::{EndpointState, Outcome, PickHints, UpConn};

pub struct Request<'a> {
    pub ctx: &'a ConnCtx,
    pub parts: &'a http::request::Parts,
    pub authority: &'a str,
    pub body: h2::RecvStream,
}

/// Connection-specific fields (RFC 9110 §7.6.1) never forwarded to an HTTP/1.1 upstream, nor
/// back to an HTTP/2 client.
fn connection_specific(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "te" | "trailer"
    )
}

/// Forwards one stream to the route's cluster; failed tries are retried under the route's
/// retry policy (each on another endpoint where one exists) while nothing was answered.
#[allow(clippy::too_many_arguments)]
pub async fn forward(
    worker: &Rc<Worker>,
    local: &Rc<Local>,
    req: Request<'_>,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    action: &ProxyAction,
    mut permit: Permit,
    deadline: std::time::Instant,
) {
    let deadline = Instant::from_std(deadline);
    let server = &local.snap.config.server;
    let is_head = req.parts.method == http::Method::HEAD;
    ex.cluster = Some(action.cluster);
    let Some(cluster) = local.clusters.get(action.cluster).cloned() else {
        super::stream::reply(worker, local, respond, ex, 503, &[], is_head);
        return;
    };
    cluster.note_request();
    let hash = crate::upstream::hashkey::h2(req.parts, &req.ctx.peer_ip, &cluster).hash;
    let method = req.parts.method.as_str().as_bytes();
    // A streamed body is not kept: a try that sent (part of) it is not retried.
    let no_body = req.body.is_end_stream();
    crate::proxy::mirror::start(worker, local, ex.route, method, no_body, |out| {
        write_head(out, local, &req, &ex.request_id);
    });
    let mut retries = Retries::new(&action.retry, is_idempotent(&req.parts.method), no_body);
    let propagate = (ex.deadline.grpc, server.deadline_header.as_deref());
    let mut req = req;
    // The HTTP/1.1 head (without its final CRLF), built on the first HTTP/1.1 try.
    let mut h1_head: Option<(Vec<u8>, bool, usize)> = None;
    let mut avoid = None;
    worker.stats.upstream_requests_active.inc();
    permit.start();
    let sent_at = Instant::now();
    loop {
        let Some(inflight) = cluster.pick_with(&worker.rng, PickHints { hash, avoid }) else {
            super::stream::reply(worker, local, respond, ex, 503, &crate::upstream::no_healthy_upstream(), is_head);
            break;
        };
        let Some(endpoint) = inflight.endpoint() else {
            super::stream::reply(worker, local, respond, ex, 503, &[], is_head);
            break;
        };
        ex.upstream = Some(endpoint.address);
        let try_deadline = retries.try_deadline(deadline);
        if let Some(h2ep) = endpoint.h2().cloned() {
            // Boxed: the HTTP/2 upstream path is large, and every stream would carry its size.
            let outcome =
                Box::pin(to_h2(worker, local, req, respond, ex, action, &h2ep, try_deadline, deadline, sent_at)).await;
            match outcome {
                H2Outcome::Done(status) => {
                    inflight.record(status.map_or(Outcome::Reset, Outcome::Response));
                    if status.is_some_and(|s| s < 500) {
                        permit.success();
                    }
                    break;
                }
                H2Outcome::Http1(back) => {
                    endpoint.speaks_http1.set(true);
                    req = back;
                }
                H2Outcome::Failed(e, back) => {
                    req = back;
                    if let Some(o) = e.outcome() {
                        inflight.record(o);
                    }
                    if let Some(failure) = retry_failure(&e) {
                        if retries.allow(worker, &cluster, failure, deadline) {
                            avoid = Some(inflight.index());
                            drop(inflight);
                            if retries.backoff(worker, deadline).await {
                                continue;
                            }
                            super::stream::reply(worker, local, respond, ex, 504, &[], is_head);
                            break;
                        }
                    }
                    fail(worker, local, respond, ex, action, e, is_head);
                    break;
                }
            }
        }
        let (wbuf, chunked, head_base) = h1_head.get_or_insert_with(|| {
            let mut b = worker.buffers.take();
            let chunked = write_head(&mut b, local, &req, &ex.request_id);
            let base = b.len().saturating_sub(2);
            (b, chunked, base)
        });
        wbuf.truncate(*head_base);
        if propagate.0 || propagate.1.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            crate::http::deadline::push_h1_lines(wbuf, propagate.0, propagate.1, left);
        }
        wbuf.extend_from_slice(b"\r\n");
        let chunked = *chunked;
        let result =
            exchange(worker, local, &mut req, respond, ex, action, endpoint, wbuf, chunked, try_deadline).await;
        let failure = match &result {
            Ok((_, ubuf, upos, resp)) => {
                inflight.record(Outcome::Response(resp.status));
                (resp.status >= 500).then(|| Failure::Status {
                    status: resp.status,
                    shed: crate::proxy::is_shed_head(
                        worker,
                        server,
                        ubuf.get(*upos..).unwrap_or_default(),
                        resp.status,
                    ),
                })
            }
            Err(e) => {
                if let Some(o) = e.outcome() {
                    inflight.record(o);
                }
                retry_failure(e)
            }
        };
        if let Some(failure) = failure {
            if retries.allow(worker, &cluster, failure, deadline) {
                avoid = Some(inflight.index());
                drop(inflight);
                if let Ok((up, ubuf, _, _)) = result {
                    drop(up);
                    worker.buffers.give(ubuf);
                }
                if retries.backoff(worker, deadline).await {
                    continue;
                }
                super::stream::reply(worker, local, respond, ex, 504, &[], is_head);
                break;
            }
        }
        ex.upstream_elapsed = Some(sent_at.elapsed());
        if let Ok((_, _, _, resp)) = &result {
            if resp.status < 500 {
                permit.success();
            }
        }
        match result {
            Ok((up, ubuf, upos, resp)) => {
                let flow = &req.ctx.flow;
                relay_response(worker, local, respond, ex, action, endpoint, up, ubuf, upos, resp, is_head, flow).await;
            }
            Err(e) => fail(worker, local, respond, ex, action, e, is_head),
        }
        break;
    }
    if let Some((wbuf, _, _)) = h1_head {
        worker.buffers.give(wbuf);
    }
    worker.stats.upstream_requests_active.sub(1);
    drop(permit);
}

/// How an attempt on an HTTP/2 upstream ended.
enum H2Outcome<'a> {
    /// Answered (with the upstream's status, if one arrived).
    Done(Option<u16>),
    /// The endpoint chose HTTP/1.1 by ALPN before anything was sent: the request goes that way.
    Http1(Request<'a>),
    /// Nothing was sent (no connection, or no stream): the caller answers or retries.
    Failed(UpstreamError, Request<'a>),
}

/// Forwards to an HTTP/2 upstream: the request body is pumped by a task of its own while the
/// response comes back, so bidirectional streams (gRPC) work; trailers pass both ways.
/// Returns the upstream's status, if one arrived.
#[allow(clippy::too_many_arguments)]
async fn to_h2<'a>(
    worker: &Rc<Worker>,
    local: &Rc<Local>,
    req: Request<'a>,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    action: &ProxyAction,
    h2ep: &Rc<crate::upstream::h2pool::H2Endpoint>,
    try_deadline: Instant,
    deadline: Instant,
    sent_at: Instant,
) -> H2Outcome<'a> {
    use crate::proxy::h2up;
    let server = &local.snap.config.server;
    let is_head = req.parts.method == http::Method::HEAD;
    let mut up = http::Request::new(());
    *up.method_mut() = req.parts.method.clone();
    let scheme = if matches!(local.clusters.get(action.cluster).map(|c| c.tls.is_some()), Some(true)) {
        "https"
    } else {
        "http"
    };
    let target = req.parts.uri.path_and_query().map_or("/", |p| p.as_str());
    *up.uri_mut() = match http::Uri::try_from(format!("{scheme}://{}{target}", req.authority)) {
        Ok(u) => u,
        Err(_) => {
            super::stream::reply(worker, local, respond, ex, 400, &[], is_head);
            return H2Outcome::Done(None);
        }
    };
    let identity = req
        .ctx
        .tls
        .as_ref()
        .map(|t| (t.identity_header.as_str(), t.identity.as_ref().map(|i| i.header_value.as_str())));
    let fwd = h2up::Forwarded {
        peer_ip: &req.ctx.peer_ip,
        tls: req.ctx.tls.is_some(),
        via: &server.via,
        received: "2",
        request_id: &ex.request_id,
        strip: local.snap.config.overload.priority_header.as_deref(),
        identity,
    };
    let fields = req.parts.headers.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
    h2up::forward_headers(up.headers_mut(), fields, &fwd);
    if ex.deadline.grpc || server.deadline_header.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        crate::http::deadline::set_h2(up.headers_mut(), ex.deadline.grpc, server.deadline_header.as_deref(), left);
    }
    let no_body = req.body.is_end_stream();
    let sent = h2up::send_head(worker, h2ep, up, no_body, try_deadline).await;
    let (slot, response, tx) = match sent {
        Ok(x) => x,
        Err(UpstreamError::Http1Only) => return H2Outcome::Http1(req),
        Err(e @ UpstreamError::Connect(_)) => return H2Outcome::Failed(e, req),
        Err(e) => {
            fail(worker, local, respond, ex, action, e, is_head);
            return H2Outcome::Done(None);
        }
    };
    // The body (if any) is pumped by its own task; a bodyless request is kept, so that a stream
    // the upstream refused (not processed, RFC 9113 §8.7) can be retried.
    let ctx = req.ctx;
    let (pump, unsent) = match tx {
        Some(tx) => {
            let pump = h2up::pump(req.body, tx, server.timeouts.body_io, server.limits.max_body_bytes);
            (Some(monoio::spawn(pump)), None)
        }
        None => (None, Some(req)),
    };
    let head = h2up::response_head(worker, response, &mut Interim::H2(respond), try_deadline).await;
    ex.upstream_elapsed = Some(sent_at.elapsed());
    let resp = match (head, unsent) {
        (Ok(r), _) => r,
        (Err(e @ UpstreamError::RefusedStream), Some(req)) => {
            drop(slot);
            return H2Outcome::Failed(e, req);
        }
        (Err(e), _) => {
            fail(worker, local, respond, ex, action, e, is_head);
            return H2Outcome::Done(None);
        }
    };
    let (parts, body) = resp.into_parts();
    let status = parts.status.as_u16();
    ex.status = status;
    let end = body.is_end_stream();
    let mut head = h2up::client_head(&parts);
    crate::http::decor::Decor::new(&local.snap.config, ex.route, ex.tls).apply_h2(head.headers_mut());
    match respond.send_response(head, end) {
        Ok(mut tx) if !end => match h2up::relay(body, &mut tx, action.timeout, &ctx.flow).await {
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
    drop(slot);
    H2Outcome::Done(Some(status))
}

/// Answers a failed upstream exchange (or resets the stream when no answer fits).
fn fail(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    action: &ProxyAction,
    e: UpstreamError,
    is_head: bool,
) {
    let status = failure_status(worker, local.cluster_metrics.get(action.cluster), &e);
    tracing::debug!(error = %e, "upstream exchange failed (HTTP/2 client)");
    match status {
        Some(s) => {
            let extra: Vec<(String, String)> = match e {
                UpstreamError::Overflow => {
                    vec![("retry-after".into(), "1".into()), ("x-gateway-reason".into(), "overflow".into())]
                }
                _ => Vec::new(),
            };
            super::stream::reply(worker, local, respond, ex, s, &extra, is_head);
        }
        None => respond.send_reset(h2::Reason::CANCEL),
    }
}

/// Writes the HTTP/1.1 request head; true when the body goes chunked.
fn write_head(out: &mut Vec<u8>, local: &Local, req: &Request<'_>, request_id: &[u8]) -> bool {
    let server = &local.snap.config.server;
    let parts = req.parts;
    let strip_priority = local.snap.config.overload.priority_header.as_deref();
    let deadline_header = server.deadline_header.as_deref();
    let identity = req.ctx.tls.as_ref().map(|t| t.identity_header.as_str());
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(parts.uri.path_and_query().map_or("/", |p| p.as_str()).as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(req.authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut cookies: Vec<&[u8]> = Vec::new();
    let mut length = None;
    for (name, value) in &parts.headers {
        let n = name.as_str();
        if n == "cookie" {
            // RFC 9113 §8.2.3: cookie crumbs are joined into one field for HTTP/1.1.
            cookies.push(value.as_bytes());
            continue;
        }
        if n == "content-length" {
            length = Some(value.as_bytes());
            continue;
        }
        if connection_specific(n)
            || n == "host"
            || n == "x-forwarded-for"
            || n == "x-forwarded-proto"
            || n == "x-request-id"
            || n == "expect"
            || strip_priority.is_some_and(|h| n.eq_ignore_ascii_case(h))
            || crate::http::deadline::Incoming::is_deadline_field(n.as_bytes(), deadline_header)
            || n == crate::proxy::mirror::MARKER_NAME
            || identity.is_some_and(|h| n.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !cookies.is_empty() {
        out.extend_from_slice(b"cookie: ");
        out.extend_from_slice(&cookies.join(&b"; "[..]));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    for v in parts.headers.get_all("x-forwarded-for") {
        if !v.is_empty() {
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b", ");
        }
    }
    out.extend_from_slice(&req.ctx.peer_ip);
    out.extend_from_slice(b"\r\nx-forwarded-proto: ");
    out.extend_from_slice(if req.ctx.tls.is_some() { b"https" } else { b"http" });
    out.extend_from_slice(b"\r\nvia: 2 ");
    out.extend_from_slice(server.via.as_bytes());
    out.extend_from_slice(b"\r\nx-request-id: ");
    out.extend_from_slice(request_id);
    out.extend_from_slice(b"\r\n");
    if let Some((name, Some(id))) = req.ctx.tls.as_ref().map(|t| (t.identity_header.as_str(), t.identity.as_ref())) {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(id.header_value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let chunked = match length {
        Some(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(n);
            out.extend_from_slice(b"\r\n");
            false
        }
        None if req.body.is_end_stream() => false,
        None => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            true
        }
    };
    out.extend_from_slice(b"\r\n");
    chunked
}

/// Sends the request and reads the response head, retrying once on a fresh connection when a
/// pooled one fails before any response byte and the request had no body.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    worker: &Rc<Worker>,
    local: &Local,
    req: &mut Request<'_>,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    action: &ProxyAction,
    endpoint: &EndpointState,
    wbuf: &mut Vec<u8>,
    chunked: bool,
    deadline: Instant,
) -> Result<(UpConn, Vec<u8>, usize, ResponseHead), UpstreamError> {
    let server = &local.snap.config.server;
    let connect_timeout =
        local.clusters.get(action.cluster).map_or(Duration::from_secs(3), |c| c.settings.connect_timeout);
    let no_body = req.body.is_end_stream();
    let replayable = no_body && is_idempotent(&req.parts.method);
    let is_head = req.parts.method == http::Method::HEAD;
    let mut retried = false;
    loop {
        let (mut up, reused) = acquire(worker, local, action.cluster, endpoint, connect_timeout, deadline).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        let len = wbuf.len();
        let (res, b) = write_from(&mut up.stream, std::mem::take(wbuf), 0, left).await;
        *wbuf = b;
        wbuf.truncate(len);
        let mut sent = res.map_err(UpstreamError::Send);
        if sent.is_ok() && !no_body {
            sent = send_body(worker, local, req, ex, &mut up, chunked, deadline).await;
        }
        let err = match sent {
            Ok(()) => match read_response_head_pooled(
                worker,
                &mut up,
                server,
                is_head,
                false,
                &mut Interim::H2(respond),
                deadline,
            )
            .await
            {
                Ok((ubuf, upos, resp)) => return Ok((up, ubuf, upos, resp)),
                Err(e) => e,
            },
            Err(e) => e,
        };
        retry_if_stale(worker, err, reused && replayable, &mut retried)?;
    }
}

fn is_idempotent(m: &http::Method) -> bool {
    use http::Method;
    [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE, Method::PUT, Method::DELETE].contains(m)
}

/// Streams the client's DATA to the upstream, giving window back only once the upstream took
/// the bytes. Client trailers go into the last chunk when the body is chunked.
async fn send_body(
    worker: &Worker,
    local: &Local,
    req: &mut Request<'_>,
    ex: &mut Exchange,
    up: &mut UpConn,
    chunked: bool,
    deadline: Instant,
) -> Result<(), UpstreamError> {
    let server = &local.snap.config.server;
    let mut out = worker.buffers.take();
    let mut total: u64 = 0;
    let result = loop {
        let next = monoio::time::timeout(server.timeouts.body_io, req.body.data()).await;
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
        let (res, b) = write_from(&mut up.stream, std::mem::take(&mut out), 0, left.min(server.timeouts.body_io)).await;
        out = b;
        if let Err(e) = res {
            break Err(UpstreamError::Send(e));
        }
        // The client may send more only once the upstream took these bytes.
        let _ = req.body.flow_control().release_capacity(data.len());
    };
    if result.is_ok() && chunked {
        out.clear();
        match req.body.trailers().await {
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
        let (res, b) = write_from(&mut up.stream, std::mem::take(&mut out), 0, left).await;
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
async fn relay_response(
    worker: &Rc<Worker>,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    action: &ProxyAction,
    endpoint: &EndpointState,
    mut up: UpConn,
    mut ubuf: Vec<u8>,
    mut upos: usize,
    resp: ResponseHead,
    is_head: bool,
    flow: &FlowWatch,
) {
    let server = &local.snap.config.server;
    let mut response = {
        let scratch = worker.resp_scratch(server.limits.max_headers);
        let buf = ubuf.get(upos..).unwrap_or_default();
        response_head(buf, &resp, &scratch)
    };
    crate::http::decor::Decor::new(&local.snap.config, ex.route, ex.tls).apply_h2(response.headers_mut());
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
        if h1::is_hop_by_hop(name, buf, scratch) {
            continue;
        }
        let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(name), http::HeaderValue::from_bytes(h.value(buf)))
        else {
            continue;
        };
        if connection_specific(name.as_str()) {
            continue;
        }
        if name == http::header::CONTENT_LENGTH && !matches!(resp.framing, ResponseFraming::Length(_)) {
            continue;
        }
        headers.append(name, value);
    }
    if let ResponseFraming::Length(n) = resp.framing {
        let mut v = Vec::new();
        push_num(&mut v, n);
        if let Ok(v) = http::HeaderValue::from_bytes(&v) {
            headers.insert(http::header::CONTENT_LENGTH, v);
        }
    }
    response
}
