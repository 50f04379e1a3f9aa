//! The gateway's own answers written as HTTP/1.1: errors and refusals, direct responses and
//! redirects.

use std::rc::Rc;

use gateway_config::Action;

use super::{discard_body, Conn, Next, DISCARD_LIMIT};
use crate::codec::h1::{BodyFraming, RequestHead};
use crate::codec::response;
use crate::pipeline::answer::{Answer, Refusal};
use crate::pipeline::decor::Decor;
use crate::request::{Request, Version};
use crate::runtime::io::write_from;
use crate::worker::{Local, Worker};

/// Answers without an upstream. A small request body is read and discarded to keep the
/// connection; a large one closes it.
pub(super) async fn answer(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    local: &Rc<Local>,
    req: &Request<'_>,
    head: &RequestHead,
    answer: Answer,
) -> Next {
    let snap = &local.snap;
    let body_small = match head.body {
        BodyFraming::None | BodyFraming::Chunked => true,
        BodyFraming::Length(n) => n <= DISCARD_LIMIT,
    };
    let mut close = !head.keep_alive || !body_small || conn.closing();
    let ka10 = req.version == Version::Http10 && !close;
    let mut out = worker.buffers.take();
    let status = match answer {
        Answer::Refuse(refusal) => {
            response::write_refusal(&mut out, refusal.status, &refusal.fields, close, req.is_head());
            refusal.status
        }
        Answer::Direct(i) => match snap.routes.direct(i) {
            Some(p) => {
                p.write(&mut out, close, ka10, req.is_head());
                p.status
            }
            None => internal_error(&mut out, &mut close, req),
        },
        Answer::Redirect(i) => match snap.config.routes.get(i).map(|r| &r.action) {
            Some(Action::Redirect(r)) => {
                let url = response::RequestUrl {
                    scheme: req.scheme(),
                    authority: req.authority.unwrap_or_default(),
                    path: req.path,
                    query: req.query,
                };
                response::write_redirect(&mut out, r, &url, close, ka10);
                r.status
            }
            _ => internal_error(&mut out, &mut close, req),
        },
    };
    Decor::new(&snap.config, conn.ex.route, conn.ex.tls).insert_h1(&mut out, 0);
    // Discard the request body (bounded) so the next request on this connection is in sync.
    if !close && head.body != BodyFraming::None && !discard_body(worker, conn, head.body, &snap.config.server).await {
        worker.buffers.give(out);
        return Next::Close;
    }
    if send(worker, conn, local, out, status).await && !close {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

/// A route whose action does not match its compiled table: a bug of the gateway.
fn internal_error(out: &mut Vec<u8>, close: &mut bool, req: &Request<'_>) -> u16 {
    response::write_error(out, 500, true, req.is_head());
    *close = true;
    500
}

/// Writes a gateway error (with `connection: close` when `close`); whether it was written.
pub(super) async fn write_refusal(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    local: &Local,
    refusal: &Refusal,
    close: bool,
    is_head: bool,
) -> bool {
    let mut out = worker.buffers.take();
    response::write_refusal(&mut out, refusal.status, &refusal.fields, close, is_head);
    Decor::new(&local.snap.config, conn.ex.route, conn.client.tls.is_some()).insert_h1(&mut out, 0);
    send(worker, conn, local, out, refusal.status).await
}

/// Writes a complete answer the gateway made and accounts for it.
async fn send(worker: &Rc<Worker>, conn: &mut Conn, local: &Local, out: Vec<u8>, status: u16) -> bool {
    conn.ex.status = status;
    let n = out.len() as u64;
    let (res, out) = write_from(&mut conn.stream, out, 0, local.snap.config.server.timeouts.body_io).await;
    worker.buffers.give(out);
    worker.stats.downstream_bytes_out.add(n);
    conn.ex.bytes_out += n;
    res.is_ok()
}
