//! What the upstream sees: the request head the gateway sends, as HTTP/1.1 lines or as an
//! HTTP/2 request, built once from the [`Request`] whichever protocol the client spoke.
//!
//! Dropped from the client's fields: hop-by-hop fields (and, on HTTP/1.1, every field its
//! `Connection` names; `te: trailers` from an HTTP/2 client is kept for an HTTP/2 upstream),
//! `Host` (sent as the authority), `Content-Length` and `Transfer-Encoding` (the gateway frames
//! the body itself), `Expect`, `X-Request-Id` (replaced by the validated id), the priority
//! header, the deadline fields (each try sends what remains), the mirror marker and the
//! client-identity header (never taken from a client).
//!
//! Forwarding fields: from a client that is not one of the listener's `trusted_proxies` (the
//! default: none is), `X-Forwarded-For`, `X-Forwarded-Proto`, `-Host`, `-Port` and `Forwarded`
//! are dropped and replaced: `X-Forwarded-For` names the client's address alone. From a trusted
//! proxy they are kept: its `X-Forwarded-For` fields form one list with its address appended,
//! its `X-Forwarded-Proto`/`-Host`/`-Port` stand instead of the gateway's, and its
//! `Forwarded` is extended. `Forwarded` (RFC 7239) is sent only when the listener's
//! `forwarded` is on. `Via` names the protocol received. Cookie crumbs of an HTTP/2 client
//! become one `Cookie` line for HTTP/1.1 (RFC 9113 §8.2.3).

use std::time::Duration;

use crate::codec::response::push_num;
use crate::pipeline::{deadline, edits};
use crate::request::{Body, Request, Version};

/// What the gateway adds to every forwarded request.
#[derive(Clone, Copy)]
pub struct Additions<'a> {
    /// The gateway's `Via` name.
    pub via: &'a str,
    /// The request id sent in `x-request-id`.
    pub request_id: &'a [u8],
    /// The priority header (never forwarded).
    pub strip: Option<&'a str>,
    /// The configured deadline header; it and `grpc-timeout` are sent as what remains.
    pub deadline_header: Option<&'a str>,
    /// The authority when the request has none (HTTP/1.0 without Host): the cluster's name,
    /// as nginx sends its upstream's name.
    pub default_host: &'a str,
    /// Ask the upstream to switch to WebSocket (a checked handshake on a route allowing it).
    pub websocket: bool,
    /// The route's name (`${route}`).
    pub route: &'a str,
    /// The route's `request_headers`, when it has any.
    pub edits: Option<&'a gateway_config::HeaderEdits>,
    /// The route's `rewrite` and the length of its `match.path_prefix`.
    pub rewrite: Option<(&'a gateway_config::Rewrite, usize)>,
}

impl Additions<'_> {
    /// The variables of the route's edits for `req`.
    fn vars<'v>(&'v self, req: &'v Request<'_>) -> edits::Vars<'v> {
        edits::Vars {
            client_ip: req.addr,
            request_id: self.request_id,
            route: self.route,
            cluster: self.default_host,
            identity: req.client.identity(),
            scheme: req.scheme(),
        }
    }
}

/// Writes the path the upstream is sent: the request's, or the route's rewrite of it.
fn push_path(out: &mut Vec<u8>, req: &Request<'_>, add: &Additions<'_>) {
    let path = if req.path.is_empty() { &b"/"[..] } else { req.path };
    match add.rewrite {
        None => out.extend_from_slice(path),
        Some((gateway_config::Rewrite::Path(p), _)) => out.extend_from_slice(p.as_bytes()),
        Some((gateway_config::Rewrite::Prefix(p), matched)) => {
            let rest = path.get(matched..).unwrap_or_default();
            // `/` + `/x` is `/x`, not `//x`.
            let rest = if p.ends_with('/') { rest.strip_prefix(b"/").unwrap_or(rest) } else { rest };
            out.extend_from_slice(p.as_bytes());
            out.extend_from_slice(rest);
        }
    }
}

