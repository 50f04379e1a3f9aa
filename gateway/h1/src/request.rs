//! Request heads: the request line, the limits on a head, and what its fields mean for framing,
//! routing and the connection.

use std::mem::MaybeUninit;
use std::ops::Range;

use httparse::Status;

use super::fields::{scan_fields, Expect, Fields, Te};
use super::uri::{authority_len, parse_target};
use super::{bytes_at, httparse_reason, span, HeadScratch, BARE_LF, INVALID_VERSION, MAX_HEADERS};

/// Size limits for a request head. They bound work as well as memory: nothing past
/// `max_header_bytes` is ever scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Longest request line, without its CRLF.
    pub max_request_line: usize,
    /// Longest head, start line through the empty line.
    pub max_header_bytes: usize,
    /// Most field lines (also capped by [`HeadScratch::max_headers`]).
    pub max_headers: usize,
}

/// Why a request head is refused. The gateway answers [`RequestError::status`] and closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// 400, with a short reason for logs.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// 414: the request line is longer than `max_request_line`.
    #[error("request line too long")]
    UriTooLong,
    /// 431: too many field lines or too many head bytes.
    #[error("request header fields too large")]
    HeadersTooLarge,
    /// 417: an `Expect` other than `100-continue`.
    #[error("unsupported expectation")]
    ExpectationFailed,
    /// 501: a method the gateway does not serve.
    #[error("not implemented: {0}")]
    NotImplemented(&'static str),
    /// 505: a well-formed HTTP version other than 1.0 and 1.1.
    #[error("HTTP version not supported")]
    VersionNotSupported,
}

impl RequestError {
    /// The status code the gateway answers with.
    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::UriTooLong => 414,
            Self::HeadersTooLarge => 431,
            Self::ExpectationFailed => 417,
            Self::NotImplemented(_) => 501,
            Self::VersionNotSupported => 505,
        }
    }

    /// A short, static description for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BadRequest(r) | Self::NotImplemented(r) => r,
            Self::UriTooLong => "request line too long",
            Self::HeadersTooLarge => "request head too large",
            Self::ExpectationFailed => "unsupported expectation",
            Self::VersionNotSupported => "unsupported HTTP version",
        }
    }
}

/// The request method. Methods are case-sensitive: `get` is [`Method::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Patch,
    Trace,
    Connect,
    /// Any other token; its bytes are at [`RequestHead::method_range`].
    Other,
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes (possibly 0).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A request head that passed every check. Ranges index the buffer given to [`parse_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// Bytes of the buffer taken by the head, through the empty line (and a skipped leading
    /// CRLF). The body or the next request starts here.
    pub head_len: usize,
    pub method: Method,
    pub method_range: Range<usize>,
    /// The request-target as sent.
    pub target: Range<usize>,
    /// The path: of an origin-form target, of an absolute-form URI (a one-byte `/` inside
    /// `://` when the URI has no path), or `*` for OPTIONS in asterisk-form. Percent-encoding
    /// is valid but not decoded.
    pub path: Range<usize>,
    /// The query without its `?`, if there is a `?`.
    pub query: Option<Range<usize>>,
    /// `host[:port]` to route on: from an absolute-form target, else from Host; `None` only for
    /// HTTP/1.0 without either. A `:` with an empty port is left out.
    pub authority: Option<Range<usize>>,
    /// 0 or 1.
    pub version_minor: u8,
    pub body: BodyFraming,
    /// HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on HTTP/1.1 (HTTP/1.0 must ignore it, RFC 9110 §10.1.1).
    pub expect_continue: bool,
    /// An `Upgrade` field was present. The field is hop-by-hop and dropped when forwarding;
    /// only a WebSocket upgrade on a route that allows it is ever passed on (see `websocket`).
    pub upgrade: bool,
    /// An HTTP/1.1 request asking to switch to WebSocket: `Upgrade` lists `websocket` and
    /// `Connection` lists `upgrade` (both case-insensitive). HTTP/1.0 never upgrades (RFC 9110
    /// §7.8). Whether the handshake is complete (method, key, version) is checked by the proxy.
    pub websocket: bool,
}

impl RequestHead {
    /// The method token as sent.
    pub fn method_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.method_range)
    }

    /// [`RequestHead::path`] in `buf`; empty if `buf` is not the parsed buffer.
    pub fn path_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.path)
    }

    /// [`RequestHead::query`] in `buf`.
    pub fn query_bytes<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        self.query.as_ref().map(|q| bytes_at(buf, q))
    }

    /// [`RequestHead::authority`] in `buf`.
    pub fn authority_bytes<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        self.authority.as_ref().map(|a| bytes_at(buf, a))
    }
}

