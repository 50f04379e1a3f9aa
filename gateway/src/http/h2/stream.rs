//! One HTTP/2 stream: checks beyond what the h2 crate enforces, routing, admission, and the
//! answer (proxied, direct, redirect or an error).

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use gateway_config::Action;
use http::{HeaderMap, Method, Response, StatusCode};

use super::server::ConnCtx;
use crate::admission::limiter::Admission;
use crate::admission::RequestView;
use crate::http::exchange::Exchange;
use crate::http::response;
use crate::route::RequestFacts;
use crate::runtime::worker::{Local, Worker};
use crate::stats::metrics::ClassOutcome;

/// The request as admission sees it.
pub struct View<'a> {
    pub ctx: &'a ConnCtx,
    pub headers: &'a HeaderMap,
}

impl RequestView for View<'_> {
    fn peer(&self) -> std::net::IpAddr {
        self.ctx.peer.ip()
    }

    fn identity(&self) -> Option<&str> {
        self.ctx.tls.as_ref().and_then(|t| t.identity.as_ref()).map(|i| i.principal.as_str())
    }

    fn with_header<R>(&self, _: &Worker, _: &Local, name: &str, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.headers.get(name).map(|v| f(v.as_bytes()))
    }
}

pub async fn handle(
    worker: Rc<Worker>,
    ctx: Rc<ConnCtx>,
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let local = worker.local();
    worker.stats.requests_total.inc();
    worker.stats.requests_active.inc();
    let (parts, body) = req.into_parts();
    let mut ex = Exchange::default();
    ex.begin_h2(&worker, &parts, local.snap.config.server.deadline_header.as_deref());
    ex.tls = ctx.tls.is_some();
    serve(&worker, &ctx, &local, &parts, body, &mut respond, &mut ex).await;
    let _ = ex.finish(&worker, &local, ctx.peer.ip());
    worker.stats.requests_active.sub(1);
    ctx.active.set(ctx.active.get().saturating_sub(1));
    if ctx.active.get() == 0 {
        ctx.idle_since.set(Instant::now());
    }
}

async fn serve(
    worker: &Rc<Worker>,
    ctx: &ConnCtx,
    local: &Rc<Local>,
    parts: &http::request::Parts,
    body: h2::RecvStream,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
) {
    let server = &local.snap.config.server;
    if let Err(status) = check(parts, server) {
        worker.stats.requests_rejected.inc();
        reply(worker, local, respond, ex, status, &[], parts.method == Method::HEAD);
        return;
    }
    let authority = authority(parts).unwrap_or_default();
    let route = {
        let facts = RequestFacts {
            method: parts.method.as_str().as_bytes(),
            authority: Some(authority.as_bytes()),
            path: parts.uri.path().as_bytes(),
            headers: |name: &[u8], value: Option<&[u8]>| {
                let Ok(name) = std::str::from_utf8(name) else { return false };
                parts.headers.get_all(name).iter().any(|v| value.is_none_or(|want| v.as_bytes() == want))
            },
            identity: ctx.tls.as_ref().and_then(|t| t.identity.as_ref()).map(|i| i.principal.as_str()),
        };
        local.snap.routes.find(&facts)
    };
    let is_head = parts.method == Method::HEAD;
    let Some(index) = route else {
        reply(worker, local, respond, ex, 404, &[], is_head);
        return;
    };
    ex.route = Some(index);
    let started = Instant::now();
    let view = View { ctx, headers: &parts.headers };
    let class = crate::admission::class_of(worker, &view, local, index);
    let count = |outcome| {
        worker.metrics.count_class(class, outcome);
        if let Some(m) = local.route_metrics.get(index) {
            m.decide(outcome);
        }
    };
    if let Err(headers) = crate::admission::rate_limit(worker, &view, local, index).await {
        worker.stats.requests_rate_limited.inc();
        count(ClassOutcome::RateLimited);
        reply(worker, local, respond, ex, 429, &header_lines(&headers), is_head);
        return;
    }
    match local.snap.config.routes.get(index).map(|r| &r.action) {
        Some(Action::Proxy(p)) => {
            // Before admission, which is per cluster: a split route's target decides the cluster.
            let p = crate::route::split::action(local, index, p, &parts.headers, &worker.rng);
            let Some(deadline) = crate::proxy::request_deadline(worker, started, p, ex.deadline) else {
                reply(
                    worker,
                    local,
                    respond,
                    ex,
                    504,
                    &[("x-gateway-reason".to_owned(), "deadline".to_owned())],
                    is_head,
                );
                return;
            };
            let Some(cluster) = local.clusters.get(p.cluster) else {
                reply(worker, local, respond, ex, 503, &[], is_head);
                return;
            };
            let (admission, waited) = cluster.limiter.admit(class, deadline).await;
            if waited {
                worker.stats.requests_queued.inc();
            }
            let refusal: &[(&str, &str)] = match admission {
                Admission::Admitted(permit) => {
                    count(ClassOutcome::Served);
                    let req = super::forward::Request { ctx, parts, authority: &authority, body };
                    super::forward::forward(worker, local, req, respond, ex, p, permit, deadline).await;
                    return;
                }
                Admission::Shed | Admission::ShedStanding => {
                    if matches!(admission, Admission::ShedStanding) {
                        worker.stats.requests_shed_standing.inc();
                    }
                    worker.stats.requests_shed.inc();
                    count(ClassOutcome::Shed);
                    &[("retry-after", "1"), ("x-gateway-reason", "shed")]
                }
                Admission::Overflow => {
                    worker.stats.requests_overflow.inc();
                    count(ClassOutcome::Overflow);
                    &[("retry-after", "1"), ("x-gateway-reason", "overflow")]
                }
            };
            let owned: Vec<(String, String)> = refusal.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            reply(worker, local, respond, ex, 503, &owned, is_head);
        }
        Some(Action::Direct(d)) => {
            count(ClassOutcome::Served);
            let body = Bytes::from(d.body.clone().into_bytes());
            send_local(worker, local, respond, ex, d.status, &d.headers, body, is_head);
        }
        Some(Action::Redirect(r)) => {
            count(ClassOutcome::Served);
            let mut location = Vec::new();
            let scheme = if ctx.tls.is_some() { "https" } else { "http" };
            let url = response::RequestUrl {
                scheme,
                authority: authority.as_bytes(),
                path: parts.uri.path().as_bytes(),
                query: parts.uri.query().map(str::as_bytes),
            };
            response::redirect_location(&mut location, r, &url);
            let location = String::from_utf8_lossy(&location).into_owned();
            send_local(worker, local, respond, ex, r.status, &[("location".into(), location)], Bytes::new(), is_head);
        }
        None => reply(worker, local, respond, ex, 404, &[], is_head),
    }
}

