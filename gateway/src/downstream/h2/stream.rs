//! One HTTP/2 stream: checks beyond what the codec enforces, then the pipeline, and the answer
//! written as HTTP/2 (proxied, direct, redirect or an error).

use std::rc::Rc;
use std::time::Instant;

use gateway_config::Action;
use gateway_h2::frame::Reason;
use gateway_h2::server::RequestHead;

use super::forward::H2Forward;
use super::server::ConnCtx;
use crate::codec::h2shared::H2Stream;
use crate::codec::response;
use crate::pipeline::answer::{Answer, Refusal};
use crate::pipeline::dispatch::{dispatch, Verdict};
use crate::pipeline::exchange::Exchange;
use crate::request::Request;
use crate::runtime::catch::{self, CatchUnwind};
use crate::worker::{Local, Worker};

/// How a stream starts.
pub enum Start {
    /// A request head the codec decoded and checked.
    Request(RequestHead),
    /// A head the codec could not take (431: its field list is over the limit).
    Refused(u16),
}

pub async fn handle(worker: Rc<Worker>, ctx: Rc<ConnCtx>, stream: H2Stream, start: Start) {
    worker.stats.requests_total.inc();
    worker.stats.requests_active.inc();
    // The stream's panic boundary: a panic in its pipeline ends this stream only. The pipeline's
    // future is boxed here, once: spawning a task moves its future several times, and this
    // one's state (the whole pipeline) would make every move a copy of kilobytes.
    let served = CatchUnwind::new(crate::runtime::boxed(|| serve_stream(&worker, &ctx, &stream, start))).await;
    if let Err(panic) = served {
        worker.stats.panics_stream.inc();
        tracing::error!(
            worker = worker.id,
            peer = %ctx.client.peer,
            panic = catch::message(&panic),
            "an HTTP/2 stream panicked: answered 500 or reset, the connection serves on"
        );
        // A 500 when no response head went out yet (a second one is refused), else a reset.
        match stream.send_head_with(500, true, |w| w.field(b"content-length", b"0")) {
            Ok(()) => worker.stats.count_status(500),
            Err(_) => stream.reset(Reason::INTERNAL_ERROR),
        }
    }
    drop(stream);
    worker.stats.requests_active.sub(1);
    ctx.active.set(ctx.active.get().saturating_sub(1));
    if ctx.active.get() == 0 {
        ctx.idle_since.set(Instant::now());
    }
}

/// Runs the pipeline on one stream, answers it and accounts it.
async fn serve_stream(worker: &Rc<Worker>, ctx: &Rc<ConnCtx>, stream: &H2Stream, start: Start) {
    let local = worker.local();
    let mut ex = Exchange::default();
    match start {
        Start::Request(head) => serve(worker, ctx, &local, &head, stream, &mut ex).await,
        Start::Refused(status) => {
            // Nothing of the head is known: accounted as a request without a route.
            worker.stats.requests_rejected.inc();
            reply(worker, &local, stream, &mut ex, &Refusal::status(status), false).await;
        }
    }
    let _ = ex.finish(worker, &local, ctx.client.peer.ip());
}

async fn serve(
    worker: &Rc<Worker>,
    ctx: &ConnCtx,
    local: &Rc<Local>,
    head: &RequestHead,
    stream: &H2Stream,
    ex: &mut Exchange,
) {
    let server = &local.snap.config.server;
    let authority = head.authority().or_else(|| head.get(b"host"));
    let req = Request::h2_native(head, authority, stream.is_end_stream(), &ctx.client);
    ex.begin(worker, &req, 0, server.deadline_header.as_deref());
    if let Err(status) = check(head, server) {
        worker.stats.requests_rejected.inc();
        reply(worker, local, stream, ex, &Refusal::status(status), req.is_head()).await;
        return;
    }
    match dispatch(worker, local, &req, ex).await {
        Verdict::Proxy(fwd) => {
            let mut down = H2Forward { ctx, stream, held: None, replay: None, ex };
            crate::pipeline::forward::forward(worker, local, &mut down, &req, fwd).await;
        }
        Verdict::Answer(a) => Box::pin(answer(worker, local, stream, ex, &req, a)).await,
    }
}

