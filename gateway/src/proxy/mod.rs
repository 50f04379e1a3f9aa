//! Forwarding one request to an upstream cluster and streaming the response back.
//!
//! Failure mapping: no endpoint -> 503; connect failure -> 502; no response head before the
//! route timeout -> 504; a malformed or hostile response head -> 502. Once the response head has
//! been sent downstream, a failure can only close the client connection: the client then sees a
//! truncated body rather than a desynchronised stream. A request sent on a reused keep-alive
//! connection that fails before any response byte (the upstream closed it while idle) is retried
//! once on a fresh connection when the request has no body and an idempotent method.

use std::io;
use std::rc::Rc;
use std::time::Duration;

use gateway_config::ProxyAction;
use monoio::net::TcpStream;

use crate::runtime::stream::Stream;
use monoio::time::Instant;

use crate::admission::limiter::Permit;
use crate::http::body::{self, Side, Source, TransferError};
use crate::http::conn::{reply_and_close, request_body_status, Downstream, Next};
use crate::http::h1::{self, BodyFraming, RequestHead, ResponseFraming, ResponseHead};
use crate::http::response;

mod h1_to_h2;
pub(crate) mod h2up;
mod head;
pub(crate) mod interim;
pub mod mirror;
mod response_head;
pub(crate) mod retry;
pub mod websocket;
use crate::runtime::io::{read_append_timeout, write_from, write_from_until};
use crate::runtime::worker::{Local, Worker};
use crate::stats::metrics::FailureReason;
use crate::upstream::{EndpointState, Outcome, PickHints, UpConn};
pub use head::{build_request_head, build_response_head, RequestIdentity};
pub(crate) use response_head::read_response_head_pooled;
use retry::Retries;

/// Why an upstream exchange failed before a response head was forwarded.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// `protocol = "auto"` and the endpoint chose HTTP/1.1 by ALPN: nothing was sent; the
    /// request goes over HTTP/1.1 instead.
    Http1Only,
    Connect(io::Error),
    /// The route timeout expired before the response head arrived.
    Timeout,
    /// Sending the request failed; `retryable` if nothing had been sent from the client body.
    Send(io::Error),
    /// The upstream closed or reset before sending any response byte.
    ClosedEarly,
    /// Malformed, oversized or otherwise unacceptable response.
    Protocol(&'static str),
    /// An HTTP/2 upstream refused the stream (REFUSED_STREAM): it did not process it.
    RefusedStream,
    /// The client's request body failed (too large, malformed, slow, gone).
    ClientBody(TransferError),
    /// The cluster is at `caps.max_connections` and no pooled connection is free.
    Overflow,
}

impl UpstreamError {
    /// What the failure says about the endpoint; `None` when it says nothing (the client's
    /// body failed, the cluster was at its cap, ALPN chose HTTP/1.1).
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match self {
            Self::Connect(_) => Some(Outcome::ConnectFailure),
            Self::Timeout => Some(Outcome::Timeout),
            Self::Send(_) | Self::ClosedEarly | Self::RefusedStream => Some(Outcome::Reset),
            Self::Protocol(_) => Some(Outcome::Protocol),
            Self::Http1Only | Self::ClientBody(_) | Self::Overflow => None,
        }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "connect failed: {e}"),
            Self::Timeout => f.write_str("route timeout before the response head"),
            Self::Send(e) => write!(f, "sending the request failed: {e}"),
            Self::ClosedEarly => f.write_str("upstream closed before responding"),
            Self::Protocol(why) => write!(f, "invalid response: {why}"),
            Self::ClientBody(e) => write!(f, "client request body: {e:?}"),
            Self::Overflow => f.write_str("cluster at its connection cap"),
            Self::Http1Only => f.write_str("the upstream chose HTTP/1.1 by ALPN"),
            Self::RefusedStream => f.write_str("the upstream refused the stream"),
        }
    }
}