/// Parses the request head at the start of `buf`.
///
/// `Ok(None)`: the head is incomplete and within limits; read more and call again with the
/// longer buffer. Errors are final. After `Ok(Some(head))`, [`HeadScratch::headers`] lists the
/// field lines of that head. At most `min(limits.max_headers, scratch.max_headers())` fields
/// are accepted. Never allocates, never panics, and looks at no more than
/// `max(limits.max_header_bytes, limits.max_request_line + 2)` bytes of `buf`.
pub fn parse_request(
    buf: &[u8],
    limits: &RequestLimits,
    scratch: &mut HeadScratch,
) -> Result<Option<RequestHead>, RequestError> {
    scratch.clear();
    let Some(start) = request_start(buf)? else {
        return Ok(None);
    };
    let window = buf.get(..limits.max_header_bytes).unwrap_or(buf);
    let mut slots = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let slots = slots.get_mut(..limits.max_headers.min(scratch.max_headers)).unwrap_or(&mut []);
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(window, slots) {
        Ok(Status::Complete(head_len)) => complete_request(buf, start, head_len, &req, limits, scratch).map(Some),
        Ok(Status::Partial) => incomplete_request(buf, start, limits),
        Err(httparse::Error::Version) => version_error(buf, window, start, limits),
        Err(httparse::Error::TooManyHeaders) => Err(RequestError::HeadersTooLarge),
        Err(e) => Err(RequestError::BadRequest(httparse_reason(e))),
    }
}

impl Method {
    /// RFC 9110 §9.2.2 idempotent methods (safe to send again).
    pub fn is_idempotent(self) -> bool {
        matches!(self, Self::Get | Self::Head | Self::Options | Self::Trace | Self::Put | Self::Delete)
    }

    /// The method of a token (case-sensitive).
    pub fn from_token(token: &[u8]) -> Self {
        match token {
            b"GET" => Self::Get,
            b"HEAD" => Self::Head,
            b"POST" => Self::Post,
            b"PUT" => Self::Put,
            b"DELETE" => Self::Delete,
            b"OPTIONS" => Self::Options,
            b"PATCH" => Self::Patch,
            b"TRACE" => Self::Trace,
            b"CONNECT" => Self::Connect,
            _ => Self::Other,
        }
    }
}

/// Where the request line starts: 0, or 2 after one skipped CRLF. `None`: too few bytes to tell.
fn request_start(buf: &[u8]) -> Result<Option<usize>, RequestError> {
    match (buf.first(), buf.get(1), buf.get(2)) {
        (None, ..) | (Some(b'\r'), None, _) | (Some(b'\r'), Some(b'\n'), None) => Ok(None),
        (Some(b'\n'), ..) => Err(RequestError::BadRequest(BARE_LF)),
        (Some(b'\r'), Some(b'\n'), Some(b'\r' | b'\n')) => {
            Err(RequestError::BadRequest("more than one empty line before request line"))
        }
        (Some(b'\r'), Some(b'\n'), Some(_)) => Ok(Some(2)),
        (Some(b'\r'), Some(_), _) => Err(RequestError::BadRequest("bare CR")),
        (Some(_), ..) => Ok(Some(0)),
    }
}

fn complete_request(
    buf: &[u8],
    start: usize,
    head_len: usize,
    req: &httparse::Request<'_, '_>,
    limits: &RequestLimits,
    scratch: &mut HeadScratch,
) -> Result<RequestHead, RequestError> {
    let (Some(method), Some(target), Some(version_minor)) = (req.method, req.path, req.version) else {
        return Err(RequestError::BadRequest("invalid request line"));
    };
    let method_range = span(buf, method.as_bytes());
    let target = span(buf, target.as_bytes());
    // request-line = method SP request-target SP "HTTP/1.x": its CR is 9 bytes after the target.
    if (target.end + 9).saturating_sub(start) > limits.max_request_line {
        return Err(RequestError::UriTooLong);
    }
    let fields = scan_fields(buf, head_len, req.headers, scratch).map_err(RequestError::BadRequest)?;
    let method = Method::from_token(method.as_bytes());
    let form = parse_target(method, buf, target.clone())?;
    let body = request_body(&fields, version_minor)?;
    let authority = request_authority(buf, form.authority, &fields, version_minor)?;
    let expect_continue = match fields.expect {
        Expect::Absent => false,
        Expect::Continue => version_minor == 1,
        Expect::Other => return Err(RequestError::ExpectationFailed),
    };
    Ok(RequestHead {
        head_len,
        method,
        method_range,
        target,
        path: form.path,
        query: form.query,
        authority,
        version_minor,
        body,
        keep_alive: !fields.close && (version_minor == 1 || fields.keep_alive),
        expect_continue,
        upgrade: fields.upgrade,
        websocket: fields.upgrade_websocket && fields.connection_upgrade && version_minor == 1,
    })
}

