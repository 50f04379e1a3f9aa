//! One downstream HTTP/1.1 connection: read requests in order, route each, answer each.

use crate::http::decor::Decor;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::stream::Stream;
use gateway_config::Action;

use super::body::{self, Side, Source, TransferError};
use super::exchange::Exchange;
use super::h1::{self, BodyFraming, RequestHead, RequestLimits};
use super::response;
use crate::admission::limiter::Admission;
use crate::route::RequestFacts;
use crate::runtime::idle_timer::Expiry;
use crate::runtime::io::{make_room, read_append_expiry, write_from};
use crate::runtime::worker::{ListenerHandle, Local, Worker};
use crate::stats::metrics::ClassOutcome;
use std::time::Instant;

/// Largest request body a gateway-answered request (404, direct response, redirect) may carry
/// and still keep the connection: it is read and discarded. Larger ones close the connection.
const DISCARD_LIMIT: u64 = 64 * 1024;

/// The downstream side of a connection.
pub struct Downstream {
    pub stream: Stream,
    pub peer: SocketAddr,
    /// The client's IP address as text, for X-Forwarded-For.
    pub peer_ip: Vec<u8>,
    /// Bytes read from the client; `rbuf[rpos..]` are not consumed yet.
    pub rbuf: Vec<u8>,
    pub rpos: usize,
    /// Requests answered so far.
    pub served: u64,
    /// The listener it came from: when it stops (reload removed it, or drain), the connection
    /// closes after the current request.
    pub listener: Rc<ListenerHandle>,
    /// Accounting of the current request.
    pub ex: Exchange,
    /// The current head's claim on the worker's header scratch (see `Worker::head_scratch`).
    pub head_token: u64,
    /// TLS facts of the connection (`None` on cleartext).
    pub tls: Option<Rc<TlsFacts>>,
}

/// What the handshake established, for forwarding and routing.
pub struct TlsFacts {
    /// The header that carries the client identity upstream; always removed from client input.
    pub identity_header: String,
    /// The verified client certificate's identity, when the client presented one.
    pub identity: Option<crate::tls::ClientIdentity>,
}

impl Downstream {
    /// Whether the connection must close after the current request.
    pub fn closing(&self) -> bool {
        self.listener.stop.is_triggered()
    }
}

impl crate::admission::RequestView for Downstream {
    fn peer(&self) -> std::net::IpAddr {
        self.peer.ip()
    }

    fn identity(&self) -> Option<&str> {
        self.tls.as_ref().and_then(|t| t.identity.as_ref()).map(|i| i.principal.as_str())
    }

    fn with_header<R>(&self, worker: &Worker, local: &Local, name: &str, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let scratch = request_scratch(worker, self, &local.snap.config.server);
        let buf = self.rbuf.get(self.rpos..).unwrap_or_default();
        let h = scratch.headers().iter().find(|h| h.name(buf).eq_ignore_ascii_case(name.as_bytes()))?;
        Some(f(h.value(buf)))
    }
}

/// What happens to the connection after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    KeepAlive,
    Close,
}

/// Serves an HTTP/1.1 connection until the client leaves, an error closes it, or the worker
/// drains. `initial` holds bytes already read from it (protocol detection), possibly none.
pub async fn serve(
    worker: &Rc<Worker>,
    listener: Rc<ListenerHandle>,
    stream: Stream,
    peer: SocketAddr,
    tls: Option<Rc<TlsFacts>>,
    initial: Vec<u8>,
) {
    let peer_ip = peer.ip().to_string().into_bytes();
    let mut conn = Downstream {
        stream,
        peer,
        peer_ip,
        rbuf: initial,
        rpos: 0,
        served: 0,
        listener,
        ex: Exchange::default(),
        head_token: 0,
        tls,
    };
    serve_requests(worker, &mut conn).await;
    worker.buffers.give(std::mem::take(&mut conn.rbuf));
    if conn.stream.is_tls() {
        // close_notify, so the client can tell a complete response from a truncated one.
        monoio::select! {
            _ = conn.stream.shutdown() => {}
            _ = worker.idle_timer.after(Duration::from_secs(1)) => {}
        }
    }
}