/// The deadline of a proxied request: the route timeout from `started`, shortened by the
/// client's own deadline; `None` (answer 504 at once) when the client's deadline has expired.
pub(crate) fn request_deadline(
    worker: &Worker,
    started: std::time::Instant,
    action: &ProxyAction,
    incoming: crate::http::deadline::Incoming,
) -> Option<std::time::Instant> {
    let route = started + action.timeout;
    match incoming.remaining {
        Some(r) if r.is_zero() => {
            worker.stats.requests_deadline_expired.inc();
            None
        }
        Some(r) => Some(route.min(std::time::Instant::now() + r)),
        None => Some(route),
    }
}

/// How one try on an HTTP/1.1 or HTTP/2 endpoint ended.
enum Try {
    /// An HTTP/1.1 response head, not yet relayed.
    Head(UpConn, Vec<u8>, usize, ResponseHead),
    /// The HTTP/2 path answered the client (with the upstream's status, if one arrived).
    Answered(Next, Option<u16>),
}

/// Forwards one request and relays the answer; `websocket`: the request is a checked WebSocket
/// handshake on a route that allows it, and a 101 from the upstream starts a tunnel. Failed
/// tries are retried under the route's retry policy, each on another endpoint where one exists.
#[allow(clippy::too_many_arguments)]
pub async fn forward(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Rc<Local>,
    head: &RequestHead,
    action: &ProxyAction,
    mut permit: Permit,
    deadline: std::time::Instant,
    websocket: bool,
) -> Next {
    let server = &local.snap.config.server;
    let deadline = Instant::from_std(deadline);
    let base = conn.rpos;
    let mut wbuf = worker.buffers.take();
    {
        let scratch = crate::http::conn::request_scratch(worker, conn, server);
        let buf = conn.rbuf.get(base..).unwrap_or_default();
        let ids = RequestIdentity {
            peer: &conn.peer_ip,
            via: &server.via,
            request_id: &conn.ex.request_id,
            strip: local.snap.config.overload.priority_header.as_deref(),
            deadline_header: server.deadline_header.as_deref(),
            default_host: local.snap.config.clusters.get(action.cluster).map_or("", |c| c.name.as_str()),
            proto: if conn.tls.is_some() { "https" } else { "http" },
            identity: conn
                .tls
                .as_ref()
                .map(|t| (t.identity_header.as_str(), t.identity.as_ref().map(|i| i.header_value.as_str()))),
            websocket,
        };
        build_request_head(&mut wbuf, buf, head, &scratch, &ids);
        let no_body = matches!(head.body, BodyFraming::None | BodyFraming::Length(0)) && !websocket;
        mirror::start(worker, local, conn.ex.route, head.method_bytes(buf), no_body, |out| {
            out.extend_from_slice(&wbuf)
        });
    }
    let body_start = base + head.head_len;
    conn.rpos = body_start;
    conn.ex.cluster = Some(action.cluster);

    let Some(cluster) = local.clusters.get(action.cluster).cloned() else {
        worker.buffers.give(wbuf);
        return fail(worker, conn, local, 503).await;
    };
    cluster.note_request();
    let hash = crate::upstream::hashkey::h1(worker, conn, base, server, &cluster).hash;
    let policy = &action.retry;
    let mut retries = Retries::new(policy, is_idempotent(head.method) && !websocket, head.body == BodyFraming::None);
    // A body that a retry after sending would need again is read whole first (bounded).
    if let (BodyFraming::Length(n), true) = (head.body, retries.possible() && policy.retry_on.after_send()) {
        if n <= policy.max_replay_bytes {
            if let Err(e) = hold_body(conn, server, body_start, n, head.expect_continue).await {
                worker.buffers.give(wbuf);
                return match request_body_status(&e) {
                    Some(s) => reply(worker, conn, local, head, s, b"", true).await,
                    None => Next::Close,
                };
            }
            retries.set_resendable();
        }
    }
    // The head without its final CRLF: each try appends its own deadline fields.
    let head_base = wbuf.len().saturating_sub(2);
    wbuf.truncate(head_base);
    let saved_head = (head.body != BodyFraming::None && retries.resendable()).then(|| wbuf.clone());
    let propagate = (conn.ex.deadline.grpc, server.deadline_header.as_deref());

    worker.stats.upstream_requests_active.inc();
    let sent_at = Instant::now();
    permit.start_at(sent_at.into_std());
    let mut avoid = None;
    let next = loop {
        let Some(inflight) = cluster.pick_with(&worker.rng, PickHints { hash, avoid }) else {
            break reply(worker, conn, local, head, 503, b"x-gateway-reason: no-healthy-upstream\r\n", true).await;
        };
        let Some(endpoint) = inflight.endpoint() else {
            break reply(worker, conn, local, head, 503, b"", true).await;
        };
        conn.ex.upstream = Some(endpoint.address);
        let try_deadline = retries.try_deadline(deadline);
        if let Some(saved) = &saved_head {
            wbuf.clear();
            wbuf.extend_from_slice(saved);
        }
        wbuf.truncate(head_base);
        if propagate.0 || propagate.1.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            crate::http::deadline::push_h1_lines(&mut wbuf, propagate.0, propagate.1, left);
        }
        wbuf.extend_from_slice(b"\r\n");
        conn.rpos = body_start;
        let result =
            try_once(worker, conn, local, head, action, endpoint, &mut wbuf, base, try_deadline, deadline, websocket)
                .await;
        let failure = match &result {
            Ok(Try::Head(_, ubuf, upos, resp)) => {
                inflight.record(Outcome::Response(resp.status));
                (resp.status >= 500).then(|| retry::Failure::Status {
                    status: resp.status,
                    shed: is_shed_head(worker, server, ubuf.get(*upos..).unwrap_or_default(), resp.status),
                })
            }
            Ok(Try::Answered(_, status)) => {
                inflight.record(status.map_or(Outcome::Reset, Outcome::Response));
                None
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
                if let Ok(Try::Head(up, ubuf, _, _)) = result {
                    // The failed response is discarded with its connection.
                    drop(up);
                    worker.buffers.give(ubuf);
                }
                if retries.backoff(worker, deadline).await {
                    continue;
                }
                // No time left for another try: the deadline has passed.
                break reply(worker, conn, local, head, 504, b"", !keep_after_failure(conn, head)).await;
            }
        }
        conn.ex.upstream_elapsed = Some(sent_at.elapsed());
        match &result {
            Ok(Try::Head(_, _, _, resp)) if resp.status < 500 => permit.success(),
            Ok(Try::Answered(_, Some(s))) if *s < 500 => permit.success(),
            _ => {}
        }
        if let (Some(m), Some(c)) = (local.cluster_metrics.get(action.cluster), local.clusters.get(action.cluster)) {
            m.set_limit(c.limiter.limit() as u64);
        }
        match result {
            Ok(Try::Answered(next, _)) => break next,
            Ok(Try::Head(up, ubuf, upos, resp)) if resp.status == 101 => {
                // A tunnel may last for hours: it holds neither an admission slot nor a
                // balancer in-flight count, only its upstream connection (counted in the caps).
                worker.stats.upstream_requests_active.sub(1);
                drop(inflight);
                drop(permit);
                return Box::pin(websocket::tunnel(worker, conn, local, up, ubuf, upos, &resp, wbuf)).await;
            }
            Ok(Try::Head(up, ubuf, upos, resp)) => {
                let wbuf = std::mem::take(&mut wbuf);
                break relay_response(worker, conn, local, head, action, endpoint, up, ubuf, upos, resp, wbuf).await;
            }
            Err(e) => {
                let status = failure_status(worker, local.cluster_metrics.get(action.cluster), &e);
                tracing::debug!(upstream = %endpoint.address, error = %e, "upstream exchange failed");
                let extra: &[u8] = match e {
                    UpstreamError::Overflow => b"retry-after: 1\r\nx-gateway-reason: overflow\r\n",
                    _ => b"",
                };
                break match status {
                    Some(s) => reply(worker, conn, local, head, s, extra, !keep_after_failure(conn, head)).await,
                    None => Next::Close,
                };
            }
        }
    };
    worker.buffers.give(wbuf);
    worker.stats.upstream_requests_active.sub(1);
    drop(permit);
    next
}

