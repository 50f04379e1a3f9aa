//! Responses relayed to an HTTP/1.1 client: from an HTTP/1.1 upstream (the head rewritten,
//! the body passed through or re-chunked) and from an HTTP/2 upstream (chunked when it gave no
//! length; trailers in the last chunk).

use super::{Conn, Next};
use crate::codec::body::{self, Side, Source, TransferError};
use crate::codec::chunked::encode_chunk;
use crate::codec::h1::{self, HeadScratch, RequestHead, ResponseFraming, ResponseHead};
use crate::codec::response::{self, push_num, reason};
use crate::pipeline::decor::Decor;
use crate::pipeline::forward::{H1Response, Try};
use crate::pipeline::h2up;
use crate::runtime::io::{write_from, write_range_expiry};
use crate::upstream::EndpointState;

/// Sends the response head downstream and streams the body; pools the upstream connection
/// when the exchange ended cleanly.
pub(super) async fn from_h1(
    t: &Try<'_>,
    conn: &mut Conn,
    head: &RequestHead,
    endpoint: &EndpointState,
    from: Box<H1Response>,
) -> Next {
    let H1Response { mut up, mut ubuf, mut upos, head: resp, scratch } = *from;
    let (worker, local, action) = (t.worker, t.local, t.action);
    let server = &local.snap.config.server;
    let mut wbuf = worker.buffers.take();
    let client_11 = head.version_minor == 1;
    // How the body reaches the client, and whether the client connection must close after it.
    let (source, chunk_out, must_close) = match resp.framing {
        ResponseFraming::None => (None, false, false),
        ResponseFraming::Length(n) => (Some(Source::Length(n)), false, false),
        ResponseFraming::Chunked => (Some(Source::Chunked), client_11, !client_11),
        ResponseFraming::UntilClose => (Some(Source::UntilClose), client_11, !client_11),
    };
    let close = !head.keep_alive || must_close || conn.closing();
    {
        let buf = ubuf.get(upos..).unwrap_or_default();
        let decor = Decor::for_relay(&local.snap.config, t, &conn.ex);
        build_response_head(&mut wbuf, buf, &resp, &scratch, &decor, chunk_out, close, client_11);
    }
    worker.give_scratch(scratch);
    upos += resp.head_len;
    conn.ex.status = resp.status;
    let ok = match source {
        None => {
            let n = wbuf.len() as u64;
            let expiry = worker.idle_timer.after(server.timeouts.body_io);
            let range = 0..wbuf.len();
            let (res, b) = write_range_expiry(&mut conn.stream, std::mem::take(&mut wbuf), range, expiry).await;
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
            let mut head_sent = false;
            let buffered = ubuf.len().saturating_sub(upos) as u64;
            if let Some((start, take)) = head_before_body(&mut ubuf, upos, &wbuf, source, chunk_out) {
                head_sent = true;
                wbuf.clear();
                let end = upos + take;
                let expiry = worker.idle_timer.after(server.timeouts.body_io);
                let (res, b) =
                    write_range_expiry(&mut conn.stream, std::mem::take(&mut ubuf), start..end, expiry).await;
                ubuf = b;
                upos = end;
                sent = res.map(|()| take as u64).map_err(TransferError::Write);
                if let Source::Length(n) = source {
                    source = Source::Length(n.saturating_sub(take as u64));
                }
            } else if let (Source::Length(n), false, true) = (source, chunk_out, source_fits(source, buffered)) {
                // A whole body no longer than the head (a small answer): copied behind the head,
                // one write, no streaming.
                let end = upos + n as usize;
                wbuf.extend_from_slice(ubuf.get(upos..end).unwrap_or_default());
                let expiry = worker.idle_timer.after(server.timeouts.body_io);
                let range = 0..wbuf.len();
                let (res, b) = write_range_expiry(&mut conn.stream, std::mem::take(&mut wbuf), range, expiry).await;
                wbuf = b;
                upos = end;
                head_sent = true;
                sent = res.map(|()| n).map_err(TransferError::Write);
                source = Source::Length(0);
            }
            let result = match sent {
                Ok(done) if source != Source::Length(0) || !head_sent => {
                    let mut scratch = worker.buffers.take();
                    let side = Side { stream: &mut up.stream, buf: &mut ubuf, pos: &mut upos };
                    // Boxed: only a body that did not come whole with the head streams, and the
                    // transfer's state would otherwise size every request's future.
                    let result = Box::pin(body::transfer(
                        side,
                        Some(body::Dest::Stream(&mut conn.stream)),
                        &mut wbuf,
                        source,
                        chunk_out,
                        &limits,
                        &mut scratch,
                    ))
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
    worker.buffers.give_response(ubuf);
    worker.buffers.give(wbuf);
    if reusable {
        endpoint.pool.put(up, &worker.buffers, &worker.armed);
    }
    if ok && !close {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

/// Whether a `Content-Length` body is all in the `buffered` bytes.
fn source_fits(source: Source, buffered: u64) -> bool {
    matches!(source, Source::Length(n) if n <= buffered)
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

/// Sends an HTTP/2 upstream's response to the HTTP/1.1 client: chunked when it gave no length
/// (an HTTP/1.0 client then reads until close), trailers in the last chunk.
pub(super) async fn from_h2(
    t: &Try<'_>,
    conn: &mut Conn,
    head: &RequestHead,
    resp: http::Response<h2::RecvStream>,
) -> Next {
    let (worker, local) = (t.worker, t.local);
    let server = &local.snap.config.server;
    let (parts, mut rx) = resp.into_parts();
    let status = parts.status.as_u16();
    conn.ex.status = status;
    let client_11 = head.version_minor == 1;
    let length = parts.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let bodyless = t.req.is_head() || status == 204 || status == 304 || (100..200).contains(&status);
    let chunked = !bodyless && length.is_none() && client_11;
    let close = !head.keep_alive || conn.closing() || (!bodyless && length.is_none() && !client_11);
    let mut out = worker.buffers.take();
    out.extend_from_slice(b"HTTP/1.1 ");
    push_num(&mut out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    let decor = Decor::for_relay(&local.snap.config, t, &conn.ex);
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
        while let Some(next) = crate::runtime::timeout(t.action.timeout, rx.data()).await.ok().flatten() {
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
    if ok && !close {
        Next::KeepAlive
    } else {
        Next::Close
    }
}

/// Writes the response head the client sees: the upstream's status and end-to-end headers,
/// the gateway's own fields (`decor`, replacing the upstream's of the same name), framing
/// chosen by the gateway and its own Connection header.
#[allow(clippy::too_many_arguments)]
fn build_response_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    resp: &ResponseHead,
    scratch: &HeadScratch,
    decor: &Decor<'_>,
    chunk_out: bool,
    close: bool,
    client_11: bool,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_num(out, u64::from(resp.status));
    out.push(b' ');
    out.extend_from_slice(buf.get(resp.reason.clone()).unwrap_or_default());
    out.extend_from_slice(b"\r\n");
    // A bodiless response passes the upstream's Content-Length (the length of the selected
    // representation for HEAD and 304), except where RFC 9110 section 8.6 forbids the field:
    // 1xx and 204.
    let pass_length = resp.framing == ResponseFraming::None && resp.status >= 200 && resp.status != 204;
    push_fields(out, buf, scratch, decor, pass_length);
    match resp.framing {
        ResponseFraming::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            push_num(out, n);
            out.extend_from_slice(b"\r\n");
        }
        ResponseFraming::Chunked | ResponseFraming::UntilClose if chunk_out => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        }
        _ => {}
    }
    response::connection_header(out, close, !client_11);
    out.extend_from_slice(b"\r\n");
}

/// Writes the `101 Switching Protocols` head the client sees for a WebSocket tunnel: the
/// upstream's reason and end-to-end fields (Sec-WebSocket-Accept and friends), then the
/// gateway's own fields (`decor`) and `connection: upgrade` and `upgrade: websocket`.
pub(super) fn build_switch_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    resp: &ResponseHead,
    scratch: &HeadScratch,
    decor: &Decor<'_>,
) {
    out.extend_from_slice(b"HTTP/1.1 101 ");
    out.extend_from_slice(buf.get(resp.reason.clone()).unwrap_or_default());
    out.extend_from_slice(b"\r\n");
    push_fields(out, buf, scratch, decor, false);
    out.extend_from_slice(b"connection: upgrade\r\nupgrade: websocket\r\n\r\n");
}

/// The upstream's end-to-end fields (`Content-Length` only when `length`), then the
/// gateway's own (`decor`, replacing the upstream's of the same name).
fn push_fields(out: &mut Vec<u8>, buf: &[u8], scratch: &HeadScratch, decor: &Decor<'_>, length: bool) {
    for h in scratch.headers() {
        let name = h.name(buf);
        if h1::is_hop_by_hop(name, buf, scratch)
            || (!length && gateway_h1::eq_lower(name, b"content-length"))
            || decor.replaces(name)
        {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value(buf));
        out.extend_from_slice(b"\r\n");
    }
    decor.push_h1(out);
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