async fn serve_requests(worker: &Rc<Worker>, conn: &mut Downstream) {
    // When the previous request ended (the idle timeout counts from there).
    let mut ended = None;
    loop {
        if conn.rpos >= conn.rbuf.len() && !wait_for_request(worker, conn, ended).await {
            return;
        }
        let local = worker.local();
        let head = match read_head(worker, conn, &local).await {
            Ok(h) => h,
            Err(HeadEnd::Close) => return,
            Err(HeadEnd::Reply(status)) => {
                worker.stats.requests_rejected.inc();
                // Boxed: its write timeout would otherwise size every connection's task.
                Box::pin(reply_and_close(worker, conn, status, &local)).await;
                worker.stats.count_status(status);
                return;
            }
        };
        worker.stats.requests_total.inc();
        worker.stats.requests_active.inc();
        {
            let server = &local.snap.config.server;
            let scratch = request_scratch(worker, conn, server);
            let buf = conn.rbuf.get(conn.rpos..).unwrap_or_default();
            conn.ex.begin(worker, buf, &head, &scratch, server.deadline_header.as_deref());
            conn.ex.tls = conn.tls.is_some();
        }
        let next = Box::pin(handle(worker, conn, &local, &head)).await;
        ended = Some(conn.ex.finish(worker, &local, conn.peer.ip()));
        worker.stats.requests_active.sub(1);
        conn.served += 1;
        if next == Next::Close || conn.closing() {
            return;
        }
    }
}

/// Waits, without holding a buffer, until the client sends the first byte of a request.
/// False when the connection should close (idle timeout, drain, client gone). `ended`: when the
/// previous request ended (read already; the wait's limit counts from then), if any. The timeout
/// is on the worker's coarse timer (`runtime::idle_timer`): an idle connection's task holds no
/// timer entry of its own.
async fn wait_for_request(worker: &Rc<Worker>, conn: &mut Downstream, ended: Option<Instant>) -> bool {
    let buf = std::mem::take(&mut conn.rbuf);
    worker.buffers.give(buf);
    conn.rpos = 0;
    let timeouts = &worker.local().snap.config.server.timeouts;
    let limit = if conn.served == 0 { timeouts.header_read } else { timeouts.idle };
    let expiry = match ended.and_then(|e| e.checked_add(limit)) {
        Some(deadline) => worker.idle_timer.at(deadline),
        None => worker.idle_timer.after(limit),
    };
    if conn.stream.is_tls() {
        return wait_for_tls_request(worker, conn, expiry).await;
    }
    // On epoll, relaxed readiness can be stale; io_uring polls for real either way.
    let relaxed = !monoio::utils::is_legacy();
    let first = conn.served == 0;
    let ready = monoio::select! {
        r = conn.stream.readable(relaxed) => r.is_ok(),
        _ = expiry => false,
        _ = stop_unless_first(&conn.listener, first) => false,
    };
    if ready {
        conn.rbuf = worker.buffers.take();
    }
    ready
}

/// Resolves when the listener stops, except for a connection's first request: a client that
/// connected (its connection was accepted, maybe just before a drain) always gets its first
/// request answered, within the header-read timeout. Idle keep-alive connections close at once.
async fn stop_unless_first(listener: &ListenerHandle, first: bool) {
    if first {
        std::future::pending::<()>().await;
    }
    listener.stop.wait().await;
}

/// TLS cannot report readability without decrypting, so an idle TLS connection waits in a read
/// into a small buffer (not a pooled one: idle connections should cost little memory).
async fn wait_for_tls_request(worker: &Rc<Worker>, conn: &mut Downstream, expiry: Expiry<'_>) -> bool {
    let small = Vec::with_capacity(512);
    let first = conn.served == 0;
    let read = monoio::select! {
        r = conn.stream.read_append(small) => Some(r),
        _ = expiry => None,
        _ = stop_unless_first(&conn.listener, first) => None,
    };
    match read {
        Some((Ok(n), bytes)) if n > 0 => {
            worker.stats.downstream_bytes_in.add(n as u64);
            let mut buf = worker.buffers.take();
            buf.extend_from_slice(&bytes);
            conn.rbuf = buf;
            true
        }
        _ => false,
    }
}

enum HeadEnd {
    Close,
    Reply(u16),
}