/// Whether the client connection stays usable after a gateway error answer: only when no
/// request body is left unread on it.
fn keep_after_failure(conn: &Downstream, head: &RequestHead) -> bool {
    head.body == BodyFraming::None && head.keep_alive && !conn.closing()
}

/// What a failed try means for retrying; `None` when it is not retried at all (the client's
/// body failed, the cluster is at its cap).
pub(crate) fn retry_failure(e: &UpstreamError) -> Option<retry::Failure> {
    match e {
        UpstreamError::Connect(_) => Some(retry::Failure::ConnectFailure),
        UpstreamError::RefusedStream => Some(retry::Failure::RefusedStream),
        UpstreamError::Timeout | UpstreamError::Send(_) | UpstreamError::ClosedEarly => Some(retry::Failure::Reset),
        UpstreamError::Protocol(_) => Some(retry::Failure::Reset),
        UpstreamError::Http1Only | UpstreamError::ClientBody(_) | UpstreamError::Overflow => None,
    }
}

/// Whether a 5xx response head (at the start of `buf`, just parsed into the worker's
/// response scratch) marks load shedding.
pub(crate) fn is_shed_head(worker: &Worker, server: &gateway_config::Server, buf: &[u8], status: u16) -> bool {
    if status != 503 {
        return false;
    }
    let scratch = worker.resp_scratch(server.limits.max_headers);
    retry::is_shed(status, scratch.headers().iter().map(|h| (h.name(buf), h.value(buf))))
}