/// Checks RFC 9113 §8.3 and the gateway's limits beyond what the h2 crate enforced already
/// (pseudo-header presence and order, connection-specific fields, uppercase names, TE,
/// content-length against DATA). `Err(status)` answers the stream with that status.
fn check(parts: &http::request::Parts, server: &gateway_config::Server) -> Result<(), u16> {
    if parts.method == Method::CONNECT {
        // No tunnels (extended CONNECT is not enabled).
        return Err(501);
    }
    let path = parts.uri.path();
    if !(path.starts_with('/') || (path == "*" && parts.method == Method::OPTIONS)) {
        return Err(400);
    }
    // §8.3.1: a Host field that names another authority than :authority is malformed.
    let host = parts.headers.get_all(http::header::HOST);
    if host.iter().count() > 1 {
        return Err(400);
    }
    match (parts.uri.authority(), parts.headers.get(http::header::HOST)) {
        (Some(a), Some(h)) if !a.as_str().as_bytes().eq_ignore_ascii_case(h.as_bytes()) => return Err(400),
        (None, None) => return Err(400),
        _ => {}
    }
    if parts.headers.len() > server.limits.max_headers {
        return Err(431);
    }
    // RFC 9113 §6.5.2 list size: names, values and 32 bytes per field.
    let list: usize = parts.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
    if list > server.http2.max_header_list_bytes as usize {
        return Err(431);
    }
    let mut lengths = parts.headers.get_all(http::header::CONTENT_LENGTH).iter();
    if let Some(v) = lengths.next() {
        let n = std::str::from_utf8(v.as_bytes()).ok().and_then(|s| s.parse::<u64>().ok()).ok_or(400u16)?;
        if lengths.next().is_some() {
            return Err(400);
        }
        if n > server.limits.max_body_bytes {
            return Err(413);
        }
    }
    Ok(())
}

/// The request's authority: `:authority`, else Host.
pub fn authority(parts: &http::request::Parts) -> Option<String> {
    if let Some(a) = parts.uri.authority() {
        return Some(a.as_str().to_owned());
    }
    parts.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned)
}

/// `name: value\r\n` lines (as the HTTP/1.1 writers produce them) as pairs.
fn header_lines(lines: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(lines)
        .split("\r\n")
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .collect()
}

/// Answers with a gateway-generated error or refusal (a short text body).
pub fn reply(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    status: u16,
    headers: &[(String, String)],
    is_head: bool,
) {
    let text = format!("{}\n", response::reason(status));
    let mut all = Vec::with_capacity(headers.len() + 1);
    all.extend_from_slice(headers);
    all.push(("content-type".to_owned(), "text/plain; charset=utf-8".to_owned()));
    send_local(worker, local, respond, ex, status, &all, Bytes::from(text.into_bytes()), is_head);
}

/// Sends a complete response generated by the gateway.
#[allow(clippy::too_many_arguments)]
pub fn send_local(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    status: u16,
    headers: &[(String, String)],
    body: Bytes,
    is_head: bool,
) {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder = builder.header(http::header::CONTENT_LENGTH, body.len());
    let Ok(mut resp) = builder.body(()) else {
        // INTERNAL_ERROR: a head the gateway built itself is invalid, a bug of the gateway
        // (every other reset of a client stream is CANCEL: the gateway gave up on it).
        respond.send_reset(h2::Reason::INTERNAL_ERROR);
        return;
    };
    crate::http::decor::Decor::new(&local.snap.config, ex.route, ex.tls).apply_h2(resp.headers_mut());
    ex.status = status;
    let empty = body.is_empty() || is_head;
    match respond.send_response(resp, empty) {
        Ok(mut tx) => {
            if !empty {
                let n = body.len() as u64;
                // Small and within the initial window: h2 queues it without waiting.
                if tx.send_data(body, true).is_ok() {
                    worker.stats.downstream_bytes_out.add(n);
                    ex.bytes_out += n;
                }
            }
        }
        Err(e) => tracing::debug!(error = %e, "HTTP/2 response not sent"),
    }
}