/// Enforces the limits on a head httparse could not finish: 414 once the request line is known
/// to be too long, then 431 once the head is; otherwise `Ok(None)`.
fn incomplete_request(buf: &[u8], start: usize, limits: &RequestLimits) -> Result<Option<RequestHead>, RequestError> {
    let line = buf.get(start..).unwrap_or_default();
    let scan = line.get(..limits.max_request_line.saturating_add(2)).unwrap_or(line);
    match scan.iter().position(|&b| b == b'\n') {
        Some(lf) if lf == 0 || scan.get(lf - 1) != Some(&b'\r') => return Err(RequestError::BadRequest(BARE_LF)),
        Some(_) => {}
        None => {
            let known_len = line.len() - usize::from(line.last() == Some(&b'\r'));
            if known_len > limits.max_request_line {
                return Err(RequestError::UriTooLong);
            }
        }
    }
    if buf.len() > limits.max_header_bytes {
        return Err(RequestError::HeadersTooLarge);
    }
    Ok(None)
}

/// httparse refuses every version but 1.0 and 1.1 alike. RFC 9110 §15.6.6: a well-formed
/// `HTTP/d.d` the gateway does not speak is 505; anything else is not a version (400). A prefix
/// of a well-formed version waits for more bytes.
fn version_error(
    buf: &[u8],
    window: &[u8],
    start: usize,
    limits: &RequestLimits,
) -> Result<Option<RequestHead>, RequestError> {
    const SHAPE: &[u8; 10] = b"HTTP/0.0\r\n"; // '0' stands for any DIGIT
                                              // Neither the method nor the target contains SP (httparse checked both), so the version
                                              // starts after the second SP of the line.
    let line = window.get(start..).unwrap_or_default();
    let mut spaces = line.iter().enumerate().filter(|&(_, &b)| b == b' ').map(|(i, _)| i);
    let version = match (spaces.next(), spaces.next()) {
        (Some(_), Some(sp)) => line.get(sp + 1..).unwrap_or_default(),
        _ => return Err(RequestError::BadRequest(INVALID_VERSION)),
    };
    let matched =
        version.iter().zip(SHAPE).take_while(|&(&b, &s)| if s == b'0' { b.is_ascii_digit() } else { b == s }).count();
    if matched == SHAPE.len() {
        Err(RequestError::VersionNotSupported)
    } else if matched == version.len() {
        incomplete_request(buf, start, limits)
    } else {
        Err(RequestError::BadRequest(INVALID_VERSION))
    }
}

/// RFC 9112 §6.3 for requests, refusing everything a peer could read differently.
fn request_body(fields: &Fields, version_minor: u8) -> Result<BodyFraming, RequestError> {
    match (fields.te, fields.content_length) {
        (Te::Absent, None) => Ok(BodyFraming::None),
        (Te::Absent, Some(n)) => Ok(BodyFraming::Length(n)),
        (_, Some(_)) => Err(RequestError::BadRequest("Content-Length with Transfer-Encoding")),
        _ if version_minor == 0 => Err(RequestError::BadRequest("Transfer-Encoding in HTTP/1.0")),
        (Te::Chunked, None) => Ok(BodyFraming::Chunked),
        (Te::Other, None) => Err(RequestError::BadRequest("unsupported Transfer-Encoding")),
    }
}

/// RFC 9112 §3.2: exactly one valid Host on HTTP/1.1, at most one on 1.0; an absolute-form
/// target's authority wins and must equal Host when both are sent.
fn request_authority(
    buf: &[u8],
    target_authority: Option<Range<usize>>,
    fields: &Fields,
    version_minor: u8,
) -> Result<Option<Range<usize>>, RequestError> {
    let host = match (fields.hosts, &fields.host) {
        (0, _) if version_minor == 1 => return Err(RequestError::BadRequest("missing Host")),
        (0, _) | (_, None) => None,
        (1, Some(value)) => {
            let len = authority_len(bytes_at(buf, value)).ok_or(RequestError::BadRequest("invalid Host"))?;
            Some(value.start..value.start + len)
        }
        _ => return Err(RequestError::BadRequest("more than one Host")),
    };
    match (target_authority, host) {
        (Some(target), Some(host)) if !bytes_at(buf, &target).eq_ignore_ascii_case(bytes_at(buf, &host)) => {
            Err(RequestError::BadRequest("Host differs from request-target authority"))
        }
        (Some(target), _) => Ok(Some(target)),
        (None, host) => Ok(host),
    }
}