/// Reads the rest of a `Content-Length` body of `n` bytes into the client read buffer (without
/// moving what is already there), so that it can be sent again by a retry.
async fn hold_body(
    conn: &mut Downstream,
    server: &gateway_config::Server,
    body_start: usize,
    n: u64,
    expect_continue: bool,
) -> Result<(), TransferError> {
    let end = body_start + usize::try_from(n).map_err(|_| TransferError::TooLarge)?;
    if conn.rbuf.len() >= end {
        return Ok(());
    }
    conn.rbuf.reserve(end - conn.rbuf.len());
    // The client may wait for 100 Continue before sending the body.
    if expect_continue && conn.rbuf.len() == body_start {
        let (res, _) =
            write_from(&mut conn.stream, b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), 0, server.timeouts.body_io).await;
        res.map_err(TransferError::Write)?;
        conn.ex.continued = true;
    }
    while conn.rbuf.len() < end {
        let (res, b) =
            read_append_timeout(&mut conn.stream, std::mem::take(&mut conn.rbuf), server.timeouts.body_io).await;
        conn.rbuf = b;
        match res {
            Ok(0) => return Err(TransferError::Truncated),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(TransferError::ReadTimeout),
            Err(e) => return Err(TransferError::Read(e)),
        }
    }
    Ok(())
}

/// One try on `endpoint`: over HTTP/2 when the endpoint speaks it (falling back to HTTP/1.1 when
/// ALPN chose it), else over HTTP/1.1 with the head in `wbuf`.
#[allow(clippy::too_many_arguments)]
async fn try_once(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Rc<Local>,
    head: &RequestHead,
    action: &ProxyAction,
    endpoint: &EndpointState,
    wbuf: &mut Vec<u8>,
    base: usize,
    try_deadline: Instant,
    deadline: Instant,
    websocket: bool,
) -> Result<Try, UpstreamError> {
    // WebSocket needs an HTTP/1.1 connection to take over: never on an h2 pool.
    if let (Some(h2ep), false) = (endpoint.h2().cloned(), websocket) {
        let body_start = conn.rpos;
        conn.rpos = base;
        // Boxed: the HTTP/2 upstream path is large and every HTTP/1.1 request's future (boxed
        // per request) would carry its size.
        match Box::pin(h1_to_h2::forward(worker, conn, local, head, action, &h2ep, try_deadline, deadline)).await {
            Ok((next, status)) => return Ok(Try::Answered(next, status)),
            Err(UpstreamError::Http1Only) => {
                endpoint.speaks_http1.set(true);
                conn.rpos = body_start;
            }
            Err(e) => return Err(e),
        }
    }
    exchange(worker, conn, local, head, action, endpoint, wbuf, try_deadline, websocket)
        .await
        .map(|(up, ubuf, upos, resp)| Try::Head(up, ubuf, upos, resp))
}