/// Writes an answer the gateway made itself.
async fn answer(
    worker: &Worker,
    local: &Local,
    stream: &H2Stream,
    ex: &mut Exchange,
    req: &Request<'_>,
    answer: Answer,
) {
    let is_head = req.is_head();
    match (answer, |i: usize| local.snap.config.routes.get(i).map(|r| &r.action)) {
        (Answer::Refuse(r), _) => reply(worker, local, stream, ex, &r, is_head).await,
        (Answer::Direct(i), action) => match action(i) {
            Some(Action::Direct(d)) => {
                let headers = d.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
                send_local(worker, local, stream, ex, d.status, headers, d.body.as_bytes(), is_head).await;
            }
            _ => reply(worker, local, stream, ex, &Refusal::status(500), is_head).await,
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
                let headers = std::iter::once((&b"location"[..], location.as_slice()));
                send_local(worker, local, stream, ex, r.status, headers, b"", is_head).await;
            }
            _ => reply(worker, local, stream, ex, &Refusal::status(500), is_head).await,
        },
    }
}

/// Checks RFC 9113 §8.3 and the gateway's limits beyond what the codec enforced already
/// (target and authority syntax, Host against :authority, field count, body size).
/// `Err(status)` answers the stream with that status.
fn check(head: &RequestHead, server: &gateway_config::Server) -> Result<(), u16> {
    let method = head.method();
    if method == b"CONNECT" {
        // No tunnels (extended CONNECT is not enabled).
        return Err(501);
    }
    let path = head.path().unwrap_or_default();
    if !(gateway_h1::valid_origin_form(path) || (path == b"*" && method == b"OPTIONS")) {
        return Err(400);
    }
    // §8.3.1: a Host field that names another authority than :authority is malformed.
    let mut hosts = head.iter().filter(|(n, _)| *n == b"host").map(|(_, v)| v);
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(400);
    }
    match (head.authority(), host) {
        (Some(a), Some(h)) if !a.eq_ignore_ascii_case(h) => return Err(400),
        (None, None) => return Err(400),
        (Some(a), _) | (None, Some(a)) if gateway_h1::authority_len(a).is_none() => return Err(400),
        _ => {}
    }
    if head.fields.len() > server.limits.max_headers {
        return Err(431);
    }
    if head.content_length.is_some_and(|n| n > server.limits.max_body_bytes) {
        return Err(413);
    }
    Ok(())
}

/// Answers with a gateway-generated error or refusal (a short text body).
pub async fn reply(
    worker: &Worker,
    local: &Local,
    stream: &H2Stream,
    ex: &mut Exchange,
    refusal: &Refusal,
    is_head: bool,
) {
    let text = format!("{}\n", response::reason(refusal.status));
    let pairs: Vec<(String, &str)> = refusal.pairs().collect();
    let headers = pairs
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .chain(std::iter::once((&b"content-type"[..], &b"text/plain; charset=utf-8"[..])));
    send_local(worker, local, stream, ex, refusal.status, headers, text.as_bytes(), is_head).await;
}

/// Sends a complete response generated by the gateway.
#[allow(clippy::too_many_arguments)]
async fn send_local<'h>(
    worker: &Worker,
    local: &Local,
    stream: &H2Stream,
    ex: &mut Exchange,
    status: u16,
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    body: &[u8],
    is_head: bool,
) {
    let decor = crate::pipeline::decor::Decor::new(&local.snap.config, ex.route, ex.tls);
    ex.status = status;
    let empty = body.is_empty() || is_head;
    let length = body.len().to_string();
    let sent = stream.send_head_with(status, empty, |w| {
        for (name, value) in headers {
            if !decor.replaces(name) && !name.eq_ignore_ascii_case(b"content-length") {
                w.field(name, value);
            }
        }
        w.field(b"content-length", length.as_bytes());
        decor.push_h2(w);
    });
    if let Err(e) = sent {
        tracing::debug!(error = %e, "HTTP/2 response not sent");
        return;
    }
    if !empty {
        let n = body.len() as u64;
        let timeout = local.snap.config.server.timeouts.body_io;
        match crate::runtime::timeout(timeout, stream.send_data(body, true, None)).await {
            Ok(Ok(())) => {
                worker.stats.downstream_bytes_out.add(n);
                ex.bytes_out += n;
            }
            // CANCEL: the client kept its window closed; the gateway gives up on the stream.
            Err(_) => stream.reset(Reason::CANCEL),
            Ok(Err(_)) => {}
        }
    }
}
