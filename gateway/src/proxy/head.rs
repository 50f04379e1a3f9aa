//! The heads the gateway writes when forwarding: the upstream request head and the downstream
//! response head.

use crate::http::decor::Decor;
use crate::http::h1::{self, BodyFraming, HeadScratch, RequestHead, ResponseFraming, ResponseHead};
use crate::http::response::{self, push_num};

/// Who forwards the request: the client address (X-Forwarded-For), the gateway's Via name and
/// the request id.
pub struct RequestIdentity<'a> {
    pub peer: &'a [u8],
    pub via: &'a str,
    pub request_id: &'a [u8],
    /// The priority header (never forwarded).
    pub strip: Option<&'a str>,
    /// The configured deadline header; it and `grpc-timeout` are never forwarded as received
    /// (the proxy appends what remains of the deadline on each try).
    pub deadline_header: Option<&'a str>,
    /// The Host to send when the client sent none (HTTP/1.0): the cluster's name, as nginx
    /// sends its upstream's name.
    pub default_host: &'a str,
    /// "http" or "https", for X-Forwarded-Proto.
    pub proto: &'a str,
    /// On TLS listeners: the client-identity header (never taken from the client) and the
    /// verified identity to send in it, if any.
    pub identity: Option<(&'a str, Option<&'a str>)>,
    /// Ask the upstream to switch to WebSocket (`connection: upgrade`, `upgrade: websocket`);
    /// only for a checked handshake on a route that allows it.
    pub websocket: bool,
}

/// Writes the request head the upstream sees: origin-form target, Host, the client's
/// end-to-end headers, X-Forwarded-For/-Proto, Via, X-Request-Id and canonical framing.
/// Hop-by-hop headers (and every header named in Connection), Expect, client-sent
/// X-Forwarded-Proto and the client's X-Request-Id (replaced by the validated id) are dropped.
/// A WebSocket handshake gets the gateway's own `connection: upgrade` and `upgrade: websocket`.
pub fn build_request_head(
    out: &mut Vec<u8>,
    buf: &[u8],
    head: &RequestHead,
    scratch: &HeadScratch,
    ids: &RequestIdentity<'_>,
) {
    out.extend_from_slice(buf.get(head.method_range.clone()).unwrap_or_default());
    out.push(b' ');
    out.extend_from_slice(buf.get(head.path.clone()).unwrap_or(b"/"));
    if let Some(q) = head.query.clone().and_then(|q| buf.get(q)) {
        out.push(b'?');
        out.extend_from_slice(q);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // HTTP/1.1 upstreams require a Host (RFC 9112 §3.2).
    let authority = head.authority.clone().and_then(|a| buf.get(a)).unwrap_or(ids.default_host.as_bytes());
    out.extend_from_slice(b"host: ");
    out.extend_from_slice(authority);
    out.extend_from_slice(b"\r\n");
    let is_xff = |name: &[u8]| name.eq_ignore_ascii_case(b"x-forwarded-for");
    for h in scratch.headers() {
        let name = h.name(buf);
        if h1::is_hop_by_hop(name, buf, scratch)
            || name.eq_ignore_ascii_case(b"host")
            || name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"expect")
            || name.eq_ignore_ascii_case(b"x-forwarded-proto")
            || name.eq_ignore_ascii_case(b"x-request-id")
            || ids.strip.is_some_and(|h| name.eq_ignore_ascii_case(h.as_bytes()))
            || crate::http::deadline::Incoming::is_deadline_field(name, ids.deadline_header)
            || name.eq_ignore_ascii_case(super::mirror::MARKER_NAME.as_bytes())
            || ids.identity.is_some_and(|(h, _)| name.eq_ignore_ascii_case(h.as_bytes()))
            || is_xff(name)
        {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value(buf));
        out.extend_from_slice(b"\r\n");
    }
    // All X-Forwarded-For fields form one list; the client's address is appended to it.
    out.extend_from_slice(b"x-forwarded-for: ");
    for h in scratch.headers().iter().filter(|h| is_xff(h.name(buf))) {
        let v = h.value(buf);
        if !v.is_empty() {
            out.extend_from_slice(v);
            out.extend_from_slice(b", ");
        }
    }
    out.extend_from_slice(ids.peer);
    out.extend_from_slice(b"\r\nx-forwarded-proto: ");
    out.extend_from_slice(ids.proto.as_bytes());
    out.extend_from_slice(b"\r\nvia: 1.1 ");
    out.extend_from_slice(ids.via.as_bytes());
    out.extend_from_slice(b"\r\nx-request-id: ");
    out.extend_from_slice(ids.request_id);
    out.extend_from_slice(b"\r\n");
    if let Some((name, Some(value))) = ids.identity {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if ids.websocket {
        out.extend_from_slice(b"connection: upgrade\r\nupgrade: websocket\r\n");
    }
    match head.body {
        BodyFraming::None => {}
        BodyFraming::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            push_num(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodyFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes the response head the client sees: the upstream's status and end-to-end headers,
/// the gateway's own fields (`decor`, replacing the upstream's of the same name), framing
/// chosen by the gateway and its own Connection header.
#[allow(clippy::too_many_arguments)]
pub fn build_response_head(
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
    for h in scratch.headers() {
        let name = h.name(buf);
        if h1::is_hop_by_hop(name, buf, scratch)
            || (!pass_length && name.eq_ignore_ascii_case(b"content-length"))
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
pub fn build_switch_head(out: &mut Vec<u8>, buf: &[u8], resp: &ResponseHead, scratch: &HeadScratch, decor: &Decor<'_>) {
    out.extend_from_slice(b"HTTP/1.1 101 ");
    out.extend_from_slice(buf.get(resp.reason.clone()).unwrap_or_default());
    out.extend_from_slice(b"\r\n");
    for h in scratch.headers() {
        let name = h.name(buf);
        if h1::is_hop_by_hop(name, buf, scratch) || name.eq_ignore_ascii_case(b"content-length") || decor.replaces(name)
        {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value(buf));
        out.extend_from_slice(b"\r\n");
    }
    decor.push_h1(out);
    out.extend_from_slice(b"connection: upgrade\r\nupgrade: websocket\r\n\r\n");
}