/// Counts a failed exchange and gives the status to answer with, if an answer is possible.
pub(crate) fn failure_status(
    worker: &Worker,
    metrics: Option<&std::sync::Arc<crate::stats::metrics::ClusterMetrics>>,
    e: &UpstreamError,
) -> Option<u16> {
    let (status, reason) = match e {
        UpstreamError::Connect(io) if io.kind() == io::ErrorKind::TimedOut => {
            (Some(502), Some(FailureReason::ConnectTimeout))
        }
        UpstreamError::Connect(_) => (Some(502), Some(FailureReason::ConnectError)),
        UpstreamError::Send(_) | UpstreamError::ClosedEarly | UpstreamError::RefusedStream => {
            (Some(502), Some(FailureReason::Reset))
        }
        UpstreamError::Protocol(_) | UpstreamError::Http1Only => {
            worker.stats.upstream_protocol_errors.inc();
            (Some(502), Some(FailureReason::Protocol))
        }
        UpstreamError::Timeout => {
            worker.stats.upstream_timeouts.inc();
            (Some(504), Some(FailureReason::Timeout))
        }
        UpstreamError::ClientBody(t) => (request_body_status(t), None),
        UpstreamError::Overflow => {
            worker.stats.requests_overflow.inc();
            (Some(503), None)
        }
    };
    if let (Some(m), Some(r)) = (metrics, reason) {
        m.failure(r);
    }
    status
}