/// Reads until a complete, valid request head is buffered at `conn.rbuf[conn.rpos..]`.
async fn read_head(worker: &Rc<Worker>, conn: &mut Downstream, local: &Local) -> Result<RequestHead, HeadEnd> {
    let server = &local.snap.config.server;
    let limits = RequestLimits {
        max_request_line: server.limits.max_request_line_bytes,
        max_header_bytes: server.limits.max_header_bytes,
        max_headers: server.limits.max_headers,
    };
    // On the worker's coarse timer: a monoio `Sleep` here would size every connection's task.
    let deadline = Instant::now() + server.timeouts.header_read;
    loop {
        let parsed = {
            let mut scratch = worker.scratch(server.limits.max_headers);
            h1::parse_request(conn.rbuf.get(conn.rpos..).unwrap_or_default(), &limits, &mut scratch)
        };
        match parsed {
            Ok(Some(head)) => {
                conn.head_token = worker.claim_scratch();
                return Ok(head);
            }
            Err(e) => return Err(HeadEnd::Reply(e.status())),
            Ok(None) => {}
        }
        if !make_room(&mut conn.rbuf, &mut conn.rpos, 1024, limits.max_header_bytes + 1) {
            return Err(HeadEnd::Reply(431));
        }
        let had_bytes = conn.rbuf.len() > conn.rpos;
        let expiry = worker.idle_timer.at(deadline);
        let (res, buf) = read_append_expiry(&mut conn.stream, std::mem::take(&mut conn.rbuf), expiry).await;
        conn.rbuf = buf;
        match res {
            Ok(0) => return Err(HeadEnd::Close),
            Ok(n) => worker.stats.downstream_bytes_in.add(n as u64),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                worker.stats.header_read_timeouts.inc();
                return Err(if had_bytes || conn.served == 0 { HeadEnd::Reply(408) } else { HeadEnd::Close });
            }
            Err(_) => return Err(HeadEnd::Close),
        }
    }
}

/// The worker's header scratch describing this connection's current head (re-parsed if another
/// connection used the scratch meanwhile). The head must still start at `conn.rpos`.
pub fn request_scratch<'w>(
    worker: &'w Worker,
    conn: &Downstream,
    server: &gateway_config::Server,
) -> std::cell::RefMut<'w, h1::HeadScratch> {
    let limits = RequestLimits {
        max_request_line: server.limits.max_request_line_bytes,
        max_header_bytes: server.limits.max_header_bytes,
        max_headers: server.limits.max_headers,
    };
    worker.head_scratch(conn.head_token, conn.rbuf.get(conn.rpos..).unwrap_or_default(), &limits)
}

