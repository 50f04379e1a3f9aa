//! What to do with a request: route -> priority class -> rate limit -> action (split target,
//! WebSocket check, deadline, the cluster's admission). The same for every client protocol;
//! the caller then forwards ([`Verdict::Proxy`]) or answers ([`Verdict::Answer`]).

use std::time::Instant;

use gateway_config::{Action, ProxyAction};

use super::answer::{Answer, Refusal};
use super::exchange::Exchange;
use crate::admission::limiter::{Admission, Permit};
use crate::request::Request;
use crate::stats::metrics::ClassOutcome;
use crate::worker::{Local, Worker};

/// The decision on one request.
pub enum Verdict<'l> {
    /// Forward it: admitted, with its permit and deadline.
    Proxy(Forward<'l>),
    /// Answer it without an upstream.
    Answer(Answer),
}

/// An admitted request's forwarding orders.
pub struct Forward<'l> {
    /// The route's action, or the split target's.
    pub action: &'l ProxyAction,
    /// The cluster's admission slot, held until the response ends.
    pub permit: Permit,
    /// The route timeout, shortened by the client's own deadline.
    pub deadline: Instant,
    /// A checked WebSocket handshake on a route that allows it: a 101 starts a tunnel.
    pub websocket: bool,
}

/// Decides what happens to `req` (waiting, when its rate limit delays it or its class queues
/// for a slot). Sets the route on `ex` and counts the decision per class and route.
pub async fn dispatch<'l>(worker: &Worker, local: &'l Local, req: &Request<'_>, ex: &mut Exchange) -> Verdict<'l> {
    #[cfg(feature = "fault-injection")]
    super::fault::on_request(req);
    let Some(index) = local.snap.routes.route(req) else {
        return Verdict::Answer(Answer::Refuse(Refusal::NOT_FOUND));
    };
    ex.route = Some(index);
    let config = &local.snap.config;
    let Some(route) = config.routes.get(index) else {
        return Verdict::Answer(Answer::Refuse(Refusal::NOT_FOUND));
    };
    let started = ex.started.unwrap_or_else(Instant::now);
    let class = crate::admission::class_of(config, req, index);
    let state = local.route(index);
    let count = |outcome| {
        worker.metrics.count_class(class, outcome);
        if let Some(r) = state {
            r.metrics.decide(outcome);
        }
    };
    // The rate limit first (it applies to every kind of route), then the cluster's admission.
    let limit = state.and_then(|r| Some((r.limit.as_ref()?, &r.metrics))).zip(route.rate_limit.as_ref());
    if let Some(((limit, metrics), settings)) = limit {
        let workers = worker.workers();
        let fields =
            crate::admission::rate_limit(limit, settings, &route.name, req, workers, &worker.stats, metrics).await;
        if let Err(fields) = fields {
            worker.stats.requests_rate_limited.inc();
            count(ClassOutcome::RateLimited);
            return Verdict::Answer(Answer::Refuse(Refusal::rate_limited(fields)));
        }
    }
    let proxy = match &route.action {
        Action::Proxy(p) => p,
        Action::Direct(_) => {
            count(ClassOutcome::Served);
            return Verdict::Answer(Answer::Direct(index));
        }
        Action::Redirect(_) => {
            count(ClassOutcome::Served);
            return Verdict::Answer(Answer::Redirect(index));
        }
    };
    // Before admission, which is per cluster: a split route's target decides the cluster.
    let counters = state.map_or(&[][..], |r| &r.splits);
    let action = crate::route::split::action(route, proxy, counters, &req.fields, &worker.rng);
    // A WebSocket handshake is forwarded as one only where the route allows it; elsewhere (and
    // for any other Upgrade) the Upgrade field is dropped and the request is served as plain
    // HTTP, as RFC 9110 §7.8 allows.
    let websocket = req.websocket && route.websocket;
    if websocket {
        if let Err(refusal) = crate::pipeline::websocket::check_handshake(req) {
            worker.stats.requests_rejected.inc();
            return Verdict::Answer(Answer::Refuse(refusal));
        }
    }
    let Some(deadline) = request_deadline(worker, started, action, ex.deadline) else {
        return Verdict::Answer(Answer::Refuse(Refusal::DEADLINE));
    };
    let Some(cluster) = local.clusters.get(action.cluster) else {
        return Verdict::Answer(Answer::Refuse(Refusal::status(503)));
    };
    let (admission, waited) = cluster.limiter.admit(class, deadline).await;
    if waited {
        worker.stats.requests_queued.inc();
    }
    match admission {
        Admission::Admitted(mut permit) => {
            permit.set_kind(state.map_or(0, |r| r.kind));
            count(ClassOutcome::Served);
            Verdict::Proxy(Forward { action, permit, deadline, websocket })
        }
        Admission::Shed | Admission::ShedStanding => {
            if matches!(admission, Admission::ShedStanding) {
                worker.stats.requests_shed_standing.inc();
            }
            worker.stats.requests_shed.inc();
            count(ClassOutcome::Shed);
            Verdict::Answer(Answer::Refuse(Refusal::SHED))
        }
        Admission::Overflow => {
            worker.stats.requests_overflow.inc();
            count(ClassOutcome::Overflow);
            Verdict::Answer(Answer::Refuse(Refusal::OVERFLOW))
        }
    }
}

/// The deadline of a proxied request: the route timeout from `started`, shortened by the
/// client's own deadline; `None` (answer 504 at once) when the client's deadline has expired.
fn request_deadline(
    worker: &Worker,
    started: Instant,
    action: &ProxyAction,
    incoming: super::deadline::Incoming,
) -> Option<Instant> {
    let route = started + action.timeout;
    match incoming.remaining {
        Some(r) if r.is_zero() => {
            worker.stats.requests_deadline_expired.inc();
            None
        }
        Some(r) => Some(route.min(Instant::now() + r)),
        None => Some(route),
    }
}
