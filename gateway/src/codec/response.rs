//! Responses the gateway generates itself: errors, direct responses and redirects.
//!
//! Error bodies are short and generic: they never reveal upstream addresses or internal state.

use gateway_config::{DirectResponse, Redirect};

/// The standard reason phrase of a status code (empty for unknown codes).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Appends a gateway error response (`text/plain`, body = reason phrase) to `out`.
/// `close` adds `connection: close`; `head` omits the body (HEAD requests).
pub fn write_error(out: &mut Vec<u8>, status: u16, close: bool, head: bool) {
    write_refusal(out, status, b"", close, head);
}

/// Appends a refusal the gateway decided on (shed, overflow, rate-limited): like
/// [`write_error`], with `headers` (complete `name: value\r\n` lines) added.
pub fn write_refusal(out: &mut Vec<u8>, status: u16, headers: &[u8], close: bool, head: bool) {
    let reason = reason(status);
    status_line(out, status, reason);
    out.extend_from_slice(headers);
    out.extend_from_slice(b"content-type: text/plain; charset=utf-8\r\ncontent-length: ");
    push_num(out, reason.len() as u64 + 1);
    out.extend_from_slice(b"\r\n");
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head {
        out.extend_from_slice(reason.as_bytes());
        out.push(b'\n');
    }
}

/// A direct response rendered once per config snapshot.
#[derive(Debug)]
pub struct Prerendered {
    pub status: u16,
    /// Status line, configured headers and content-length, without the final blank line.
    head: Vec<u8>,
    body: Vec<u8>,
}

impl Prerendered {
    pub fn new(d: &DirectResponse) -> Self {
        let mut head = Vec::with_capacity(128);
        status_line(&mut head, d.status, reason(d.status));
        for (name, value) in &d.headers {
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        // 1xx, 204 and 304 never carry content-length semantics for a body; none are allowed
        // by config validation except 204/304, which get no body.
        let bodyless = matches!(d.status, 204 | 304);
        if !bodyless {
            head.extend_from_slice(b"content-length: ");
            push_num(&mut head, d.body.len() as u64);
            head.extend_from_slice(b"\r\n");
        }
        let body = if bodyless { Vec::new() } else { d.body.as_bytes().to_vec() };
        Self { status: d.status, head, body }
    }

    /// Appends the response; `close` adds `connection: close`, `head` omits the body.
    pub fn write(&self, out: &mut Vec<u8>, close: bool, keep_alive_1_0: bool, head: bool) {
        out.extend_from_slice(&self.head);
        connection_header(out, close, keep_alive_1_0);
        out.extend_from_slice(b"\r\n");
        if !head {
            out.extend_from_slice(&self.body);
        }
    }
}

/// The parts of the request URL a redirect may keep.
#[derive(Clone, Copy)]
pub struct RequestUrl<'a> {
    pub scheme: &'a str,
    pub authority: &'a [u8],
    pub path: &'a [u8],
    pub query: Option<&'a [u8]>,
}

/// Appends a redirect for the request at `url`.
pub fn write_redirect(out: &mut Vec<u8>, r: &Redirect, url: &RequestUrl<'_>, close: bool, keep_alive_1_0: bool) {
    status_line(out, r.status, reason(r.status));
    out.extend_from_slice(b"location: ");
    redirect_location(out, r, url);
    out.extend_from_slice(b"\r\ncontent-length: 0\r\n");
    connection_header(out, close, keep_alive_1_0);
    out.extend_from_slice(b"\r\n");
}

