//! One HTTP/2 stream: checks beyond what the h2 crate enforces, then the pipeline, and the
//! answer written as HTTP/2 (proxied, direct, redirect or an error).

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use gateway_config::Action;
use http::{Method, Response, StatusCode};

use super::forward::H2Forward;
use super::server::ConnCtx;
use crate::codec::response;
use crate::pipeline::answer::{Answer, Refusal};
use crate::pipeline::dispatch::{dispatch, Verdict};
use crate::pipeline::exchange::Exchange;
use crate::request::Request;
use crate::runtime::catch::{self, CatchUnwind};
use crate::worker::{Local, Worker};

pub async fn handle(
    worker: Rc<Worker>,
    ctx: Rc<ConnCtx>,
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    worker.stats.requests_total.inc();
    worker.stats.requests_active.inc();
    // The stream's panic boundary: a panic in its pipeline ends this stream only. The pipeline's
    // future is boxed here, once: spawning a task moves its future several times, and this
    // one's state (the whole pipeline) would make every move a copy of kilobytes.
    let served = CatchUnwind::new(Box::pin(serve_stream(&worker, &ctx, req, &mut respond))).await;
    if let Err(panic) = served {
        worker.stats.panics_stream.inc();
        tracing::error!(
            worker = worker.id,
            peer = %ctx.client.peer,
            panic = catch::message(&panic),
            "an HTTP/2 stream panicked: answered 500 or reset, the connection serves on"
        );
        // A 500 when no response head went out yet (h2 refuses a second one), else a reset.
        let head =
            Response::builder().status(StatusCode::INTERNAL_SERVER_ERROR).header(http::header::CONTENT_LENGTH, 0);
        match head.body(()).map(|h| respond.send_response(h, true)) {
            Ok(Ok(_)) => worker.stats.count_status(500),
            _ => respond.send_reset(h2::Reason::INTERNAL_ERROR),
        }
    }
    worker.stats.requests_active.sub(1);
    ctx.active.set(ctx.active.get().saturating_sub(1));
    if ctx.active.get() == 0 {
        ctx.idle_since.set(Instant::now());
    }
}

/// Runs the pipeline on one stream, answers it and accounts it.
async fn serve_stream(
    worker: &Rc<Worker>,
    ctx: &Rc<ConnCtx>,
    req: http::Request<h2::RecvStream>,
    respond: &mut h2::server::SendResponse<Bytes>,
) {
    let local = worker.local();
    let (parts, body) = req.into_parts();
    let mut ex = Exchange::default();
    serve(worker, ctx, &local, &parts, body, respond, &mut ex).await;
    let _ = ex.finish(worker, &local, ctx.client.peer.ip());
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
    let authority = parts
        .uri
        .authority()
        .map(|a| a.as_str().as_bytes())
        .or_else(|| parts.headers.get(http::header::HOST).map(http::HeaderValue::as_bytes));
    let req = Request::h2(parts, authority, body.is_end_stream(), &ctx.client);
    ex.begin(worker, &req, 0, server.deadline_header.as_deref());
    if let Err(status) = check(parts, server) {
        worker.stats.requests_rejected.inc();
        reply(worker, local, respond, ex, &Refusal::status(status), req.is_head());
        return;
    }
    match dispatch(worker, local, &req, ex).await {
        Verdict::Proxy(fwd) => {
            let mut down = H2Forward { ctx, respond, body: Some(body), held: None, ex };
            crate::pipeline::forward::forward(worker, local, &mut down, &req, fwd).await;
        }
        Verdict::Answer(a) => answer(worker, local, respond, ex, &req, a),
    }
}

/// Writes an answer the gateway made itself.
fn answer(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    req: &Request<'_>,
    answer: Answer,
) {
    let is_head = req.is_head();
    match (answer, |i: usize| local.snap.config.routes.get(i).map(|r| &r.action)) {
        (Answer::Refuse(r), _) => reply(worker, local, respond, ex, &r, is_head),
        (Answer::Direct(i), action) => match action(i) {
            Some(Action::Direct(d)) => {
                let body = Bytes::from(d.body.clone().into_bytes());
                let headers = d.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
                send_local(worker, local, respond, ex, d.status, headers, body, is_head);
            }
            _ => reply(worker, local, respond, ex, &Refusal::status(500), is_head),
        },
        (Answer::Redirect(i), action) => match action(i) {
            Some(Action::Redirect(r)) => {
                let mut location = Vec::new();
                let url = response::RequestUrl {
                    scheme: req.scheme(),
                    authority: req.authority.unwrap_or_default(),
                    path: req.path,
                    query: req.query,
                };
                response::redirect_location(&mut location, r, &url);
                let location = String::from_utf8_lossy(&location);
                let headers = std::iter::once(("location", &*location));
                send_local(worker, local, respond, ex, r.status, headers, Bytes::new(), is_head);
            }
            _ => reply(worker, local, respond, ex, &Refusal::status(500), is_head),
        },
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

/// Answers with a gateway-generated error or refusal (a short text body).
pub fn reply(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    refusal: &Refusal,
    is_head: bool,
) {
    let text = format!("{}\n", response::reason(refusal.status));
    let pairs: Vec<(String, &str)> = refusal.pairs().collect();
    let headers = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .chain(std::iter::once(("content-type", "text/plain; charset=utf-8")));
    send_local(worker, local, respond, ex, refusal.status, headers, Bytes::from(text.into_bytes()), is_head);
}

/// Sends a complete response generated by the gateway.
#[allow(clippy::too_many_arguments)]
fn send_local<'h>(
    worker: &Worker,
    local: &Local,
    respond: &mut h2::server::SendResponse<Bytes>,
    ex: &mut Exchange,
    status: u16,
    headers: impl Iterator<Item = (&'h str, &'h str)>,
    body: Bytes,
    is_head: bool,
) {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder = builder.header(http::header::CONTENT_LENGTH, body.len());
    let Ok(mut resp) = builder.body(()) else {
        // INTERNAL_ERROR: a head the gateway built itself is invalid, a bug of the gateway
        // (every other reset of a client stream is CANCEL: the gateway gave up on it).
        respond.send_reset(h2::Reason::INTERNAL_ERROR);
        return;
    };
    crate::pipeline::decor::Decor::new(&local.snap.config, ex.route, ex.tls).apply_h2(resp.headers_mut());
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