/// The forwarding fields a trusted proxy's own values are kept for (see the module doc).
const FORWARDING: [&[u8]; 4] = [b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-port", b"forwarded"];
const FORWARDED: usize = 3;

/// Which of [`FORWARDING`] the client sent (a trusted proxy's are kept).
#[derive(Default, Clone, Copy)]
struct Seen([bool; 4]);

/// The index of `name` in [`FORWARDING`].
fn forwarding(name: &[u8]) -> Option<usize> {
    // Most fields start with neither letter: one comparison for them.
    match name.first() {
        Some(b'x' | b'X' | b'f' | b'F') => FORWARDING.iter().position(|f| gateway_h1::eq_lower(name, f)),
        _ => None,
    }
}

/// Whether the client's field `name` is never forwarded as received.
fn dropped(req: &Request<'_>, add: &Additions<'_>, name: &[u8]) -> bool {
    const FIXED: [&[u8]; 4] = [b"host", b"content-length", b"expect", b"x-request-id"];
    FIXED.iter().any(|f| gateway_h1::eq_lower(name, f))
        || add.strip.is_some_and(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        || deadline::Incoming::is_deadline_field(name, add.deadline_header)
        || gateway_h1::eq_lower(name, super::mirror::MARKER_NAME.as_bytes())
        || req.client.identity_field().is_some_and(|(h, _)| name.eq_ignore_ascii_case(h.as_bytes()))
}

/// Writes the HTTP/1.1 request head, without the final empty line (each try appends its
/// deadline fields, then CRLF: see [`finish_h1_head`]).
pub fn write_h1_head(out: &mut Vec<u8>, req: &Request<'_>, add: &Additions<'_>) {
    out.extend_from_slice(req.method_bytes);
    out.push(b' ');
    push_path(out, req, add);
    if let Some(q) = req.query {
        out.push(b'?');
        out.extend_from_slice(q);
    }
    // HTTP/1.1 upstreams require a Host (RFC 9112 §3.2).
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(req.authority.unwrap_or(add.default_host.as_bytes()));
    out.extend_from_slice(b"\r\n");
    let join_cookies = req.version == Version::Http2;
    let trusted = req.client.trusted.is_some();
    // Fields gathered into one line after the others (a second pass, only when present).
    let (mut cookies, mut xff, mut seen) = (false, false, Seen::default());
    for (name, value) in req.fields.iter() {
        if gateway_h1::eq_lower(name, b"x-forwarded-for") {
            xff = trusted;
            continue;
        }
        if let Some(i) = forwarding(name) {
            if trusted && !req.fields.is_hop_by_hop(name) {
                if let Some(s) = seen.0.get_mut(i) {
                    *s = true;
                }
                if !(i == FORWARDED && req.client.forwarded) {
                    line(out, name, value);
                }
            }
            continue;
        }
        if add.edits.is_some_and(|e| e.drops(name)) {
            continue;
        }
        if join_cookies && gateway_h1::eq_lower(name, b"cookie") {
            cookies = true;
            continue;
        }
        if req.fields.is_hop_by_hop(name) || dropped(req, add, name) {
            continue;
        }
        line(out, name, value);
    }
    if cookies {
        out.extend_from_slice(b"cookie: ");
        let mut first = true;
        req.fields.any(b"cookie", |v| {
            if !std::mem::take(&mut first) {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(v);
            false
        });
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    if xff {
        req.fields.any(b"x-forwarded-for", |v| {
            if !v.is_empty() {
                out.extend_from_slice(v);
                out.extend_from_slice(b", ");
            }
            false
        });
    }
    out.extend_from_slice(&req.client.peer_ip);
    out.extend_from_slice(b"\r\n");
    forwarding_fields(req, seen, |name, push| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        push(out);
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(b"via: ");
    out.extend_from_slice(req.version.via().as_bytes());
    out.push(b' ');
    out.extend_from_slice(add.via.as_bytes());
    out.extend_from_slice(b"\r\nx-request-id: ");
    out.extend_from_slice(add.request_id);
    out.extend_from_slice(b"\r\n");
    if let Some((name, Some(value))) = req.client.identity_field() {
        line(out, name.as_bytes(), value.as_bytes());
    }
    if let Some(e) = add.edits {
        edits::push_h1(out, e, &add.vars(req));
    }
    if add.websocket {
        out.extend_from_slice(b"connection: upgrade\r\nupgrade: websocket\r\n");
    }
    match req.body {
        Body::None => {}
        Body::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            push_num(out, n);
            out.extend_from_slice(b"\r\n");
        }
        Body::Stream => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
}

/// Ends a head written by [`write_h1_head`] for one try: the deadline fields with what remains
/// (`grpc`: the client sent `grpc-timeout`), then the empty line.
pub fn finish_h1_head(out: &mut Vec<u8>, grpc: bool, deadline_header: Option<&str>, remaining: Duration) {
    if grpc || deadline_header.is_some() {
        deadline::push_h1_lines(out, grpc, deadline_header, remaining);
    }
    out.extend_from_slice(b"\r\n");
}

/// The HTTP/2 request for an HTTP/2 upstream (`tls`: the upstream connection is TLS, for the
/// scheme); `None` when the request cannot be expressed as one (an invalid URI).
pub fn h2_request(
    req: &Request<'_>,
    add: &Additions<'_>,
    tls: bool,
    grpc: bool,
    remaining: Duration,
) -> Option<http::Request<()>> {
    let method = http::Method::from_bytes(req.method_bytes).ok()?;
    let authority = String::from_utf8_lossy(req.authority.unwrap_or(add.default_host.as_bytes())).into_owned();
    let mut target = if add.rewrite.is_some() {
        let mut path = Vec::new();
        push_path(&mut path, req, add);
        String::from_utf8_lossy(&path).into_owned()
    } else {
        String::from_utf8_lossy(if req.path.is_empty() { b"/" } else { req.path }).into_owned()
    };
    if let Some(q) = req.query {
        target.push('?');
        target.push_str(&String::from_utf8_lossy(q));
    }
    let scheme = if tls { "https" } else { "http" };
    let uri = http::Uri::try_from(format!("{scheme}://{authority}{target}")).ok()?;
    let mut out = http::Request::new(());
    *out.method_mut() = method;
    *out.uri_mut() = uri;
    let headers = out.headers_mut();
    // `te: trailers` is the one TE an HTTP/2 peer may send (RFC 9113 §8.2.2): kept from an
    // HTTP/2 client (gRPC needs it); an HTTP/1.1 client's TE is hop-by-hop.
    let keep_te = req.version == Version::Http2;
    let trusted = req.client.trusted.is_some();
    let mut xff = Vec::new();
    let mut seen = Seen::default();
    for (name, value) in req.fields.iter() {
        if let Some(i) = forwarding(name) {
            if trusted && !req.fields.is_hop_by_hop(name) {
                if let Some(s) = seen.0.get_mut(i) {
                    *s = true;
                }
                if i == FORWARDED && req.client.forwarded {
                    continue;
                }
            } else {
                continue;
            }
        }
        let te_trailers = keep_te && gateway_h1::eq_lower(name, b"te") && gateway_h1::eq_lower(value, b"trailers");
        // An HTTP/2 request may carry its length (RFC 9113 §8.1.1); it was checked already.
        let length = gateway_h1::eq_lower(name, b"content-length");
        if (req.fields.is_hop_by_hop(name) && !te_trailers)
            || (dropped(req, add, name) && !length)
            || add.edits.is_some_and(|e| e.drops(name))
        {
            continue;
        }
        if gateway_h1::eq_lower(name, b"x-forwarded-for") {
            if trusted && !value.is_empty() {
                xff.extend_from_slice(value);
                xff.extend_from_slice(b", ");
            }
            continue;
        }
        if let (Ok(n), Ok(v)) = (http::HeaderName::from_bytes(name), http::HeaderValue::from_bytes(value)) {
            headers.append(n, v);
        }
    }
    xff.extend_from_slice(&req.client.peer_ip);
    let mut put = |name: &'static str, value: &[u8]| {
        if let Ok(v) = http::HeaderValue::from_bytes(value) {
            headers.insert(name, v);
        }
    };
    put("x-forwarded-for", &xff);
    forwarding_fields(req, seen, |name, push| {
        xff.clear();
        push(&mut xff);
        if let Ok(v) = http::HeaderValue::from_bytes(&xff) {
            headers.insert(name, v);
        }
    });
    let mut put = |name: &'static str, value: &[u8]| {
        if let Ok(v) = http::HeaderValue::from_bytes(value) {
            headers.insert(name, v);
        }
    };
    put("via", format!("{} {}", req.version.via(), add.via).as_bytes());
    put("x-request-id", add.request_id);
    if let Some((name, Some(id))) = req.client.identity_field() {
        if let (Ok(n), Ok(v)) = (http::HeaderName::from_bytes(name.as_bytes()), http::HeaderValue::from_str(id)) {
            headers.insert(n, v);
        }
    }
    if let Some(e) = add.edits {
        edits::apply_h2(headers, e, &add.vars(req));
    }
    if grpc || add.deadline_header.is_some() {
        deadline::set_h2(headers, grpc, add.deadline_header, remaining);
    }
    Some(out)
}

/// The gateway's X-Forwarded-Proto, -Host and -Port (each unless a trusted proxy sent its own)
/// and, when the listener sends it, `Forwarded` (a trusted proxy's extended): `emit` gets each
/// name and a writer of its value.
fn forwarding_fields(req: &Request<'_>, seen: Seen, mut emit: impl FnMut(&'static str, &dyn Fn(&mut Vec<u8>))) {
    let [proto, host, port, forwarded] = seen.0;
    if !proto {
        emit("x-forwarded-proto", &|o| o.extend_from_slice(req.scheme().as_bytes()));
    }
    if let (false, Some(authority)) = (host, req.authority) {
        emit("x-forwarded-host", &|o| o.extend_from_slice(authority));
    }
    if !port && req.client.port != 0 {
        emit("x-forwarded-port", &|o| push_num(o, u64::from(req.client.port)));
    }
    if req.client.forwarded {
        emit("forwarded", &|o| {
            if forwarded {
                req.fields.any(b"forwarded", |v| {
                    o.extend_from_slice(v);
                    o.extend_from_slice(b", ");
                    false
                });
            }
            push_forwarded_element(o, req);
        });
    }
}

/// This hop's RFC 7239 element: `for=` the client's address (IPv6 quoted in brackets),
/// `proto=`, and `host=` quoted when the request named one (left out if it could not be quoted).
fn push_forwarded_element(out: &mut Vec<u8>, req: &Request<'_>) {
    out.extend_from_slice(b"for=");
    if req.client.peer.is_ipv6() {
        out.extend_from_slice(b"\"[");
        out.extend_from_slice(&req.client.peer_ip);
        out.extend_from_slice(b"]\"");
    } else {
        out.extend_from_slice(&req.client.peer_ip);
    }
    out.extend_from_slice(b";proto=");
    out.extend_from_slice(req.scheme().as_bytes());
    if let Some(host) = req.authority.filter(|h| h.iter().all(|&b| b.is_ascii_graphic() && b != b'"' && b != b'\\')) {
        out.extend_from_slice(b";host=\"");
        out.extend_from_slice(host);
        out.push(b'"');
    }
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::codec::h1::{parse_request, HeadScratch, RequestLimits};
    use crate::request::Client;

    const ADD: Additions<'static> = Additions {
        via: "edge",
        request_id: b"id-1",
        strip: Some("x-priority"),
        deadline_header: Some("x-deadline-ms"),
        default_host: "cluster-a",
        websocket: false,
        route: "r",
        edits: None,
        rewrite: None,
    };

    fn h1_head(raw: &[u8]) -> String {
        h1_head_from(raw, &Client::for_tests())
    }

    fn h1_head_from(raw: &[u8], client: &Client) -> String {
        let limits = RequestLimits { max_request_line: 1000, max_header_bytes: 4000, max_headers: 32 };
        let mut scratch = HeadScratch::new(32);
        let head = parse_request(raw, &limits, &mut scratch).unwrap().unwrap();
        let req = Request::h1(raw, &head, &scratch, client);
        let mut out = Vec::new();
        write_h1_head(&mut out, &req, &ADD);
        finish_h1_head(&mut out, false, ADD.deadline_header, Duration::from_millis(250));
        String::from_utf8(out).unwrap()
    }

    const SPOOFING: &[u8] = b"GET / HTTP/1.1\r\nHost: x.example:8443\r\nX-Forwarded-For: 1.2.3.4\r\n\
        X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Port: 1\r\n\
        Forwarded: for=1.2.3.4\r\n\r\n";

    #[test]
    fn an_untrusted_clients_forwarding_fields_are_replaced() {
        let mut client = Client::for_tests();
        client.port = 8443;
        client.forwarded = true;
        let out = h1_head_from(SPOOFING, &client);
        assert!(!out.contains("1.2.3.4") && !out.contains("evil") && !out.contains("https"), "{out}");
        assert!(
            out.contains(
                "x-forwarded-for: 192.0.2.1\r\nx-forwarded-proto: http\r\nx-forwarded-host: x.example:8443\r\n\
                 x-forwarded-port: 8443\r\nforwarded: for=192.0.2.1;proto=http;host=\"x.example:8443\"\r\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_trusted_proxys_forwarding_fields_are_kept_and_extended() {
        let mut client = Client::for_tests();
        client.peer = "[2001:db8::5]:1000".parse().unwrap();
        client.peer_ip = b"2001:db8::5".to_vec();
        client.port = 80;
        client.forwarded = true;
        client.trusted =
            Client::trust(client.peer.ip(), &[gateway_config::Cidr { network: client.peer.ip(), prefix_len: 128 }]);
        let out = h1_head_from(SPOOFING, &client);
        assert!(
            out.contains(
                "X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Port: 1\r\n\
                 x-forwarded-for: 1.2.3.4, 2001:db8::5\r\n\
                 forwarded: for=1.2.3.4, for=\"[2001:db8::5]\";proto=http;host=\"x.example:8443\"\r\n"
            ),
            "{out}"
        );
        assert!(!out.contains("x-forwarded-proto") && !out.contains("x-forwarded-port"), "{out}");
    }

    #[test]
    fn http1_heads_keep_end_to_end_fields_only() {
        let out = h1_head(
            b"POST /a?b=1 HTTP/1.1\r\nHost: x.example\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
              X-Priority: critical\r\nX-Deadline-Ms: 9000\r\nX-Forwarded-For: 10.0.0.1\r\nX-Request-Id: mine\r\n\
              Content-Length: 2\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!(
            out,
            "POST /a?b=1 HTTP/1.1\r\nhost: x.example\r\nAccept: */*\r\nx-forwarded-for: 192.0.2.1\r\n\
             x-forwarded-proto: http\r\nx-forwarded-host: x.example\r\nvia: 1.1 edge\r\nx-request-id: id-1\r\n\
             content-length: 2\r\nx-deadline-ms: 250\r\n\r\n"
        );
        let old = h1_head(b"GET / HTTP/1.0\r\n\r\n");
        assert!(old.starts_with("GET / HTTP/1.1\r\nhost: cluster-a\r\n"), "{old}");
        assert!(old.contains("via: 1.0 edge\r\n"), "{old}");
    }

    #[test]
    fn http2_requests_join_cookies_for_http1_and_keep_te_trailers_for_http2() {
        let fields: [(&[u8], &[u8]); 5] = [
            (b"cookie", b"a=1"),
            (b"cookie", b"b=2"),
            (b"te", b"trailers"),
            (b"x-priority", b"high"),
            (b"content-length", b"5"),
        ];
        let head = gateway_h2::server::RequestHead::from_parts(
            b"GET",
            Some(b"https"),
            Some(b"x.example"),
            Some(b"/p?q"),
            &fields,
        );
        let client = Client::for_tests();
        let req = Request::h2_native(&head, Some(b"x.example"), false, &client);
        assert_eq!(req.body, Body::Length(5));
        let mut out = Vec::new();
        write_h1_head(&mut out, &req, &ADD);
        finish_h1_head(&mut out, false, None, Duration::ZERO);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("POST /p?q HTTP/1.1\r\n") || text.starts_with("GET /p?q HTTP/1.1\r\n"), "{text}");
        assert!(text.contains("cookie: a=1; b=2\r\n") && !text.contains("te:") && !text.contains("x-priority"));
        assert!(text.contains("via: 2 edge\r\n") && text.ends_with("content-length: 5\r\n\r\n"), "{text}");
        let up = h2_request(&req, &ADD, false, false, Duration::ZERO).unwrap();
        assert_eq!(up.uri().to_string(), "http://x.example/p?q");
        assert_eq!(up.headers().get("te").unwrap(), "trailers");
        assert_eq!(up.headers().get_all("cookie").iter().count(), 2);
        assert!(up.headers().get("x-priority").is_none());
        assert_eq!(up.headers().get("content-length").unwrap(), "5");
        assert_eq!(up.headers().get("x-forwarded-for").unwrap(), "192.0.2.1");
    }
}
