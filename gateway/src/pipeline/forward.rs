//! The one forwarding loop: pick an endpoint, try it within the per-try timeout, and retry a
//! failed try (on another endpoint where one exists) within the route's policy, the cluster's
//! retry budget and the request's deadline; then relay the response or answer the failure.
//!
//! What differs per protocol pair is behind [`Downstream`]: each client protocol implements
//! one try over HTTP/1.1 and over HTTP/2 (sending its body its own way) and the relay of either
//! kind of upstream response (`downstream/h1`, `downstream/h2`).

use std::pin::Pin;
use std::rc::Rc;

use gateway_config::{ProxyAction, UpstreamProtocol};
use monoio::time::Instant;

use crate::runtime::idle_timer::Expiry;

use super::answer::Refusal;
use super::connect::{acquire, retry_if_stale};
use super::dispatch::Forward;
use super::exchange::Exchange;
use super::interim::Interim;
use super::outbound::{self, Additions};
use super::response_head::read_response_head_pooled;
use super::retry::{Failure, Retries};
use crate::admission::limiter::Permit;
use crate::codec::h1::{HeadScratch, ResponseHead};
use crate::request::{Body, Request};
use crate::runtime::stream::Stream;
use crate::stats::metrics::FailureReason;
use crate::upstream::h2pool::{H2Endpoint, H2Stream};
use crate::upstream::outlier::Ejectable as _;
use crate::upstream::{ClusterState, EndpointState, InFlight, Outcome, PickHints, UpConn, UpstreamError};
use crate::worker::{Local, Worker};

/// One client protocol's side of forwarding.
#[allow(async_fn_in_trait)]
pub trait Downstream {
    /// What handling the request leaves (HTTP/1.1: whether the connection stays open).
    type Done;

    /// Whether an HTTP/1.1 upstream's response is read after
    /// [`super::response_head::HEAD_ROOM`] bytes, where the relay writes the rewritten head
    /// right before the body (an HTTP/1.1 client), or from the buffer's start.
    const RESPONSE_HEAD_ROOM: bool;

    /// Whether a try keeps what it streams of the request body ([`super::replay`]), so that it
    /// need not be held whole before the first try for a refused stream to be retried.
    const KEEPS_STREAMED_BODY: bool;

    /// The request's accounting.
    fn ex(&mut self) -> &mut Exchange;