/// Sends the request (head in `wbuf`, body from the client) and reads the response head.
/// Returns the upstream connection, its read buffer, the offset of the body in it, and the head.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Local,
    head: &RequestHead,
    action: &ProxyAction,
    endpoint: &EndpointState,
    wbuf: &mut Vec<u8>,
    deadline: Instant,
    websocket: bool,
) -> Result<(UpConn, Vec<u8>, usize, ResponseHead), UpstreamError> {
    let server = &local.snap.config.server;
    let connect_timeout =
        local.clusters.get(action.cluster).map_or(Duration::from_secs(3), |c| c.settings.connect_timeout);
    let replayable = head.body == BodyFraming::None && is_idempotent(head.method);
    let is_head = head.method == h1::Method::Head;
    let mut retried = false;
    loop {
        let (mut up, reused) = acquire(worker, local, action.cluster, endpoint, connect_timeout, deadline).await?;
        let sent = send_request(worker, conn, server, head, &mut up.stream, wbuf, deadline).await;
        let err = match sent {
            Ok(()) => {
                let (minor, continued, timeout) = (head.version_minor, conn.ex.continued, server.timeouts.body_io);
                let mut interim = interim::Interim::h1(&mut conn.stream, minor, continued, timeout);
                match read_response_head_pooled(worker, &mut up, server, is_head, websocket, &mut interim, deadline)
                    .await
                {
                    Ok((ubuf, upos, resp)) => return Ok((up, ubuf, upos, resp)),
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        retry_if_stale(worker, err, reused && replayable, &mut retried)?;
    }
}

/// `Ok` when a request that failed on a reused pooled connection before any response byte may
/// be sent once more on a fresh one (`replayable`: reused, idempotent, no body); else the error.
pub(crate) fn retry_if_stale(
    worker: &Worker,
    err: UpstreamError,
    replayable: bool,
    retried: &mut bool,
) -> Result<(), UpstreamError> {
    match err {
        UpstreamError::ClosedEarly | UpstreamError::Send(_) if replayable && !*retried => {
            worker.stats.upstream_stale_retries.inc();
            *retried = true;
            Ok(())
        }
        e => Err(e),
    }
}

/// An upstream connection to `endpoint`: a pooled one (`true`: reused) or a new one.
pub(crate) async fn acquire(
    worker: &Worker,
    local: &Local,
    cluster: usize,
    endpoint: &EndpointState,
    connect_timeout: Duration,
    deadline: Instant,
) -> Result<(UpConn, bool), UpstreamError> {
    Ok(match endpoint.pool.take() {
        Some(s) => {
            worker.stats.upstream_reuses.inc();
            if let Some(m) = local.cluster_metrics.get(cluster) {
                m.reuse();
            }
            (s, true)
        }
        None => {
            if !endpoint.may_connect() {
                return Err(UpstreamError::Overflow);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let tls = local.clusters.get(cluster).and_then(|c| c.tls.as_ref());
            let up = connect(endpoint, tls, connect_timeout.min(left)).await.map_err(|e| {
                worker.stats.upstream_connect_errors.inc();
                if Instant::now() >= deadline {
                    UpstreamError::Timeout
                } else {
                    UpstreamError::Connect(e)
                }
            })?;
            let up = endpoint.adopt(up);
            worker.stats.upstream_connects.inc();
            if let Some(m) = local.cluster_metrics.get(cluster) {
                m.connect();
            }
            (up, false)
        }
    })
}

/// RFC 9110 §9.2.2 idempotent methods (safe to replay on a fresh connection).
pub(crate) fn is_idempotent(m: h1::Method) -> bool {
    use h1::Method::*;
    matches!(m, Get | Head | Options | Trace | Put | Delete)
}

async fn connect(
    endpoint: &EndpointState,
    tls: Option<&crate::upstream::UpstreamTlsConfig>,
    limit: Duration,
) -> io::Result<Stream> {
    let start = Instant::now();
    let stream = monoio::time::timeout(limit, TcpStream::connect_addr(endpoint.address))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    stream.set_nodelay(true)?;
    let Some(tls) = tls else { return Ok(Stream::Tcp(stream)) };
    use monoio::io::IntoPollIo;
    let io = stream.into_poll_io()?;
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(&tls.config));
    let left = limit.saturating_sub(start.elapsed());
    // Boxed: the handshake state is large and would grow every request's future.
    let tls_stream = monoio::time::timeout(left, Box::pin(connector.connect(tls.server_name.clone(), io)))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    Ok(Stream::TlsClient(Box::new(tls_stream)))
}

/// Writes the request head (kept in `wbuf` for a possible retry when there is no body) and
/// streams the body from the client.
async fn send_request(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    server: &gateway_config::Server,
    head: &RequestHead,
    up: &mut Stream,
    wbuf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), UpstreamError> {
    let source = match head.body {
        BodyFraming::None => {
            let (res, b) = write_from_until(up, std::mem::take(wbuf), 0, deadline).await;
            *wbuf = b;
            return res.map_err(UpstreamError::Send);
        }
        BodyFraming::Length(n) => Source::Length(n),
        BodyFraming::Chunked => Source::Chunked,
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if head.expect_continue && conn.rbuf.len() == conn.rpos {
        let (res, _) =
            write_from(&mut conn.stream, b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), 0, server.timeouts.body_io).await;
        res.map_err(|e| UpstreamError::ClientBody(TransferError::Write(e)))?;
        conn.ex.continued = true;
    }
    let limits = body::Limits {
        max_bytes: server.limits.max_body_bytes,
        read_timeout: server.timeouts.body_io,
        write_timeout: left,
    };
    let mut scratch = worker.buffers.take();
    let side = Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos };
    let chunked = source == Source::Chunked;
    let result = body::transfer(side, Some(body::Dest::Stream(up)), wbuf, source, chunked, &limits, &mut scratch).await;
    worker.buffers.give(scratch);
    match result {
        Ok(n) => {
            worker.stats.downstream_bytes_in.add(n);
            conn.ex.bytes_in += n;
            Ok(())
        }
        Err(TransferError::Write(e)) => Err(UpstreamError::Send(e)),
        Err(e) => Err(UpstreamError::ClientBody(e)),
    }
}

/// Sends the response head downstream and streams the body; pools the upstream connection
/// when the exchange ended cleanly.
#[allow(clippy::too_many_arguments)]
async fn relay_response(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Local,
    head: &RequestHead,
    action: &ProxyAction,
    endpoint: &EndpointState,
    mut up: UpConn,
    mut ubuf: Vec<u8>,
    mut upos: usize,
    resp: ResponseHead,
    mut wbuf: Vec<u8>,
) -> Next {
    let server = &local.snap.config.server;
    let client_11 = head.version_minor == 1;
    // How the body reaches the client, and whether the client connection must close after it.
    let (source, chunk_out, must_close) = match resp.framing {
        ResponseFraming::None => (None, false, false),
        ResponseFraming::Length(n) => (Some(Source::Length(n)), false, false),
        ResponseFraming::Chunked => (Some(Source::Chunked), client_11, !client_11),
        ResponseFraming::UntilClose => (Some(Source::UntilClose), client_11, !client_11),
    };
    let close = !head.keep_alive || must_close || conn.closing();
    wbuf.clear();
    {
        let scratch = worker.resp_scratch(server.limits.max_headers);
        let buf = ubuf.get(upos..).unwrap_or_default();
        let decor = crate::http::decor::Decor::new(&local.snap.config, conn.ex.route, conn.ex.tls);
        build_response_head(&mut wbuf, buf, &resp, &scratch, &decor, chunk_out, close, client_11);
    }
    upos += resp.head_len;
    conn.ex.status = resp.status;
    let ok = match source {
        None => {
            let n = wbuf.len() as u64;
            let (res, b) = write_from(&mut conn.stream, std::mem::take(&mut wbuf), 0, server.timeouts.body_io).await;
            wbuf = b;
            worker.stats.downstream_bytes_out.add(n);
            conn.ex.bytes_out += n;
            res.is_ok()
        }
        Some(source) => {
            let head_bytes = wbuf.len() as u64;
            let limits = body::Limits {
                max_bytes: u64::MAX,
                read_timeout: action.timeout,
                write_timeout: server.timeouts.body_io,
            };
            // The head and the body bytes that came with it go out in one write straight from
            // the read buffer, the head copied in front of them (instead of the body behind it).
            let mut source = source;
            let mut sent = Ok(0);
            if let Some((start, take)) = head_before_body(&mut ubuf, upos, &wbuf, source, chunk_out) {
                wbuf.clear();
                let end = upos + take;
                let write = conn.stream.write_all_range(std::mem::take(&mut ubuf), start..end);
                let (res, b) = match monoio::time::timeout(server.timeouts.body_io, write).await {
                    Ok(r) => r,
                    Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
                };
                ubuf = b;
                upos = end;
                sent = res.map(|()| take as u64).map_err(TransferError::Write);
                if let Source::Length(n) = source {
                    source = Source::Length(n.saturating_sub(take as u64));
                }
            }
            let result = match sent {
                Ok(done) if source != Source::Length(0) || done == 0 => {
                    let mut scratch = worker.buffers.take();
                    let side = Side { stream: &mut up.stream, buf: &mut ubuf, pos: &mut upos };
                    let result = body::transfer(
                        side,
                        Some(body::Dest::Stream(&mut conn.stream)),
                        &mut wbuf,
                        source,
                        chunk_out,
                        &limits,
                        &mut scratch,
                    )
                    .await;
                    worker.buffers.give(scratch);
                    result.map(|n| n + done)
                }
                other => other,
            };
            match result {
                Ok(n) => {
                    worker.stats.downstream_bytes_out.add(head_bytes + n);
                    conn.ex.bytes_out += head_bytes + n;
                    true
                }
                Err(e) => {
                    if matches!(e, TransferError::Framing | TransferError::Truncated) {
                        worker.stats.upstream_protocol_errors.inc();
                    }
                    tracing::debug!(upstream = %endpoint.address, error = ?e, "response body relay failed");
                    false
                }
            }
        }
    };
    let reusable = ok && resp.keep_alive && upos == ubuf.len() && source != Some(Source::UntilClose);
    worker.buffers.give(ubuf);
    worker.buffers.give(wbuf);
    if reusable {
        endpoint.pool.put(up);
    }
    if ok && !close {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

/// Places the response head `head` right before the body bytes buffered at `ubuf[upos..]`, so
/// that both can be written as `ubuf[start..upos + take]` (`take` body bytes): only for a
/// `Content-Length` body passed through as is, when there is room before the body and the
/// head is shorter than the buffered body (copying it is the cheaper copy).
fn head_before_body(
    ubuf: &mut [u8],
    upos: usize,
    head: &[u8],
    source: Source,
    chunk_out: bool,
) -> Option<(usize, usize)> {
    let Source::Length(n) = source else { return None };
    if chunk_out {
        return None;
    }
    let avail = ubuf.len().checked_sub(upos)?;
    let take = avail.min(usize::try_from(n).unwrap_or(usize::MAX));
    if take <= head.len() {
        return None;
    }
    let start = upos.checked_sub(head.len())?;
    ubuf.get_mut(start..upos)?.copy_from_slice(head);
    Some((start, take))
}

/// Answers with a gateway error (`extra`: header lines), keeping the connection unless `close`.
async fn reply(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Local,
    head: &RequestHead,
    status: u16,
    extra: &[u8],
    close: bool,
) -> Next {
    let mut out = worker.buffers.take();
    response::write_refusal(&mut out, status, extra, close, head.method == h1::Method::Head);
    crate::http::decor::Decor::new(&local.snap.config, conn.ex.route, conn.ex.tls).insert_h1(&mut out, 0);
    conn.ex.status = status;
    let n = out.len() as u64;
    let (res, out) = write_from(&mut conn.stream, out, 0, local.snap.config.server.timeouts.body_io).await;
    worker.buffers.give(out);
    worker.stats.downstream_bytes_out.add(n);
    conn.ex.bytes_out += n;
    if res.is_ok() && !close {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

async fn fail(worker: &Rc<Worker>, conn: &mut Downstream, local: &Local, status: u16) -> Next {
    reply_and_close(worker, conn, status, local).await;
    Next::Close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_goes_right_before_the_buffered_body() {
        // 4 bytes of room, a 3-byte upstream head, then 6 body bytes and 2 extra bytes.
        let mut ubuf = b"....HHHbodyXYzz".to_vec();
        let (start, take) = head_before_body(&mut ubuf, 7, b"NEW", Source::Length(6), false).unwrap_or_default();
        assert_eq!((start, take), (4, 6));
        assert_eq!(&ubuf[start..7 + take], b"NEWbodyXY");
        assert_eq!(&ubuf[7 + take..], b"zz", "bytes past the body are not part of the write");
    }

    #[test]
    fn head_before_body_only_when_it_fits_and_pays() {
        let mut ubuf = b"HHbody".to_vec();
        // No room before the body.
        assert_eq!(head_before_body(&mut ubuf, 2, b"NEW", Source::Length(4), false), None);
        // The buffered body is not longer than the head.
        assert_eq!(head_before_body(&mut ubuf, 2, b"N", Source::Length(1), false), None);
        // Chunked output, other framings.
        assert_eq!(head_before_body(&mut ubuf, 2, b"N", Source::Length(4), true), None);
        assert_eq!(head_before_body(&mut ubuf, 2, b"N", Source::Chunked, false), None);
        assert_eq!(head_before_body(&mut ubuf, 2, b"N", Source::UntilClose, false), None);
        assert_eq!(ubuf, b"HHbody", "nothing was written");
        // A body longer than what is buffered: only the buffered part.
        assert_eq!(head_before_body(&mut ubuf, 2, b"NN", Source::Length(100), false), Some((0, 4)));
        assert_eq!(ubuf, b"NNbody");
    }
}