/// Appends the Location of a redirect for the request at `url`.
pub fn redirect_location(out: &mut Vec<u8>, r: &Redirect, url: &RequestUrl<'_>) {
    let RequestUrl { scheme: req_scheme, authority: req_authority, path: req_path, query: req_query } = *url;
    out.extend_from_slice(r.scheme.as_deref().unwrap_or(req_scheme).as_bytes());
    out.extend_from_slice(b"://");
    match (&r.host, r.port) {
        (Some(h), port) => {
            out.extend_from_slice(h.as_bytes());
            if let Some(p) = port {
                out.push(b':');
                push_num(out, u64::from(p));
            }
        }
        (None, Some(p)) => {
            out.extend_from_slice(super::strip_port(req_authority));
            out.push(b':');
            push_num(out, u64::from(p));
        }
        (None, None) => out.extend_from_slice(req_authority),
    }
    match &r.path {
        Some(p) => {
            out.extend_from_slice(p.as_bytes());
            if let (true, Some(q)) = (r.keep_query, req_query) {
                out.push(b'?');
                out.extend_from_slice(q);
            }
        }
        None => {
            out.extend_from_slice(req_path);
            if let Some(q) = req_query {
                out.push(b'?');
                out.extend_from_slice(q);
            }
        }
    }
}

/// `connection: close` when closing, `connection: keep-alive` for a persistent HTTP/1.0 client.
pub fn connection_header(out: &mut Vec<u8>, close: bool, keep_alive_1_0: bool) {
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if keep_alive_1_0 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
}

pub fn status_line(out: &mut Vec<u8>, status: u16, reason: &str) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_num(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The decimal digits of `n`, written at the end of `digits`.
pub fn num(digits: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = digits.len();
    loop {
        i -= 1;
        if let Some(d) = digits.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    digits.get(i..).unwrap_or_default()
}

/// Appends the decimal digits of `n`.
#[inline]
pub fn push_num(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(num(&mut digits, n));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> &str {
        std::str::from_utf8(v).unwrap_or("<bin>")
    }

    #[test]
    fn error_responses_are_short_and_framed() {
        let mut out = Vec::new();
        write_error(&mut out, 431, true, false);
        assert_eq!(
            s(&out),
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 32\r\nconnection: close\r\n\r\nRequest Header Fields Too Large\n"
        );
        out.clear();
        write_error(&mut out, 502, false, true);
        assert!(s(&out).ends_with("content-length: 12\r\n\r\n"));
    }

    #[test]
    fn direct_responses_are_prerendered() {
        let d = DirectResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: "ok\n".into(),
        };
        let p = Prerendered::new(&d);
        let mut out = Vec::new();
        p.write(&mut out, false, true, false);
        assert_eq!(
            s(&out),
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: keep-alive\r\n\r\nok\n"
        );
        out.clear();
        p.write(&mut out, true, false, true);
        assert_eq!(
            s(&out),
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: close\r\n\r\n"
        );
    }

    fn url(authority: &[u8]) -> RequestUrl<'_> {
        RequestUrl { scheme: "http", authority, path: b"/x", query: Some(b"q=1") }
    }

    #[test]
    fn redirects_keep_what_is_not_configured() {
        let r = Redirect {
            status: 308,
            scheme: Some("https".into()),
            host: None,
            port: None,
            path: None,
            keep_query: false,
        };
        let mut out = Vec::new();
        write_redirect(&mut out, &r, &url(b"a.example:8080"), false, false);
        assert!(s(&out).starts_with("HTTP/1.1 308 Permanent Redirect\r\nlocation: https://a.example:8080/x?q=1\r\n"));
        let r = Redirect {
            status: 301,
            scheme: None,
            host: Some("b.example".into()),
            port: Some(8443),
            path: Some("/new".into()),
            keep_query: false,
        };
        out.clear();
        write_redirect(&mut out, &r, &url(b"a.example"), false, false);
        assert!(s(&out).contains("location: http://b.example:8443/new\r\n"));
        let r = Redirect {
            status: 302,
            scheme: None,
            host: None,
            port: Some(8443),
            path: Some("/new".into()),
            keep_query: true,
        };
        out.clear();
        write_redirect(&mut out, &r, &url(b"a.example:80"), true, false);
        assert!(s(&out).contains("location: http://a.example:8443/new?q=1\r\n"));
        assert!(s(&out).ends_with("connection: close\r\n\r\n"));
    }

    #[test]
    fn push_num_writes_decimal() {
        for n in [0u64, 7, 10, 65536, u64::MAX] {
            let mut out = Vec::new();
            push_num(&mut out, n);
            assert_eq!(s(&out), n.to_string());
        }
    }
}