/// Routes and answers one request whose head is at `conn.rbuf[conn.rpos..]`.
pub(crate) async fn handle(worker: &Rc<Worker>, conn: &mut Downstream, local: &Rc<Local>, head: &RequestHead) -> Next {
    let server = &local.snap.config.server;
    if let BodyFraming::Length(n) = head.body {
        if n > server.limits.max_body_bytes {
            worker.stats.requests_rejected.inc();
            reply_and_close(worker, conn, 413, local).await;
            return Next::Close;
        }
    }
    if head.body == BodyFraming::Chunked {
        if let Some(status) = precheck_chunked(worker, conn, head, server.limits.max_body_bytes) {
            worker.stats.requests_rejected.inc();
            reply_and_close(worker, conn, status, local).await;
            return Next::Close;
        }
    }
    let base = conn.rpos;
    let route = {
        let scratch = request_scratch(worker, conn, server);
        let buf = conn.rbuf.get(base..).unwrap_or_default();
        let facts = RequestFacts {
            method: buf.get(head.method_range.clone()).unwrap_or_default(),
            authority: head.authority.clone().and_then(|r| buf.get(r)),
            path: buf.get(head.path.clone()).unwrap_or_default(),
            headers: |name: &[u8], value: Option<&[u8]>| {
                scratch
                    .headers()
                    .iter()
                    .any(|h| h.name(buf).eq_ignore_ascii_case(name) && value.is_none_or(|v| h.value(buf) == v))
            },
            identity: conn.tls.as_ref().and_then(|t| t.identity.as_ref()).map(|i| i.principal.as_str()),
        };
        local.snap.routes.find(&facts)
    };
    let Some(index) = route else {
        return answer_locally(worker, conn, local, head, Local404).await;
    };
    conn.ex.route = Some(index);
    // The request's start, as `Exchange::begin` just read it (one clock read per request).
    let started = conn.ex.started.unwrap_or_else(Instant::now);
    let class = crate::admission::class_of(worker, conn, local, index);
    let count = |outcome| {
        worker.metrics.count_class(class, outcome);
        if let Some(m) = local.route_metrics.get(index) {
            m.decide(outcome);
        }
    };
    // Rate limit first (it applies to every kind of route), then the cluster's admission.
    match crate::admission::rate_limit(worker, conn, local, index).await {
        Ok(()) => {}
        Err(headers) => {
            worker.stats.requests_rate_limited.inc();
            count(ClassOutcome::RateLimited);
            return answer_locally(worker, conn, local, head, LocalAnswer::Refuse(429, headers)).await;
        }
    }
    match local.snap.config.routes.get(index).map(|r| &r.action) {
        Some(Action::Proxy(p)) => {
            // Before admission, which is per cluster: a split route's target decides the cluster.
            let p = crate::route::split::h1_action(worker, conn, local, index, p);
            // A WebSocket handshake is forwarded as one only where the route allows it; elsewhere
            // (and for any other Upgrade) the Upgrade field is dropped and the request is served
            // as plain HTTP, as RFC 9110 §7.8 allows.
            let websocket = head.websocket && local.snap.config.routes.get(index).is_some_and(|r| r.websocket);
            if websocket {
                let checked = {
                    let scratch = request_scratch(worker, conn, server);
                    crate::proxy::websocket::check_handshake(conn.rbuf.get(base..).unwrap_or_default(), head, &scratch)
                };
                if let Err(refusal) = checked {
                    worker.stats.requests_rejected.inc();
                    let answer = LocalAnswer::Refuse(refusal.status, refusal.headers.to_vec());
                    return answer_locally(worker, conn, local, head, answer).await;
                }
            }
            let Some(deadline) = crate::proxy::request_deadline(worker, started, p, conn.ex.deadline) else {
                let h = b"x-gateway-reason: deadline\r\n".to_vec();
                return answer_locally(worker, conn, local, head, LocalAnswer::Refuse(504, h)).await;
            };
            let Some(cluster) = local.clusters.get(p.cluster) else {
                return answer_locally(worker, conn, local, head, LocalAnswer::Refuse(503, Vec::new())).await;
            };
            let (admission, waited) = cluster.limiter.admit(class, deadline).await;
            if waited {
                worker.stats.requests_queued.inc();
            }
            match admission {
                Admission::Admitted(permit) => {
                    count(ClassOutcome::Served);
                    crate::proxy::forward(worker, conn, local, head, p, permit, deadline, websocket).await
                }
                Admission::Shed | Admission::ShedStanding => {
                    if matches!(admission, Admission::ShedStanding) {
                        worker.stats.requests_shed_standing.inc();
                    }
                    worker.stats.requests_shed.inc();
                    count(ClassOutcome::Shed);
                    let h = b"retry-after: 1\r\nx-gateway-reason: shed\r\n".to_vec();
                    answer_locally(worker, conn, local, head, LocalAnswer::Refuse(503, h)).await
                }
                Admission::Overflow => {
                    worker.stats.requests_overflow.inc();
                    count(ClassOutcome::Overflow);
                    let h = b"retry-after: 1\r\nx-gateway-reason: overflow\r\n".to_vec();
                    answer_locally(worker, conn, local, head, LocalAnswer::Refuse(503, h)).await
                }
            }
        }
        Some(Action::Direct(_)) => {
            count(ClassOutcome::Served);
            answer_locally(worker, conn, local, head, LocalDirect(index)).await
        }
        Some(Action::Redirect(_)) => {
            count(ClassOutcome::Served);
            answer_locally(worker, conn, local, head, LocalRedirect(index)).await
        }
        None => answer_locally(worker, conn, local, head, Local404).await,
    }
}

use LocalAnswer::{Direct as LocalDirect, NotFound as Local404, Redirect as LocalRedirect};

enum LocalAnswer {
    /// A refusal by admission control: status and extra header lines.
    Refuse(u16, Vec<u8>),
    NotFound,
    Direct(usize),
    Redirect(usize),
}

