//! An HTTP/1.1 client's request forwarded to an HTTP/2 upstream: the head becomes an h2
//! request, the body is streamed into the h2 stream within its window, and the response comes
//! back as HTTP/1.1 (chunked when the upstream gave no length; trailers in the last chunk).

use std::rc::Rc;

use bytes::Bytes;
use gateway_config::ProxyAction;
use monoio::time::Instant;

use super::h2up::{self, Forwarded};
use super::{reply, UpstreamError};
use crate::http::body::{self, Dest, Side, Source, TransferError};
use crate::http::chunked::encode_chunk;
use crate::http::conn::{Downstream, Next};
use crate::http::h1::{self, BodyFraming, RequestHead};
use crate::http::response::{push_num, reason};
use crate::runtime::io::write_from;
use crate::runtime::worker::{Local, Worker};
use crate::upstream::h2pool::H2Endpoint;

/// Forwards over HTTP/2; `Err` only when nothing was answered to the client yet (the caller
/// answers, or retries): `Http1Only` (ALPN chose HTTP/1.1; `conn.rpos` is back at the head) or
/// a failure before the response head. `try_deadline` bounds this try, `deadline` the request
/// (what remains of it is sent upstream in the deadline fields).
#[allow(clippy::too_many_arguments)]
pub(super) async fn forward(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Rc<Local>,
    head: &RequestHead,
    action: &ProxyAction,
    h2ep: &Rc<H2Endpoint>,
    try_deadline: Instant,
    deadline: Instant,
) -> Result<(Next, Option<u16>), UpstreamError> {
    let server = &local.snap.config.server;
    let is_head = head.method == h1::Method::Head;
    let mut req = match request(worker, conn, local, head, action, h2ep) {
        Some(r) => r,
        None => return Ok((reply(worker, conn, local, head, 400, b"", true).await, None)),
    };
    if conn.ex.deadline.grpc || server.deadline_header.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        crate::http::deadline::set_h2(
            req.headers_mut(),
            conn.ex.deadline.grpc,
            server.deadline_header.as_deref(),
            left,
        );
    }
    conn.rpos += head.head_len;
    let no_body = head.body == BodyFraming::None;
    let sent_at = Instant::now();
    let result = exchange(worker, conn, local, head, h2ep, req, no_body, try_deadline).await;
    conn.ex.upstream_elapsed = Some(sent_at.elapsed());
    let (slot, resp) = match result {
        Ok(x) => x,
        Err(UpstreamError::Http1Only) => {
            conn.rpos -= head.head_len;
            return Err(UpstreamError::Http1Only);
        }
        Err(e) => return Err(e),
    };
    let (parts, mut rx) = resp.into_parts();
    let status = parts.status.as_u16();
    conn.ex.status = status;
    let client_11 = head.version_minor == 1;
    let length = parts.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let bodyless = is_head || status == 204 || status == 304 || (100..200).contains(&status);
    let chunked = !bodyless && length.is_none() && client_11;
    let close = !head.keep_alive || conn.closing() || (!bodyless && length.is_none() && !client_11);
    let mut out = worker.buffers.take();
    out.extend_from_slice(b"HTTP/1.1 ");
    push_num(&mut out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    let decor = crate::http::decor::Decor::new(&local.snap.config, conn.ex.route, conn.ex.tls);
    for (name, value) in &parts.headers {
        if h2up::connection_specific(name.as_str())
            || name == "te"
            || name == "content-length"
            || decor.replaces(name.as_str().as_bytes())
        {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    decor.push_h1(&mut out);
    if let Some(n) = length {
        out.extend_from_slice(b"content-length: ");
        push_num(&mut out, n);
        out.extend_from_slice(b"\r\n");
    } else if chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    let mut ok = true;
    let mut moved = out.len() as u64;
    let (res, b) = write_from(&mut conn.stream, std::mem::take(&mut out), 0, server.timeouts.body_io).await;
    out = b;
    ok &= res.is_ok();
    if ok && !bodyless {
        while let Some(next) = monoio::time::timeout(action.timeout, rx.data()).await.ok().flatten() {
            let Ok(data) = next else {
                ok = false;
                break;
            };
            out.clear();
            if chunked {
                encode_chunk(&data, &mut out);
            } else {
                out.extend_from_slice(&data);
            }
            let n = out.len() as u64;
            let (res, b) = write_from(&mut conn.stream, std::mem::take(&mut out), 0, server.timeouts.body_io).await;
            out = b;
            if res.is_err() {
                ok = false;
                break;
            }
            moved += n;
            let _ = rx.flow_control().release_capacity(data.len());
        }
        if ok && chunked {
            out.clear();
            out.extend_from_slice(b"0\r\n");
            if let Ok(Some(trailers)) = rx.trailers().await {
                for (name, value) in &trailers {
                    out.extend_from_slice(name.as_str().as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
            }
            out.extend_from_slice(b"\r\n");
            moved += out.len() as u64;
            let (res, b) = write_from(&mut conn.stream, std::mem::take(&mut out), 0, server.timeouts.body_io).await;
            out = b;
            ok &= res.is_ok();
        }
        // Without a length, the body's end must have been reached (else the client sees a short body).
        ok &= rx.is_end_stream() || length.is_some();
    }
    worker.buffers.give(out);
    worker.stats.downstream_bytes_out.add(moved);
    conn.ex.bytes_out += moved;
    drop(slot);
    let next = if ok && !close { Next::KeepAlive } else { Next::Close };
    Ok((next, Some(status)))
}

/// The HTTP/2 request for the HTTP/1.1 head at `conn.rbuf[conn.rpos..]`.
fn request(
    worker: &Worker,
    conn: &Downstream,
    local: &Local,
    head: &RequestHead,
    action: &ProxyAction,
    h2ep: &H2Endpoint,
) -> Option<http::Request<()>> {
    let server = &local.snap.config.server;
    let scratch = crate::http::conn::request_scratch(worker, conn, server);
    let buf = conn.rbuf.get(conn.rpos..).unwrap_or_default();
    let method = http::Method::from_bytes(buf.get(head.method_range.clone())?).ok()?;
    let tls = local.clusters.get(action.cluster).is_some_and(|c| c.tls.is_some());
    let authority = match head.authority.clone().and_then(|a| buf.get(a)) {
        Some(a) => String::from_utf8_lossy(a).into_owned(),
        None => local
            .snap
            .config
            .clusters
            .get(action.cluster)
            .map_or_else(|| h2ep.address().to_string(), |c| c.name.clone()),
    };
    let mut target = String::from_utf8_lossy(buf.get(head.path.clone())?).into_owned();
    if let Some(q) = head.query.clone().and_then(|q| buf.get(q)) {
        target.push('?');
        target.push_str(&String::from_utf8_lossy(q));
    }
    let scheme = if tls { "https" } else { "http" };
    let uri = http::Uri::try_from(format!("{scheme}://{authority}{target}")).ok()?;
    let mut req = http::Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    let identity =
        conn.tls.as_ref().map(|t| (t.identity_header.as_str(), t.identity.as_ref().map(|i| i.header_value.as_str())));
    let fwd = Forwarded {
        peer_ip: &conn.peer_ip,
        tls: conn.tls.is_some(),
        via: &server.via,
        received: if head.version_minor == 0 { "1.0" } else { "1.1" },
        request_id: &conn.ex.request_id,
        strip: local.snap.config.overload.priority_header.as_deref(),
        identity,
    };
    let fields = scratch
        .headers()
        .iter()
        .filter(|h| !h1::is_hop_by_hop(h.name(buf), buf, &scratch))
        .map(|h| (h.name(buf), h.value(buf)));
    h2up::forward_headers(req.headers_mut(), fields, &fwd);
    Some(req)
}

/// Sends the request and its body; returns the stream slot and the response head.
#[allow(clippy::too_many_arguments)]
async fn exchange(
    worker: &Rc<Worker>,
    conn: &mut Downstream,
    local: &Local,
    head: &RequestHead,
    h2ep: &Rc<H2Endpoint>,
    req: http::Request<()>,
    no_body: bool,
    deadline: Instant,
) -> Result<(crate::upstream::h2pool::H2Stream, http::Response<h2::RecvStream>), UpstreamError> {
    let server = &local.snap.config.server;
    let (slot, response, tx) = h2up::send_head(worker, h2ep, req, no_body, deadline).await?;
    if let Some(mut tx) = tx {
        let source = match head.body {
            BodyFraming::Length(n) => Source::Length(n),
            _ => Source::Chunked,
        };
        if head.expect_continue && conn.rbuf.len() == conn.rpos {
            let (res, _) =
                write_from(&mut conn.stream, b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), 0, server.timeouts.body_io)
                    .await;
            res.map_err(|e| UpstreamError::ClientBody(TransferError::Write(e)))?;
            conn.ex.continued = true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let limits = body::Limits {
            max_bytes: server.limits.max_body_bytes,
            read_timeout: server.timeouts.body_io,
            write_timeout: left,
        };
        let mut scratch = worker.buffers.take();
        let mut out = Vec::new();
        let side = Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos };
        let result =
            body::transfer(side, Some(Dest::H2(&mut tx, None)), &mut out, source, false, &limits, &mut scratch).await;
        worker.buffers.give(scratch);
        match result {
            Ok(n) => {
                worker.stats.downstream_bytes_in.add(n);
                conn.ex.bytes_in += n;
                tx.send_data(Bytes::new(), true).map_err(|e| UpstreamError::Send(std::io::Error::other(e)))?;
            }
            Err(TransferError::Write(e)) => return Err(UpstreamError::Send(e)),
            Err(e) => {
                tx.send_reset(h2::Reason::CANCEL);
                return Err(UpstreamError::ClientBody(e));
            }
        }
    }
    let (minor, continued, timeout) = (head.version_minor, conn.ex.continued, server.timeouts.body_io);
    let mut interim = super::interim::Interim::h1(&mut conn.stream, minor, continued, timeout);
    let resp = h2up::response_head(worker, response, &mut interim, deadline).await?;
    Ok((slot, resp))
}