    /// Reads the body whole, so that a retry after sending can send it again: a `Content-Length`
    /// body of `n` bytes, or one of unknown length (HTTP/1.1 chunked) taking at most `n` bytes
    /// on the wire. False when it was not held: this protocol does not hold such bodies, or it is
    /// longer (what was read of it then streams first). `Err`: the answer to give (`None`: none
    /// possible).
    async fn hold_body(&mut self, t: &Try<'_>, n: u64) -> Result<bool, Option<Refusal>>;

    /// The body's length when all of it has already arrived and is in memory (so that
    /// [`Self::hold_body`] of it waits for nothing); `None` otherwise, or when this protocol
    /// cannot hold it.
    fn body_arrived(&self) -> Option<u64>;

    /// Whether the body a failed try took from the client is in memory
    /// ([`super::replay::Replay`]), so that the next try can send the request again from its
    /// start. Asked after each failed try.
    fn body_replayable(&self) -> bool;

    /// Sends `head` (complete; left as it was when the request has no body) and the request
    /// body on an HTTP/1.1 upstream connection, for a try. Each call sends the body from its
    /// start. `timer` is the try's deadline, which then bounds the response head's read too
    /// (one timer entry per try).
    async fn send_h1(
        &mut self,
        t: &Try<'_>,
        up: &mut Stream,
        head: &mut Vec<u8>,
        timer: Pin<&mut Expiry<'_>>,
    ) -> Result<(), UpstreamError>;

    /// Where interim (1xx) responses go while a response head is awaited.
    fn interim(&mut self, t: &Try<'_>) -> Interim<'_>;

    /// One try over HTTP/2 with the request `up`: opens a stream, sends the body, reads the
    /// response head. [`UpstreamError::Http1Only`] when ALPN chose HTTP/1.1 (nothing was sent).
    async fn try_h2(
        &mut self,
        t: &Try<'_>,
        endpoint: &Rc<H2Endpoint>,
        up: http::Request<()>,
    ) -> Result<Response, UpstreamError>;

    /// Relays the chosen response to the client.
    async fn relay(&mut self, t: &Try<'_>, endpoint: &EndpointState, resp: Response) -> Self::Done;

    /// Answers with a gateway error; `keep`: the connection may stay open if nothing else
    /// forbids it.
    async fn refuse(&mut self, t: &Try<'_>, refusal: Refusal, keep: bool) -> Self::Done;

    /// Ends the request without an answer (connection closed, stream reset).
    fn abort(&mut self) -> Self::Done;
}

/// What every try of one request shares.
#[derive(Clone, Copy)]
pub struct Try<'a> {
    pub worker: &'a Rc<Worker>,
    pub local: &'a Rc<Local>,
    pub req: &'a Request<'a>,
    pub action: &'a ProxyAction,
    /// The request's deadline and this try's.
    pub deadline: Instant,
    pub try_deadline: Instant,
    /// The longest this try may wait for a connection (or an HTTP/2 stream) before giving up:
    /// the cluster's `connect_timeout`, or less (see `connect_limit`).
    pub connect_limit: std::time::Duration,
    pub websocket: bool,
}

/// An upstream's response head, not yet relayed. Boxed: it is handed from the try to the
/// relay through several futures' states, and a move of the response itself would copy its
/// hundreds of bytes into each of them, cache lines that are cold with hundreds of requests in
/// flight.
pub enum Response {
    H1(Box<H1Response>),
    H2(Box<H2Response>),
}

/// From an HTTP/1.1 connection: its read buffer (the head at `upos`), the parsed head and its
/// own field ranges.
pub struct H1Response {
    pub up: UpConn,
    pub ubuf: Vec<u8>,
    pub upos: usize,
    pub head: ResponseHead,
    pub scratch: HeadScratch,
}

/// From an HTTP/2 stream: its slot, the head with the body stream, and the task still pumping
/// the request body (if any).
pub struct H2Response {
    pub slot: H2Stream,
    pub resp: http::Response<h2::RecvStream>,
    pub pump: Option<monoio::task::JoinHandle<super::replay::PumpEnd>>,
}

impl Response {
    pub fn status(&self) -> u16 {
        match self {
            Self::H1(r) => r.head.status,
            Self::H2(r) => r.resp.status().as_u16(),
        }
    }

    /// Whether a 503 marks load shedding (never retried).
    fn is_shed(&self) -> bool {
        match self {
            Self::H1(r) => {
                let buf = r.ubuf.get(r.upos..).unwrap_or_default();
                super::retry::is_shed(r.head.status, r.scratch.headers().iter().map(|h| (h.name(buf), h.value(buf))))
            }
            Self::H2(r) => super::retry::is_shed(
                r.resp.status().as_u16(),
                r.resp.headers().iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
            ),
        }
    }

    /// Gives its buffers back (a response dropped for a retry).
    pub fn discard(self, worker: &Worker) {
        if let Self::H1(r) = self {
            let H1Response { ubuf, scratch, .. } = *r;
            worker.buffers.give_response(ubuf);
            worker.give_scratch(scratch);
        }
    }
}

/// Forwards an admitted request through `down` and relays the answer.
pub async fn forward<D: Downstream>(
    worker: &Rc<Worker>,
    local: &Rc<Local>,
    down: &mut D,
    req: &Request<'_>,
    fwd: Forward<'_>,
) -> D::Done {
    let Forward { action, mut permit, deadline, websocket } = fwd;
    let deadline = Instant::from_std(deadline);
    // `connect_limit`: each try sets its own from its cluster's (`choose`).
    let connect_limit = gateway_config::defaults::CONNECT_TIMEOUT;
    let t = Try { worker, local, req, action, deadline, try_deadline: deadline, connect_limit, websocket };
    down.ex().cluster = Some(action.cluster);
    worker.stats.upstream_requests_active.inc();
    // Matched whole, with no wait inside the match: a value still (partly) held there would
    // be kept in every request's future across the relay.
    let chosen = choose(&t, down, &mut permit).await;
    let done = match chosen {
        Ok(Chosen { resp, cluster, index, inflight }) => {
            // The balancer in-flight count and the admission slot are held until the response
            // ends; a WebSocket tunnel, which may last for hours, gives both back first and
            // holds only its upstream connection (in the caps).
            let Some(endpoint) = cluster.endpoints.get(index) else {
                resp.discard(worker);
                return Box::pin(down.refuse(&t, Refusal::status(503), false)).await;
            };
            let tunnel = resp.status() == 101;
            if tunnel {
                drop(inflight);
                drop(permit);
                worker.stats.upstream_requests_active.sub(1);
                return down.relay(&t, endpoint, resp).await;
            }
            let done = down.relay(&t, endpoint, resp).await;
            drop(inflight);
            drop(permit);
            done
        }
        Err(failure) => {
            drop(permit);
            // Boxed: refusals are rare, and their futures would size every request's.
            match failure {
                Some((refusal, keep)) => Box::pin(down.refuse(&t, refusal, keep)).await,
                None => down.abort(),
            }
        }
    };
    worker.stats.upstream_requests_active.sub(1);
    done
}

/// A response chosen to relay: from endpoint `index` of `cluster`, whose balancer in-flight
/// count it holds until relayed.
struct Chosen {
    resp: Response,
    cluster: Rc<ClusterState>,
    index: usize,
    inflight: InFlight,
}

/// Tries endpoints until one gives a response to relay, or the request fails: `Err` with the
/// answer to give and whether the connection may stay open (`None`: no answer possible).
async fn choose<D: Downstream>(
    t: &Try<'_>,
    down: &mut D,
    permit: &mut Permit,
) -> Result<Chosen, Option<(Refusal, bool)>> {
    let (worker, local, req, action) = (t.worker, t.local, t.req, t.action);
    let server = &local.snap.config.server;
    let Some(cluster) = local.clusters.get(action.cluster).cloned() else {
        return Err(Some((Refusal::status(503), false)));
    };
    cluster.note_request();
    let hash = crate::upstream::hashkey::hints(req, &cluster).hash;
    let request_id = std::mem::take(&mut down.ex().request_id);
    let route = down.ex().route.and_then(|i| local.snap.config.routes.get(i));
    let add = Additions {
        via: &server.via,
        request_id: &request_id,
        strip: local.snap.config.overload.priority_header.as_deref(),
        deadline_header: server.deadline_header.as_deref(),
        default_host: local.snap.config.clusters.get(action.cluster).map_or("", |c| c.name.as_str()),
        websocket: t.websocket,
        route: route.map_or("", |r| r.name.as_str()),
        edits: route.and_then(|r| r.request_headers.as_ref()),
        rewrite: route.and_then(|r| {
            let matched = match &r.matcher.path {
                Some(gateway_config::PathMatch::Prefix(p)) => p.len(),
                _ => 0,
            };
            r.rewrite.as_ref().map(|w| (w, matched))
        }),
    };
    // The HTTP/1.1 head without its end: each try adds its deadline fields.
    let mut wbuf = worker.buffers.take();
    outbound::write_h1_head(&mut wbuf, req, &add);
    if req.bodyless() && !t.websocket {
        super::mirror::start(worker, local, down.ex().route, req.method_bytes, |out| {
            out.extend_from_slice(&wbuf);
            out.extend_from_slice(b"\r\n");
        });
    }
    let wbuf = &mut wbuf;
    // The tries, each on the endpoint the balancer picks (another one after a failure, where
    // one exists). `wbuf` holds the HTTP/1.1 head without its end (each try ends it; a try may
    // use the buffer for the body, and the head is written again for the next).
    // (One function with the setup: every level of async call copies its future once.)
    let result = 'tries: {
        let head_len = wbuf.len();
        // Whether a try used `wbuf` (for the body): the head must be written again.
        let mut used = false;
        let deadline = t.deadline;
        let grpc = down.ex().deadline.grpc;
        let mut retries = Retries::new(&action.retry, req.is_idempotent() && !t.websocket, req.bodyless());
        // The body is held (read whole first, bounded) when a retry would need it again: after
        // sending, for an idempotent request whose policy retries then; or, whatever the
        // method, after an HTTP/2 upstream refused the stream. A client protocol that keeps no
        // copy of a body as it streams has it read whole (HTTP/1.1, as nginx buffers request
        // bodies; one of unknown length up to `max_replay_bytes` on the wire); an HTTP/2
        // client's body is kept as it goes (`super::replay`), and held only when it is a
        // `Content-Length` one a resend would need, or all of it has already arrived (at no cost).
        let replay_limit = action.retry.max_replay_bytes;
        let hold = if retries.resendable() {
            None
        } else {
            let after_send = retries.resend_possible() && action.retry.retry_on.after_send();
            let refused = retries.refused_stream_possible() && cluster.settings.protocol != UpstreamProtocol::Http1;
            match req.body {
                Body::Length(n) if after_send || (refused && !D::KEEPS_STREAMED_BODY) => Some(n),
                Body::Stream if (after_send || refused) && !D::KEEPS_STREAMED_BODY => Some(replay_limit),
                _ if refused => down.body_arrived(),
                _ => None,
            }
        };
        if let Some(n) = hold.filter(|&n| n <= replay_limit) {
            // Not `?`: the buffer and the request id go back below whatever happens.
            match Box::pin(down.hold_body(t, n)).await {
                Ok(true) => retries.set_resendable(),
                Ok(false) => {}
                Err(refusal) => break 'tries Err(refusal.map(|r| (r, false))),
            }
        }
        let sent_at = Instant::now();
        permit.start_at(sent_at.into_std());
        let mut avoid = None;
        // The length of the last adaptive cut that expired (see `upstream::trytime`).
        let mut expired_cut = None;
        let mut first_try = true;
        loop {
            let shy = retries.shy();
            let Some(inflight) = cluster.pick_with(&worker.rng, PickHints { hash, avoid, shy }) else {
                break 'tries Err(Some((Refusal::NO_HEALTHY_UPSTREAM, false)));
            };
            let index = inflight.index();
            let Some(endpoint) = cluster.endpoints.get(index) else {
                break 'tries Err(Some((Refusal::status(503), false)));
            };
            down.ex().upstream = Some(endpoint.address);
            down.ex().endpoint = Some(index);
            // The first try starts as the request is sent (one clock read fewer).
            let try_start = if std::mem::take(&mut first_try) { sent_at } else { Instant::now() };
            // An adaptive cut only helps when the retry can go to another endpoint.
            let other = cluster.has_other_eligible(index);
            let latency = other.then_some(&cluster.head_latency);
            let (try_deadline, cut) = retries.try_deadline(try_start, deadline, latency, action.timeout);
            let remaining = deadline.saturating_duration_since(try_start);
            let retry_elsewhere = other && retries.connect_retry_possible();
            let connect_timeout = cluster.settings.connect_timeout;
            let connect_limit = connect_limit(connect_timeout, remaining, retry_elsewhere, cluster.tls.is_some());
            let tt = Try { try_deadline, connect_limit, ..*t };
            let mut result = Err(UpstreamError::Http1Only);
            // WebSocket needs an HTTP/1.1 connection to take over: never on an HTTP/2 pool.
            if let (Some(h2ep), false) = (endpoint.h2().cloned(), t.websocket) {
                let Some(up) = outbound::h2_request(req, &add, cluster.tls.is_some(), grpc, remaining) else {
                    break 'tries Err(Some((Refusal::status(400), false)));
                };
                // Boxed: the HTTP/2 upstream path is large, and every request would carry it.
                result = Box::pin(down.try_h2(&tt, &h2ep, up)).await;
                if matches!(result, Err(UpstreamError::Http1Only)) {
                    endpoint.speaks_http1.set(true);
                }
            }
            if matches!(result, Err(UpstreamError::Http1Only)) {
                if std::mem::replace(&mut used, true) {
                    wbuf.clear();
                    outbound::write_h1_head(wbuf, req, &add);
                } else {
                    wbuf.truncate(head_len);
                }
                outbound::finish_h1_head(wbuf, grpc, add.deadline_header, remaining);
                result = try_h1(&tt, down, endpoint, wbuf, try_start).await;
            }
            // When the try ended: its latency, and (for the last try) the upstream's time.
            let ended = Instant::now();
            let failure = match &result {
                Ok(resp) => {
                    cluster.head_latency.observe(ended.saturating_duration_since(try_start));
                    inflight.record(Outcome::Response(resp.status()));
                    (resp.status() >= 500).then(|| Failure::Status { status: resp.status(), shed: resp.is_shed() })
                }
                Err(e) => {
                    if let Some(o) = e.outcome() {
                        inflight.record(o);
                    }
                    if matches!(e, UpstreamError::Timeout) && try_deadline < deadline {
                        cluster.metrics().try_timeout();
                    }
                    match (e, cut) {
                        // The cut expired: remembered in case the tries after it also run out.
                        (UpstreamError::Timeout, Some(c)) => expired_cut = Some(c),
                        // A try that was not cut ran out after a cut one: the cut was too short.
                        (UpstreamError::Timeout, None) => {
                            if let Some(c) = expired_cut.take() {
                                cluster.head_latency.cut_too_short(c);
                            }
                        }
                        _ => {}
                    }
                    retry_failure(e)
                }
            };
            if let Some(failure) = failure {
                retries.set_replayable(down.body_replayable());
                let ejected = endpoint.outlier().is_ejected();
                if retries.allow(worker, &cluster, failure, deadline, ejected) {
                    avoid = Some(index);
                    drop(inflight);
                    if let Ok(resp) = result {
                        // The failed response is discarded with its connection.
                        resp.discard(worker);
                    }
                    if retries.backoff(worker, deadline).await {
                        continue;
                    }
                    // No time left for another try: the deadline has passed (after a cut try
                    // that expired, the cut was too short).
                    if let Some(c) = expired_cut {
                        cluster.head_latency.cut_too_short(c);
                    }
                    break 'tries Err(Some((Refusal::status(504), true)));
                }
            }
            down.ex().upstream_elapsed = Some(ended.saturating_duration_since(sent_at));
            if result.as_ref().is_ok_and(|r| r.status() < 500) {
                permit.success();
            }
            cluster.metrics().set_limit(cluster.limiter.limit() as u64);
            break 'tries match result {
                Ok(resp) => Ok(Chosen { resp, cluster: Rc::clone(&cluster), index, inflight }),
                Err(e) => {
                    count_failure(worker, local, action, &e);
                    tracing::debug!(upstream = %endpoint.address, error = %e, "upstream exchange failed");
                    Err(Refusal::for_upstream(&e).map(|r| (r, true)))
                }
            };
        }
    };
    worker.buffers.give(std::mem::take(wbuf));
    down.ex().request_id = request_id;
    result
}

/// One try over HTTP/1.1: a pooled or new connection, the request, the response head. A request
/// that meets a pooled connection the upstream closed while idle (it fails before any response
/// byte) is sent once more on a fresh one when it is idempotent and has no body.
async fn try_h1<D: Downstream>(
    t: &Try<'_>,
    down: &mut D,
    endpoint: &EndpointState,
    head: &mut Vec<u8>,
    started: Instant,
) -> Result<Response, UpstreamError> {
    let server = &t.local.snap.config.server;
    let connect_timeout = t.connect_limit;
    let replayable = t.req.bodyless() && t.req.is_idempotent();
    let mut retried = false;
    // The try's deadline, for the request's write and the response head's read alike: one
    // entry on the worker's fine timer for both (three words here, 40 bytes in its slab).
    let mut timer = t.worker.deadlines.at(t.try_deadline.into_std());
    let mut timer = Pin::new(&mut timer);
    loop {
        let (mut up, reused) =
            acquire(t.worker, t.local, t.action.cluster, endpoint, connect_timeout, t.try_deadline, started).await?;
        let err = match down.send_h1(t, &mut up.stream, head, timer.as_mut()).await {
            Ok(()) => {
                let (is_head, websocket) = (t.req.is_head(), t.websocket);
                let mut interim = down.interim(t);
                let read = read_response_head_pooled(
                    t.worker,
                    &mut up,
                    server,
                    is_head,
                    websocket,
                    D::RESPONSE_HEAD_ROOM,
                    &mut interim,
                    timer.as_mut(),
                )
                .await;
                match read {
                    Ok(h) => {
                        let r = H1Response { up, ubuf: h.ubuf, upos: h.upos, head: h.head, scratch: h.scratch };
                        return Ok(Response::H1(Box::new(r)));
                    }
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        retry_if_stale(t.worker, err, reused && replayable, &mut retried)?;
    }
}

/// `connect_timeout` when no other endpoint could take the request after a failed connect
/// (`retry_elsewhere` false: none is eligible, or no retry is left), else at most half of the
/// request's `remaining` time (two thirds with `tls`): nothing is sent before the connection
/// exists, so a failed connect is retried whatever the method, and it must leave that retry
/// the time to run. The fraction never cuts a connection that would have left the request time
/// to complete: a request on a new connection takes its connect's round trips (one, or two with
/// TLS 1.3) plus at least one more, so a connect longer than half (two thirds) of the time left
/// would have ended in a timeout anyway. A connect cut before the request's deadline is a
/// connect failure, not a timeout. With the defaults (`connect_timeout` 3 s, route timeout 15 s)
/// this cuts nothing; with a route timeout of 2 s, an unreachable endpoint (SYNs unanswered)
/// costs a POST 1 s instead of the whole 2 s and the answer
/// (`loadtests/results/bad-endpoint-suspects-20261206.md`).
fn connect_limit(
    connect_timeout: std::time::Duration,
    remaining: std::time::Duration,
    retry_elsewhere: bool,
    tls: bool,
) -> std::time::Duration {
    match (retry_elsewhere, tls) {
        (false, _) => connect_timeout,
        (true, false) => connect_timeout.min(remaining / 2),
        (true, true) => connect_timeout.min(remaining * 2 / 3),
    }
}

/// What a failed try means for retrying; `None` when it is not retried at all (the client's
/// body failed, the cluster is at its cap).
fn retry_failure(e: &UpstreamError) -> Option<Failure> {
    match e {
        UpstreamError::Connect(_) => Some(Failure::ConnectFailure),
        UpstreamError::RefusedStream => Some(Failure::RefusedStream),
        UpstreamError::Timeout | UpstreamError::Send(_) | UpstreamError::ClosedEarly => Some(Failure::Reset),
        // A malformed answer is the upstream's 502: retried as one (`gateway-error`, `5xx`),
        // not as a reset (nothing valid arrived, but something did).
        UpstreamError::Protocol(_) => Some(Failure::Protocol),
        UpstreamError::Http1Only | UpstreamError::ClientBody(_) | UpstreamError::Overflow => None,
    }
}

/// Counts a failed exchange in the stats and the cluster's failure reasons.
fn count_failure(worker: &Worker, local: &Local, action: &ProxyAction, e: &UpstreamError) {
    let reason = match e {
        UpstreamError::Connect(io) if io.kind() == std::io::ErrorKind::TimedOut => Some(FailureReason::ConnectTimeout),
        UpstreamError::Connect(_) => Some(FailureReason::ConnectError),
        UpstreamError::Send(_) | UpstreamError::ClosedEarly | UpstreamError::RefusedStream => {
            Some(FailureReason::Reset)
        }
        UpstreamError::Protocol(_) | UpstreamError::Http1Only => {
            worker.stats.upstream_protocol_errors.inc();
            Some(FailureReason::Protocol)
        }
        UpstreamError::Timeout => {
            worker.stats.upstream_timeouts.inc();
            Some(FailureReason::Timeout)
        }
        UpstreamError::ClientBody(_) => None,
        UpstreamError::Overflow => {
            worker.stats.requests_overflow.inc();
            None
        }
    };
    if let (Some(m), Some(r)) = (local.clusters.get(action.cluster).map(|c| c.metrics()), reason) {
        m.failure(r);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::connect_limit;

    #[test]
    fn a_connect_is_cut_only_when_it_would_leave_a_retry_no_time() {
        let (three, ms) = (Duration::from_secs(3), Duration::from_millis);
        // Nothing else could take the request: the cluster's connect timeout, whatever is left.
        assert_eq!(connect_limit(three, ms(2000), false, false), three);
        assert_eq!(connect_limit(three, ms(2000), false, true), three);
        // The defaults (15 s route timeout): never cut.
        assert_eq!(connect_limit(three, ms(15_000), true, false), three);
        assert_eq!(connect_limit(three, ms(15_000), true, true), three);
        // Half of what is left over plain TCP (one round trip of the two a new connection's
        // request needs at least), two thirds with TLS (two of three).
        assert_eq!(connect_limit(three, ms(2000), true, false), ms(1000));
        assert_eq!(connect_limit(three, ms(3000), true, true), ms(2000));
    }
}