/// Answers without an upstream: 404, a direct response or a redirect. A small request body is
/// read and discarded to keep the connection; a large one closes it.
async fn answer_locally(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Rc<Local>,
    head: &RequestHead,
    answer: LocalAnswer,
) -> Next {
    let snap = &local.snap;
    let server = &snap.config.server;
    let base = conn.rpos;
    let body_small = match head.body {
        BodyFraming::None => true,
        BodyFraming::Length(n) => n <= DISCARD_LIMIT,
        BodyFraming::Chunked => true,
    };
    let mut close = !head.keep_alive || !body_small || conn.closing();
    let ka10 = head.version_minor == 0 && !close;
    let is_head = head.method == h1::Method::Head;
    let mut out = worker.buffers.take();
    let buf = conn.rbuf.get(base..).unwrap_or_default();
    let status = match answer {
        LocalAnswer::Refuse(status, headers) => {
            response::write_refusal(&mut out, status, &headers, close, is_head);
            status
        }
        LocalAnswer::NotFound => {
            response::write_error(&mut out, 404, close, is_head);
            404
        }
        LocalAnswer::Direct(i) => match snap.routes.direct(i) {
            Some(p) => {
                p.write(&mut out, close, ka10, is_head);
                p.status
            }
            None => {
                response::write_error(&mut out, 500, true, is_head);
                close = true;
                500
            }
        },
        LocalAnswer::Redirect(i) => match snap.config.routes.get(i).map(|r| &r.action) {
            Some(Action::Redirect(r)) => {
                let authority = head.authority.clone().and_then(|a| buf.get(a)).unwrap_or_default();
                let path = buf.get(head.path.clone()).unwrap_or_default();
                let query = head.query.clone().and_then(|q| buf.get(q));
                let scheme = if conn.tls.is_some() { "https" } else { "http" };
                let url = response::RequestUrl { scheme, authority, path, query };
                response::write_redirect(&mut out, r, &url, close, ka10);
                r.status
            }
            _ => {
                response::write_error(&mut out, 500, true, is_head);
                close = true;
                500
            }
        },
    };
    conn.rpos = base + head.head_len;
    Decor::new(&snap.config, conn.ex.route, conn.ex.tls).insert_h1(&mut out, 0);
    // Discard the request body (bounded) so the next request on this connection is in sync.
    if !close && head.body != BodyFraming::None && !discard_body(worker, conn, head.body, server).await {
        worker.buffers.give(out);
        return Next::Close;
    }
    conn.ex.status = status;
    let n = out.len() as u64;
    let (res, out) = write_from(&mut conn.stream, out, 0, server.timeouts.body_io).await;
    worker.buffers.give(out);
    worker.stats.downstream_bytes_out.add(n);
    conn.ex.bytes_out += n;
    if res.is_err() || close {
        Next::Close
    } else {
        Next::KeepAlive
    }
}

/// Reads and drops a request body of at most [`DISCARD_LIMIT`] bytes. False if the connection
/// must close (too large, malformed, timeout).
async fn discard_body(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    framing: BodyFraming,
    server: &gateway_config::Server,
) -> bool {
    let source = match framing {
        BodyFraming::None => return true,
        BodyFraming::Length(n) => Source::Length(n),
        BodyFraming::Chunked => Source::Chunked,
    };
    let limits =
        body::Limits { max_bytes: DISCARD_LIMIT, read_timeout: server.timeouts.body_io, write_timeout: Duration::ZERO };
    let mut scratch = worker.buffers.take();
    let result = body::discard(
        Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos },
        source,
        &limits,
        &mut scratch,
    )
    .await;
    worker.buffers.give(scratch);
    result.is_ok()
}

/// Validates the part of a chunked body that arrived with the head, so that a malformed or
/// oversized body in a single write is refused before any upstream sees the request.
fn precheck_chunked(worker: &Worker, conn: &Downstream, head: &RequestHead, max_body: u64) -> Option<u16> {
    let start = conn.rpos + head.head_len;
    let buffered = conn.rbuf.get(start..).unwrap_or_default();
    if buffered.is_empty() {
        return None;
    }
    let mut decoder = super::chunked::ChunkedDecoder::new();
    let mut out = worker.buffers.take();
    let result = decoder.decode(buffered, &mut out);
    let size = out.len() as u64;
    worker.buffers.give(out);
    match result {
        Err(_) => Some(400),
        Ok(_) if size > max_body => Some(413),
        Ok(_) => None,
    }
}

/// Writes a gateway error response with `connection: close`.
pub async fn reply_and_close(worker: &Rc<Worker>, conn: &mut Downstream, status: u16, local: &Local) {
    let mut out = worker.buffers.take();
    response::write_error(&mut out, status, true, false);
    Decor::new(&local.snap.config, conn.ex.route, conn.tls.is_some()).insert_h1(&mut out, 0);
    conn.ex.status = status;
    let n = out.len() as u64;
    let (_, out) = write_from(&mut conn.stream, out, 0, local.snap.config.server.timeouts.body_io).await;
    worker.buffers.give(out);
    worker.stats.downstream_bytes_out.add(n);
    conn.ex.bytes_out += n;
}

/// Maps a failed request-body transfer to the status to answer, if an answer is still possible.
pub fn request_body_status(e: &TransferError) -> Option<u16> {
    match e {
        TransferError::TooLarge => Some(413),
        TransferError::Framing => Some(400),
        TransferError::ReadTimeout => Some(408),
        TransferError::Truncated | TransferError::Read(_) => None,
        TransferError::Write(_) => Some(502),
    }
}
