//! HTTP/1.1 message heads (RFC 9110, RFC 9112), parsed strictly and without heap allocation.
//!
//! httparse tokenises the head; this module then refuses everything httparse tolerates that the
//! RFCs do not allow, so that the gateway and whatever sits behind it can never disagree on where
//! a message ends or which host it is for. Every refusal is decided from the bytes alone.
//!
//! What httparse 1.10 (default `ParserConfig`) accepts and this module refuses itself:
//! - a bare LF as line terminator on any line of the head (request or status line, field
//!   lines, the final empty line);
//! - any number of empty lines, CRLF or bare LF, before the start line (one CRLF is skipped
//!   before a request, RFC 9112 §2.2; none before a response);
//! - request-target bytes outside RFC 3986 (httparse takes any VCHAR but DEL, and UTF-8):
//!   `"` `<` `>` `\` `^` `` ` `` `{` `|` `}`, `#`, malformed `%XX`, non-ASCII;
//! - versions other than 1.0/1.1, which httparse reports as one error: here a well-formed
//!   `HTTP/d.d` is 505 and anything else 400;
//! - status codes outside 100..=599, and a status line without the SP after the code;
//! - all field semantics (Content-Length, Transfer-Encoding, Host, Connection, Expect), which
//!   httparse does not interpret.
//!
//! What httparse's default configuration already refuses, pinned by tests so that a dependency
//! upgrade or a config change cannot loosen it: bare CR, obs-fold, whitespace between field name
//! and colon, control characters other than HTAB (NUL included) and DEL in field values, invalid
//! method tokens, repeated or non-SP delimiters in the request line.
#![forbid(unsafe_code)]

use std::mem::MaybeUninit;
use std::ops::Range;

use httparse::Status;

/// The most field lines one head can carry, whatever the limits say. httparse's slots for them
/// live uninitialised on the stack (32 bytes each), so a parse touches no heap.
pub const MAX_HEADERS: usize = 256;

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

/// Where one field line's name and value are in the parsed buffer. The value has its
/// surrounding whitespace (OWS) removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRange {
    name_start: usize,
    name_end: usize,
    value_start: usize,
    value_end: usize,
}

impl HeaderRange {
    /// The field name as sent (case preserved); empty if `buf` is not the parsed buffer.
    pub fn name<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.name_range())
    }

    /// The field value without surrounding whitespace; empty if `buf` is not the parsed buffer.
    pub fn value<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.value_range())
    }

    /// Where the name is in the parsed buffer.
    pub fn name_range(&self) -> Range<usize> {
        self.name_start..self.name_end
    }

    /// Where the trimmed value is in the parsed buffer (empty range for an empty value).
    pub fn value_range(&self) -> Range<usize> {
        self.value_start..self.value_end
    }
}

/// Per-connection (or per-worker) storage that parsing reuses for every head: it is allocated
/// once by [`HeadScratch::new`] and never grows, because a head is refused before it could
/// hold more than [`HeadScratch::max_headers`] fields.
#[derive(Debug, Clone)]
pub struct HeadScratch {
    headers: Vec<HeaderRange>,
    /// Indices into `headers` of the `Connection` fields.
    connection: Vec<usize>,
    max_headers: usize,
}

impl HeadScratch {
    /// Room for `max_headers` fields (at most [`MAX_HEADERS`]).
    pub fn new(max_headers: usize) -> Self {
        let max_headers = max_headers.min(MAX_HEADERS);
        Self { headers: Vec::with_capacity(max_headers), connection: Vec::with_capacity(max_headers), max_headers }
    }

    /// The field lines of the last head parsed successfully, in order. Unspecified after an
    /// error or an incomplete parse.
    pub fn headers(&self) -> &[HeaderRange] {
        &self.headers
    }

    /// The most fields a head parsed with this scratch may have.
    pub fn max_headers(&self) -> usize {
        self.max_headers
    }

    fn clear(&mut self) {
        self.headers.clear();
        self.connection.clear();
    }
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
    /// An `Upgrade` field was present. The gateway never switches protocols; the field is
    /// hop-by-hop and dropped when forwarding.
    pub upgrade: bool,
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

/// Why a response head from an upstream is refused. The gateway answers 502 for either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("invalid upstream response: {0}")]
    Invalid(&'static str),
    #[error("upstream response head too large")]
    TooLarge,
}

/// How the response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body: a response to HEAD, 1xx, 204 or 304.
    None,
    Length(u64),
    Chunked,
    /// The body ends when the upstream closes; the connection cannot be reused.
    UntilClose,
}

/// A response head that passed every check. Ranges index the buffer given to [`parse_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub head_len: usize,
    /// 100..=599.
    pub status: u16,
    pub version_minor: u8,
    /// The reason phrase (possibly empty), without the SP before it.
    pub reason: Range<usize>,
    pub framing: ResponseFraming,
    /// The upstream connection may carry another request after this response.
    pub keep_alive: bool,
}

impl ResponseHead {
    /// [`ResponseHead::reason`] in `buf`.
    pub fn reason_bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        bytes_at(buf, &self.reason)
    }
}

/// Parses the response head at the start of `buf`, for a request that was HEAD or not.
///
/// `Ok(None)`: incomplete and within `max_header_bytes`. The field and line checks are those of
/// requests; at most [`HeadScratch::max_headers`] fields. After `Ok(Some(head))`,
/// [`HeadScratch::headers`] lists its field lines. Never allocates, never panics, and looks at
/// no more than `max_header_bytes` bytes of `buf`.
pub fn parse_response(
    buf: &[u8],
    max_header_bytes: usize,
    request_was_head: bool,
    scratch: &mut HeadScratch,
) -> Result<Option<ResponseHead>, ResponseError> {
    scratch.clear();
    match buf.first() {
        None => return Ok(None),
        Some(b'\r' | b'\n') => return Err(ResponseError::Invalid("empty line before status line")),
        Some(_) => {}
    }
    let window = buf.get(..max_header_bytes).unwrap_or(buf);
    let mut slots = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let slots = slots.get_mut(..scratch.max_headers).unwrap_or(&mut []);
    let mut resp = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    match config.parse_response_with_uninit_headers(&mut resp, window, slots) {
        Ok(Status::Complete(head_len)) => complete_response(buf, head_len, &resp, request_was_head, scratch).map(Some),
        Ok(Status::Partial) if window.len() < buf.len() => Err(ResponseError::TooLarge),
        Ok(Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(ResponseError::TooLarge),
        Err(e) => Err(ResponseError::Invalid(httparse_reason(e))),
    }
}

/// Whether a field must not be forwarded: the fixed hop-by-hop fields (`Connection`,
/// `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, `Proxy-Connection`) and every
/// option listed in the head's `Connection` fields, compared case-insensitively. `buf` and
/// `scratch` are those of the last successful parse.
pub fn is_hop_by_hop(name: &[u8], buf: &[u8], scratch: &HeadScratch) -> bool {
    const FIXED: [&[u8]; 7] =
        [b"connection", b"keep-alive", b"te", b"trailer", b"transfer-encoding", b"upgrade", b"proxy-connection"];
    FIXED.iter().any(|f| f.eq_ignore_ascii_case(name))
        || scratch
            .connection
            .iter()
            .filter_map(|&i| scratch.headers.get(i))
            .any(|h| list_elements(h.value(buf)).any(|option| option.eq_ignore_ascii_case(name)))
}

const BARE_LF: &str = "line not terminated by CRLF";
const INVALID_VERSION: &str = "invalid HTTP version";

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

fn complete_response(
    buf: &[u8],
    head_len: usize,
    resp: &httparse::Response<'_, '_>,
    request_was_head: bool,
    scratch: &mut HeadScratch,
) -> Result<ResponseHead, ResponseError> {
    let (Some(version_minor), Some(status)) = (resp.version, resp.code) else {
        return Err(ResponseError::Invalid("invalid status line"));
    };
    if !(100..=599).contains(&status) {
        return Err(ResponseError::Invalid("status code out of range"));
    }
    // status-line = HTTP-version SP status-code SP [ reason-phrase ]; httparse lets the
    // second SP go missing.
    if buf.get(12) != Some(&b' ') {
        return Err(ResponseError::Invalid("no SP after status code"));
    }
    let fields = scan_fields(buf, head_len, resp.headers, scratch).map_err(ResponseError::Invalid)?;
    let next_line = scratch.headers.first().map_or(head_len.saturating_sub(2), |h| h.name_start);
    let reason = 13..next_line.saturating_sub(2).max(13);
    let framing = response_framing(status, version_minor, request_was_head, &fields)?;
    let keep_alive =
        !fields.close && (version_minor == 1 || fields.keep_alive) && framing != ResponseFraming::UntilClose;
    Ok(ResponseHead { head_len, status, version_minor, reason, framing, keep_alive })
}

/// RFC 9112 §6.3 for responses.
fn response_framing(
    status: u16,
    version_minor: u8,
    request_was_head: bool,
    fields: &Fields,
) -> Result<ResponseFraming, ResponseError> {
    if fields.te != Te::Absent {
        if fields.content_length.is_some() {
            return Err(ResponseError::Invalid("Content-Length with Transfer-Encoding"));
        }
        if version_minor == 0 {
            return Err(ResponseError::Invalid("Transfer-Encoding in HTTP/1.0"));
        }
    }
    if request_was_head || status < 200 || status == 204 || status == 304 {
        return Ok(ResponseFraming::None);
    }
    match (fields.te, fields.content_length) {
        (Te::Chunked, _) => Ok(ResponseFraming::Chunked),
        (Te::Other, _) => Err(ResponseError::Invalid("unsupported Transfer-Encoding")),
        (Te::Absent, Some(n)) => Ok(ResponseFraming::Length(n)),
        (Te::Absent, None) => Ok(ResponseFraming::UntilClose),
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

/// The framing-, routing- and connection-relevant facts of a head's fields.
#[derive(Debug, Default)]
struct Fields {
    content_length: Option<u64>,
    te: Te,
    hosts: usize,
    host: Option<Range<usize>>,
    close: bool,
    keep_alive: bool,
    expect: Expect,
    upgrade: bool,
}

/// Transfer-Encoding over all its field lines: only one single `chunked` is understood.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Te {
    #[default]
    Absent,
    Chunked,
    Other,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Expect {
    #[default]
    Absent,
    Continue,
    Other,
}

/// One pass over the field lines: records their ranges in `scratch`, checks that every line of
/// the head ends in CRLF, and gathers [`Fields`].
fn scan_fields(
    buf: &[u8],
    head_len: usize,
    headers: &[httparse::Header<'_>],
    scratch: &mut HeadScratch,
) -> Result<Fields, &'static str> {
    let mut fields = Fields::default();
    for header in headers {
        let name = span(buf, header.name.as_bytes());
        let value = span(buf, header.value);
        // httparse ends lines at LF and refuses a CR not followed by LF, so a line ends in CRLF
        // exactly when CR precedes the LF before the next line.
        if !crlf_before(buf, name.start) {
            return Err(BARE_LF);
        }
        let index = scratch.headers.len();
        scratch.headers.push(HeaderRange {
            name_start: name.start,
            name_end: name.end,
            value_start: value.start,
            value_end: value.end,
        });
        fields.note(header.name.as_bytes(), header.value, value, index, &mut scratch.connection)?;
    }
    // The last field line (or the start line) and the empty line.
    if !crlf_before(buf, head_len.saturating_sub(2)) || !crlf_before(buf, head_len) {
        return Err(BARE_LF);
    }
    Ok(fields)
}

impl Fields {
    fn note(
        &mut self,
        name: &[u8],
        value: &[u8],
        value_range: Range<usize>,
        index: usize,
        connection: &mut Vec<usize>,
    ) -> Result<(), &'static str> {
        let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
        match name.len() {
            4 if is(b"host") => {
                self.hosts += 1;
                self.host = Some(value_range);
            }
            6 if is(b"expect") => {
                self.expect = match self.expect {
                    Expect::Absent | Expect::Continue if value.eq_ignore_ascii_case(b"100-continue") => {
                        Expect::Continue
                    }
                    _ => Expect::Other,
                };
            }
            7 if is(b"upgrade") => self.upgrade = true,
            10 if is(b"connection") => {
                self.note_connection(value)?;
                connection.push(index);
            }
            14 if is(b"content-length") => {
                let n = content_length(value).ok_or("invalid Content-Length")?;
                if self.content_length.is_some_and(|m| m != n) {
                    return Err("conflicting Content-Length");
                }
                self.content_length = Some(n);
            }
            17 if is(b"transfer-encoding") => {
                self.te = match self.te {
                    Te::Absent if value.eq_ignore_ascii_case(b"chunked") => Te::Chunked,
                    _ => Te::Other,
                };
            }
            _ => {}
        }
        Ok(())
    }

    /// `Connection = #connection-option` (RFC 9110 §7.6.1). Naming Host or Content-Length would
    /// let a hop strip the fields that route and frame the message, so it is refused.
    fn note_connection(&mut self, value: &[u8]) -> Result<(), &'static str> {
        for option in list_elements(value) {
            if !option.iter().all(|&b| has(b, TOKEN)) {
                return Err("invalid Connection option");
            }
            if option.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if option.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            } else if option.eq_ignore_ascii_case(b"host") || option.eq_ignore_ascii_case(b"content-length") {
                return Err("Connection names an end-to-end field");
            }
        }
        Ok(())
    }
}

/// `Content-Length = 1*DIGIT` that fits in a u64; no sign, no list, no inner whitespace.
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// The non-empty elements of a `#rule` list, without surrounding whitespace.
fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows).filter(|e| !e.is_empty())
}

fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}

impl Method {
    fn from_token(token: &[u8]) -> Self {
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

/// A request-target taken apart (RFC 9112 §3.2); positions are in the whole buffer.
struct TargetParts {
    path: Range<usize>,
    query: Option<Range<usize>>,
    /// Only for absolute-form.
    authority: Option<Range<usize>>,
}

fn parse_target(method: Method, buf: &[u8], target: Range<usize>) -> Result<TargetParts, RequestError> {
    if method == Method::Connect {
        return Err(RequestError::NotImplemented("CONNECT"));
    }
    let bytes = bytes_at(buf, &target);
    match bytes {
        [b'/', ..] => {
            let (path, query) = path_and_query(bytes, target.start).map_err(RequestError::BadRequest)?;
            Ok(TargetParts { path, query, authority: None })
        }
        b"*" if method == Method::Options => Ok(TargetParts { path: target, query: None, authority: None }),
        b"*" => Err(RequestError::BadRequest("asterisk-form is only for OPTIONS")),
        _ => absolute_form(bytes, target.start).map_err(RequestError::BadRequest),
    }
}

/// `absolute-URI` with scheme `http` or `https` (any case), an authority without userinfo, and
/// an optional path and query.
fn absolute_form(bytes: &[u8], base: usize) -> Result<TargetParts, &'static str> {
    let scheme_len = if starts_with_ignore_case(bytes, b"http://") {
        4
    } else if starts_with_ignore_case(bytes, b"https://") {
        5
    } else {
        return Err("request-target is neither origin-form nor an http(s) URI");
    };
    let auth_start = scheme_len + 3;
    let rest = bytes.get(auth_start..).unwrap_or_default();
    let auth_len = rest.iter().position(|&b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(rest.len());
    let authority = rest.get(..auth_len).unwrap_or_default();
    if authority.contains(&b'@') {
        return Err("userinfo in request-target");
    }
    let route_len = authority_len(authority).ok_or("invalid authority in request-target")?;
    let tail_start = base + auth_start + auth_len;
    let (mut path, query) = path_and_query(rest.get(auth_len..).unwrap_or_default(), tail_start)?;
    if path.is_empty() {
        // An empty path means "/" (RFC 9110 §4.2.1); the second '/' of "://" is one.
        path = base + auth_start - 1..base + auth_start;
    }
    let authority_start = base + auth_start;
    Ok(TargetParts { path, query, authority: Some(authority_start..authority_start + route_len) })
}

/// Splits `path [ "?" query ]` at the first `?`, checking RFC 3986 characters and
/// percent-encoding in one pass.
fn path_and_query(bytes: &[u8], base: usize) -> Result<(Range<usize>, Option<Range<usize>>), &'static str> {
    let mut query_start = None;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            if !is_hex(bytes.get(i + 1)) || !is_hex(bytes.get(i + 2)) {
                return Err("invalid percent-encoding in request-target");
            }
            i += 3;
            continue;
        }
        if b == b'?' && query_start.is_none() {
            query_start = Some(i + 1);
        } else if !has(b, if query_start.is_some() { QUERY } else { PATH }) {
            return Err(if b == b'#' { "fragment in request-target" } else { "invalid byte in request-target" });
        }
        i += 1;
    }
    let path_end = query_start.map_or(bytes.len(), |q| q - 1);
    Ok((base..base + path_end, query_start.map(|q| base + q..base + bytes.len())))
}

/// Checks `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2) and returns how many leading
/// bytes to route on: all of them, less a trailing `:` with an empty port. Refused: an empty
/// host, IPvFuture, zone identifiers, ports above 65535.
fn authority_len(authority: &[u8]) -> Option<usize> {
    let host_len = if authority.first() == Some(&b'[') {
        let close = authority.iter().position(|&b| b == b']')?;
        let literal = std::str::from_utf8(authority.get(1..close)?).ok()?;
        literal.parse::<std::net::Ipv6Addr>().ok()?;
        close + 1
    } else {
        let len = authority.iter().position(|&b| b == b':').unwrap_or(authority.len());
        let host = authority.get(..len)?;
        if host.is_empty() || !is_reg_name(host) {
            return None;
        }
        len
    };
    match authority.get(host_len..)? {
        [] | [b':'] => Some(host_len),
        [b':', port @ ..] if port.len() <= 5 && port.iter().all(u8::is_ascii_digit) => {
            let n = port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
            (n <= 65535).then_some(authority.len())
        }
        _ => None,
    }
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`; IPv4 addresses are reg-names too.
fn is_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            if !is_hex(host.get(i + 1)) || !is_hex(host.get(i + 2)) {
                return false;
            }
            i += 3;
        } else if has(b, REG_NAME) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

fn is_hex(b: Option<&u8>) -> bool {
    b.is_some_and(u8::is_ascii_hexdigit)
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// Byte classes: `tchar` (RFC 9110 §5.6.2) and the RFC 3986 sets used above.
const TOKEN: u8 = 1;
/// unreserved / sub-delims
const REG_NAME: u8 = 2;
/// pchar / "/", less pct-encoded
const PATH: u8 = 4;
/// pchar / "/" / "?", less pct-encoded
const QUERY: u8 = 8;

static CLASSES: [u8; 256] = byte_classes();

fn has(b: u8, class: u8) -> bool {
    CLASSES.get(usize::from(b)).is_some_and(|c| c & class != 0)
}

#[allow(clippy::indexing_slicing)] // `i < 256` on a [_; 256], evaluated at compile time
const fn byte_classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let alnum = b.is_ascii_alphanumeric();
        let mut class = 0;
        if alnum
            || matches!(b, b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_')
            || matches!(b, b'`' | b'|' | b'~')
        {
            class |= TOKEN;
        }
        let unreserved = alnum || matches!(b, b'-' | b'.' | b'_' | b'~');
        let sub_delim = matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=');
        if unreserved || sub_delim {
            class |= REG_NAME | PATH | QUERY;
        }
        if matches!(b, b':' | b'@' | b'/') {
            class |= PATH | QUERY;
        }
        if b == b'?' {
            class |= QUERY;
        }
        table[i] = class;
        i += 1;
    }
    table
}

/// The position of `part` (a subslice of `buf`) in `buf`.
fn span(buf: &[u8], part: &[u8]) -> Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    start..start.saturating_add(part.len())
}

fn bytes_at<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a [u8] {
    buf.get(range.clone()).unwrap_or_default()
}

/// Whether the two bytes before `pos` are CRLF.
fn crlf_before(buf: &[u8], pos: usize) -> bool {
    pos >= 2 && buf.get(pos - 2..pos) == Some(b"\r\n")
}

fn httparse_reason(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid field name",
        httparse::Error::HeaderValue => "invalid field value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status line",
        httparse::Error::Token => "invalid request line",
        httparse::Error::TooManyHeaders => "too many fields",
        httparse::Error::Version => INVALID_VERSION,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::RequestError::{
        BadRequest, ExpectationFailed, HeadersTooLarge, NotImplemented, UriTooLong, VersionNotSupported,
    };
    use super::*;
    use proptest::prelude::*;

    const LIMITS: RequestLimits = RequestLimits { max_request_line: 64, max_header_bytes: 256, max_headers: 8 };

    fn req(bytes: &[u8]) -> Result<Option<RequestHead>, RequestError> {
        parse_request(bytes, &LIMITS, &mut HeadScratch::new(MAX_HEADERS))
    }

    fn ok(bytes: &[u8]) -> RequestHead {
        match req(bytes) {
            Ok(Some(head)) => head,
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(bytes)),
        }
    }

    /// A GET with `Host: a.example` and the given extra field lines.
    fn get_with(fields: &str) -> Vec<u8> {
        format!("GET / HTTP/1.1\r\nHost: a.example\r\n{fields}\r\n").into_bytes()
    }

    fn s<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a str {
        std::str::from_utf8(&buf[range.clone()]).unwrap()
    }

    /// One test per refused request: the bytes, and the exact error.
    macro_rules! refuse {
        ($($name:ident: $bytes:expr => $err:expr;)*) => {$(
            #[test]
            fn $name() {
                let owned = $bytes;
                let bytes: &[u8] = owned.as_ref();
                assert_eq!(req(bytes), Err($err), "for {:?}", String::from_utf8_lossy(bytes));
            }
        )*};
    }

    refuse! {
        // Line endings: httparse takes a bare LF anywhere.
        bare_lf_after_request_line: b"GET / HTTP/1.1\nHost: a\r\n\r\n" => BadRequest(BARE_LF);
        bare_lf_after_field_line: b"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n" => BadRequest(BARE_LF);
        bare_lf_after_last_field_line: b"GET / HTTP/1.1\r\nHost: a\n\r\n" => BadRequest(BARE_LF);
        bare_lf_as_empty_line: b"GET / HTTP/1.1\r\nHost: a\r\n\n" => BadRequest(BARE_LF);
        bare_lf_without_fields: b"GET / HTTP/1.0\n\r\n" => BadRequest(BARE_LF);
        bare_lf_in_incomplete_head: b"GET / HTTP/1.1\nHost: a" => BadRequest(BARE_LF);
        bare_lf_before_request_line: b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest(BARE_LF);
        bare_cr_before_request_line: b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("bare CR");
        bare_cr_in_target: b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        bare_cr_after_version: b"GET / HTTP/1.1\rHost: a\r\n\r\n" => BadRequest("invalid line ending");
        bare_cr_in_field_value: b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n" => BadRequest("invalid field value");
        bare_cr_ending_field_line: b"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n" => BadRequest("invalid field value");
        cr_cr_lf_line_end: b"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n" => BadRequest("invalid field value");
        two_empty_lines_before_request_line: b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
            => BadRequest("more than one empty line before request line");
        crlf_lf_before_request_line: b"\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
            => BadRequest("more than one empty line before request line");
        space_before_request_line: b" GET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        // Field syntax.
        space_before_colon: b"GET / HTTP/1.1\r\nHost : a\r\n\r\n" => BadRequest("invalid field name");
        tab_before_colon: b"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n" => BadRequest("invalid field name");
        obs_fold_space: b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n" => BadRequest("invalid field name");
        obs_fold_tab: b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n" => BadRequest("invalid field name");
        space_before_first_field: b"GET / HTTP/1.1\r\n Host: a\r\n\r\n" => BadRequest("invalid field name");
        empty_field_name: b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n" => BadRequest("invalid field name");
        field_without_colon: b"GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n" => BadRequest("invalid field name");
        del_in_field_name: b"GET / HTTP/1.1\r\nHost: a\r\nX\x7f: b\r\n\r\n" => BadRequest("invalid field name");
        nul_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n" => BadRequest("invalid field value");
        soh_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n" => BadRequest("invalid field value");
        vt_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x0bb\r\n\r\n" => BadRequest("invalid field value");
        esc_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x1bb\r\n\r\n" => BadRequest("invalid field value");
        del_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n" => BadRequest("invalid field value");
        // Request line.
        invalid_method_token: b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        method_with_slash: b"GE/T / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        tab_as_delimiter: b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        two_spaces_after_method: b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        two_spaces_after_target: b"GET /  HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
        space_after_version: b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n" => BadRequest("invalid line ending");
        http_2_0: b"GET / HTTP/2.0\r\nHost: a\r\n\r\n" => VersionNotSupported;
        http_1_2: b"GET / HTTP/1.2\r\nHost: a\r\n\r\n" => VersionNotSupported;
        http_0_9_shaped: b"GET / HTTP/0.9\r\n\r\n" => VersionNotSupported;
        h2_preface: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" => VersionNotSupported;
        version_without_minor: b"GET / HTTP/1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
        lowercase_version: b"GET / http/1.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
        two_digit_major: b"GET / HTTP/11.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
        two_digit_minor: b"GET / HTTP/1.10\r\nHost: a\r\n\r\n" => BadRequest("invalid line ending");
        missing_version: b"GET /\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        // Content-Length and Transfer-Encoding.
        cl_plus_sign: get_with("Content-Length: +5\r\n") => BadRequest("invalid Content-Length");
        cl_minus_sign: get_with("Content-Length: -5\r\n") => BadRequest("invalid Content-Length");
        cl_inner_space: get_with("Content-Length: 5 5\r\n") => BadRequest("invalid Content-Length");
        cl_list: get_with("Content-Length: 5, 5\r\n") => BadRequest("invalid Content-Length");
        cl_list_no_space: get_with("Content-Length: 5,5\r\n") => BadRequest("invalid Content-Length");
        cl_empty: get_with("Content-Length:\r\n") => BadRequest("invalid Content-Length");
        cl_hex: get_with("Content-Length: 0x5\r\n") => BadRequest("invalid Content-Length");
        cl_trailing_garbage: get_with("Content-Length: 5a\r\n") => BadRequest("invalid Content-Length");
        cl_overflow: get_with("Content-Length: 18446744073709551616\r\n") => BadRequest("invalid Content-Length");
        cl_differing: get_with("Content-Length: 5\r\nContent-Length: 6\r\n") => BadRequest("conflicting Content-Length");
        cl_and_te: get_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
            => BadRequest("Content-Length with Transfer-Encoding");
        te_and_cl: get_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")
            => BadRequest("Content-Length with Transfer-Encoding");
        te_gzip_chunked: get_with("Transfer-Encoding: gzip, chunked\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_chunked_chunked: get_with("Transfer-Encoding: chunked, chunked\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_chunked_twice: get_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")
            => BadRequest("unsupported Transfer-Encoding");
        te_split_over_fields: get_with("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")
            => BadRequest("unsupported Transfer-Encoding");
        te_identity: get_with("Transfer-Encoding: identity\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_xchunked: get_with("Transfer-Encoding: xchunked\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_with_parameter: get_with("Transfer-Encoding: chunked;q=1\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_trailing_comma: get_with("Transfer-Encoding: chunked,\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_empty: get_with("Transfer-Encoding:\r\n") => BadRequest("unsupported Transfer-Encoding");
        te_in_http_1_0: b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" => BadRequest("Transfer-Encoding in HTTP/1.0");
        // Host.
        missing_host: b"GET / HTTP/1.1\r\n\r\n" => BadRequest("missing Host");
        two_hosts: get_with("Host: a.example\r\n") => BadRequest("more than one Host");
        empty_host: b"GET / HTTP/1.1\r\nHost:\r\n\r\n" => BadRequest("invalid Host");
        host_with_space: b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n" => BadRequest("invalid Host");
        host_with_slash: b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n" => BadRequest("invalid Host");
        host_with_userinfo: b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n" => BadRequest("invalid Host");
        host_bad_port: b"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n" => BadRequest("invalid Host");
        host_port_too_big: b"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n" => BadRequest("invalid Host");
        host_port_too_long: b"GET / HTTP/1.1\r\nHost: a:000080\r\n\r\n" => BadRequest("invalid Host");
        host_two_colons: b"GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n" => BadRequest("invalid Host");
        host_unclosed_ipv6: b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n" => BadRequest("invalid Host");
        host_bad_ipv6: b"GET / HTTP/1.1\r\nHost: [::g]\r\n\r\n" => BadRequest("invalid Host");
        host_ipv6_without_brackets: b"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n" => BadRequest("invalid Host");
        host_ipv6_zone: b"GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n" => BadRequest("invalid Host");
        host_ipvfuture: b"GET / HTTP/1.1\r\nHost: [v1.x]\r\n\r\n" => BadRequest("invalid Host");
        host_bad_percent: b"GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n" => BadRequest("invalid Host");
        host_non_ascii: b"GET / HTTP/1.1\r\nHost: \xc3\xa9.example\r\n\r\n" => BadRequest("invalid Host");
        // Request-target forms.
        absolute_form_host_differs: b"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n"
            => BadRequest("Host differs from request-target authority");
        absolute_form_port_differs: b"GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("Host differs from request-target authority");
        absolute_form_without_host_on_1_1: b"GET http://a.example/ HTTP/1.1\r\n\r\n" => BadRequest("missing Host");
        absolute_form_other_scheme: b"GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("request-target is neither origin-form nor an http(s) URI");
        absolute_form_single_slash: b"GET http:/a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("request-target is neither origin-form nor an http(s) URI");
        absolute_form_userinfo: b"GET http://u:p@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("userinfo in request-target");
        absolute_form_empty_host: b"GET http:///x HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("invalid authority in request-target");
        absolute_form_fragment: b"GET http://a.example/x#f HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("fragment in request-target");
        authority_form_without_connect: b"GET a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n"
            => BadRequest("request-target is neither origin-form nor an http(s) URI");
        connect: b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n" => NotImplemented("CONNECT");
        asterisk_without_options: b"GET * HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("asterisk-form is only for OPTIONS");
        asterisk_with_more: b"OPTIONS *a HTTP/1.1\r\nHost: a\r\n\r\n"
            => BadRequest("request-target is neither origin-form nor an http(s) URI");
        origin_form_without_slash: b"GET index.html HTTP/1.1\r\nHost: a\r\n\r\n"
            => BadRequest("request-target is neither origin-form nor an http(s) URI");
        fragment_in_path: b"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("fragment in request-target");
        fragment_in_query: b"GET /a?b#c HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("fragment in request-target");
        quote_in_path: b"GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
        brace_in_query: b"GET /a?{b} HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
        backslash_in_path: b"GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
        utf8_in_path: b"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
        non_utf8_in_path: b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
        bad_percent: b"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid percent-encoding in request-target");
        truncated_percent: b"GET /a%4 HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid percent-encoding in request-target");
        // Connection, Expect.
        connection_invalid_option: get_with("Connection: close, a/b\r\n") => BadRequest("invalid Connection option");
        connection_names_content_length: get_with("Connection: Content-Length\r\nContent-Length: 1\r\n")
            => BadRequest("Connection names an end-to-end field");
        connection_names_host: get_with("Connection: keep-alive, HOST\r\n") => BadRequest("Connection names an end-to-end field");
        expect_other: get_with("Expect: something\r\n") => ExpectationFailed;
        expect_list: get_with("Expect: 100-continue, x\r\n") => ExpectationFailed;
        expect_continue_then_other: get_with("Expect: 100-continue\r\nExpect: x\r\n") => ExpectationFailed;
        expect_other_on_1_0: b"GET / HTTP/1.0\r\nExpect: x\r\n\r\n" => ExpectationFailed;
        // Limits (LIMITS: line 64, head 256, 8 fields).
        request_line_too_long: format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(51)) => UriTooLong;
        request_line_too_long_incomplete: format!("GET /{}", "a".repeat(70)) => UriTooLong;
        too_many_fields: format!("GET / HTTP/1.1\r\nHost: a\r\n{}\r\n", "X: y\r\n".repeat(8)) => HeadersTooLarge;
        head_too_large_complete: get_with(&format!("X: {}\r\n", "y".repeat(250))) => HeadersTooLarge;
        head_too_large_incomplete: format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "y".repeat(250)) => HeadersTooLarge;
    }

    #[test]
    fn simple_get() {
        let buf = b"GET /a/b?c=d&e HTTP/1.1\r\nHost: a.example:8080\r\nAccept: */*\r\n\r\nNEXT";
        let head = ok(buf);
        assert_eq!(head.head_len, buf.len() - 4);
        assert_eq!(head.method, Method::Get);
        assert_eq!(head.method_bytes(buf), b"GET");
        assert_eq!(s(buf, &head.target), "/a/b?c=d&e");
        assert_eq!(head.path_bytes(buf), b"/a/b");
        assert_eq!(head.query_bytes(buf), Some(&b"c=d&e"[..]));
        assert_eq!(head.authority_bytes(buf), Some(&b"a.example:8080"[..]));
        assert_eq!(head.version_minor, 1);
        assert_eq!(head.body, BodyFraming::None);
        assert!(head.keep_alive && !head.expect_continue && !head.upgrade);
    }

    #[test]
    fn one_leading_crlf_is_skipped_and_counted() {
        let buf = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.head_len, buf.len());
        assert_eq!(head.method_range, 2..5);
    }

    #[test]
    fn methods() {
        for (token, method) in [
            ("GET", Method::Get),
            ("HEAD", Method::Head),
            ("POST", Method::Post),
            ("PUT", Method::Put),
            ("DELETE", Method::Delete),
            ("OPTIONS", Method::Options),
            ("PATCH", Method::Patch),
            ("TRACE", Method::Trace),
            ("get", Method::Other),
            ("PROPFIND", Method::Other),
            ("X-!#$%&'*+.^_`|~", Method::Other),
        ] {
            let buf = format!("{token} / HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes();
            let head = ok(&buf);
            assert_eq!(head.method, method, "{token}");
            assert_eq!(head.method_bytes(&buf), token.as_bytes());
        }
    }

    #[test]
    fn field_values_keep_htab_and_obs_text_and_lose_ows() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX-A: \t a\tb\xff \t\r\n\r\n";
        let mut scratch = HeadScratch::new(8);
        assert!(parse_request(buf, &LIMITS, &mut scratch).unwrap().is_some());
        let x = scratch.headers()[1];
        assert_eq!(x.name(buf), b"X-A");
        assert_eq!(x.value(buf), b"a\tb\xff");
    }

    #[test]
    fn content_length_framing() {
        assert_eq!(ok(&get_with("Content-Length: 0\r\n")).body, BodyFraming::Length(0));
        assert_eq!(ok(&get_with("Content-Length:  42 \r\n")).body, BodyFraming::Length(42));
        assert_eq!(ok(&get_with("Content-Length: 18446744073709551615\r\n")).body, BodyFraming::Length(u64::MAX));
        let same = get_with("Content-Length: 7\r\ncontent-length: 007\r\n");
        assert_eq!(ok(&same).body, BodyFraming::Length(7));
    }

    #[test]
    fn chunked_framing() {
        assert_eq!(ok(&get_with("Transfer-Encoding: chunked\r\n")).body, BodyFraming::Chunked);
        assert_eq!(ok(&get_with("transfer-encoding:  CHUNKED \r\n")).body, BodyFraming::Chunked);
    }

    #[test]
    fn valid_hosts() {
        for (host, route) in [
            ("a.example", "a.example"),
            ("A.Example:8080", "A.Example:8080"),
            ("a.example:", "a.example"),
            ("127.0.0.1:80", "127.0.0.1:80"),
            ("[::1]", "[::1]"),
            ("[2001:db8::7]:443", "[2001:db8::7]:443"),
            ("[::ffff:192.0.2.1]:", "[::ffff:192.0.2.1]"),
            ("xn--bcher-kva.example:65535", "xn--bcher-kva.example:65535"),
            ("a%41b", "a%41b"),
            ("a!$&'()*+,;=b", "a!$&'()*+,;=b"),
        ] {
            let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
            assert_eq!(ok(&buf).authority_bytes(&buf), Some(route.as_bytes()), "{host}");
        }
    }

    #[test]
    fn absolute_form() {
        let buf = b"GET http://a.example/x/y?q=1 HTTP/1.1\r\nHost: A.EXAMPLE\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.authority_bytes(buf), Some(&b"a.example"[..]));
        assert_eq!(head.path_bytes(buf), b"/x/y");
        assert_eq!(head.query_bytes(buf), Some(&b"q=1"[..]));

        let buf = b"GET HTTPS://a.example:8443 HTTP/1.1\r\nHost: a.example:8443\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.authority_bytes(buf), Some(&b"a.example:8443"[..]));
        assert_eq!(head.path_bytes(buf), b"/");
        assert_eq!(head.query, None);

        let buf = b"GET http://a.example:?q HTTP/1.1\r\nHost: a.example\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.authority_bytes(buf), Some(&b"a.example"[..]));
        assert_eq!(head.path_bytes(buf), b"/");
        assert_eq!(head.query_bytes(buf), Some(&b"q"[..]));

        // HTTP/1.0 needs no Host: the target names the authority.
        let buf = b"GET http://[::1]:81/ HTTP/1.0\r\n\r\n";
        assert_eq!(ok(buf).authority_bytes(buf), Some(&b"[::1]:81"[..]));
    }

    #[test]
    fn asterisk_form() {
        let buf = b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.method, Method::Options);
        assert_eq!(head.path_bytes(buf), b"*");
        assert_eq!(head.authority_bytes(buf), Some(&b"a"[..]));
    }

    #[test]
    fn origin_form_characters_and_queries() {
        let buf = b"GET /a-._~!$&'()*+,;=:@%2F/?/?:@ HTTP/1.1\r\nHost: a\r\n\r\n";
        let head = ok(buf);
        assert_eq!(head.path_bytes(buf), b"/a-._~!$&'()*+,;=:@%2F/");
        assert_eq!(head.query_bytes(buf), Some(&b"/?:@"[..]));
        let buf = b"GET /? HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(ok(buf).query_bytes(buf), Some(&b""[..]));
    }

    #[test]
    fn http_1_0_connection_rules() {
        let head = ok(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!((head.version_minor, head.authority, head.keep_alive), (0, None, false));
        assert!(ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!ok(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
        let buf = b"GET / HTTP/1.0\r\nHost: a.example\r\n\r\n";
        assert_eq!(ok(buf).authority_bytes(buf), Some(&b"a.example"[..]));
    }

    #[test]
    fn http_1_1_connection_rules() {
        assert!(ok(&get_with("Connection: keep-alive\r\n")).keep_alive);
        assert!(!ok(&get_with("Connection: close\r\n")).keep_alive);
        assert!(!ok(&get_with("Connection: x-a, , CLOSE\r\n")).keep_alive);
        assert!(!ok(&get_with("Connection: x-a\r\nConnection: close\r\n")).keep_alive);
    }

    #[test]
    fn upgrade_and_expect() {
        assert!(ok(&get_with("Upgrade: websocket\r\nConnection: upgrade\r\n")).upgrade);
        assert!(ok(&get_with("Expect: 100-Continue\r\n")).expect_continue);
        assert!(!ok(b"GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
    }

    #[test]
    fn limits_are_inclusive() {
        // A request line of exactly 64 bytes, a head of exactly 256 bytes, exactly 8 fields.
        let line = format!("GET /{} HTTP/1.1", "a".repeat(64 - 14));
        assert_eq!(line.len(), 64);
        let fields = "X: y\r\n".repeat(7);
        let pad = 256 - (line.len() + 2 + "Host: ".len() + 2 + fields.len() + 2);
        let buf = format!("{line}\r\nHost: {}\r\n{fields}\r\n", "a".repeat(pad)).into_bytes();
        assert_eq!(buf.len(), 256);
        assert_eq!(ok(&buf).head_len, 256);
        // One more byte of request line is 414, complete or not.
        let long = format!("GET /{} HTTP/1.1", "a".repeat(51));
        assert_eq!(req(format!("{long}\r\nHost: a\r\n\r\n").as_bytes()), Err(UriTooLong));
        assert_eq!(req(long.as_bytes()), Err(UriTooLong));
        assert_eq!(req(format!("{line}\r").as_bytes()), Ok(None));
    }

    #[test]
    fn scratch_caps_the_field_count_too() {
        let buf = get_with("X: 1\r\nX: 2\r\n");
        assert_eq!(parse_request(&buf, &LIMITS, &mut HeadScratch::new(2)), Err(HeadersTooLarge));
        assert!(parse_request(&buf, &LIMITS, &mut HeadScratch::new(3)).unwrap().is_some());
        assert_eq!(HeadScratch::new(usize::MAX).max_headers(), MAX_HEADERS);
    }

    #[test]
    fn version_prefixes_wait_for_more() {
        for partial in ["GET / HTTP/2", "GET / HTTP/2.", "GET / HTTP/2.0", "GET / HTTP/1.2\r", "GET / HTTP/1.1\r"] {
            assert_eq!(req(partial.as_bytes()), Ok(None), "{partial}");
        }
        assert_eq!(req(b"GET / HTTP/2.0\r\n"), Err(VersionNotSupported));
        assert_eq!(req(b"GET / HTTP/2.x"), Err(BadRequest(INVALID_VERSION)));
    }

    #[test]
    fn every_prefix_of_a_valid_head_is_incomplete() {
        let buf = b"\r\nPOST /p?q HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\nX: y\r\n\r\n";
        for end in 0..buf.len() {
            assert_eq!(req(&buf[..end]), Ok(None), "prefix of {end} bytes");
        }
        assert_eq!(ok(buf).body, BodyFraming::Length(3));
    }

    #[test]
    fn pipelined_bytes_are_not_part_of_the_head() {
        let first = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
        let mut buf = first.to_vec();
        buf.extend_from_slice(b"helloGET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let head = ok(&buf);
        assert_eq!(head.head_len, first.len());
        assert_eq!(ok(&buf[first.len() + 5..]).method, Method::Get);
    }

    #[test]
    fn header_ranges_without_reallocation() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nx-two:2\r\n\r\n";
        let mut scratch = HeadScratch::new(8);
        let (ptr, cap) = (scratch.headers.as_ptr(), scratch.headers.capacity());
        for _ in 0..3 {
            assert!(parse_request(buf, &LIMITS, &mut scratch).unwrap().is_some());
        }
        assert_eq!((scratch.headers.as_ptr(), scratch.headers.capacity()), (ptr, cap));
        let fields: Vec<(&[u8], &[u8])> = scratch.headers().iter().map(|h| (h.name(buf), h.value(buf))).collect();
        assert_eq!(fields, [(&b"Host"[..], &b"a"[..]), (b"X-One", b"1"), (b"x-two", b"2")]);
        assert_eq!(scratch.headers()[1].name_range(), 25..30);
    }

    #[test]
    fn hop_by_hop_fields() {
        let buf = get_with("Connection: X-Secret, keep-alive\r\nconnection: x-other\r\nX-Secret: 1\r\n");
        let mut scratch = HeadScratch::new(8);
        assert!(parse_request(&buf, &LIMITS, &mut scratch).unwrap().is_some());
        let hop = |name: &[u8]| is_hop_by_hop(name, &buf, &scratch);
        for name in [
            &b"Connection"[..],
            b"keep-alive",
            b"TE",
            b"Trailer",
            b"Transfer-Encoding",
            b"Upgrade",
            b"Proxy-Connection",
            b"x-secret",
            b"X-OTHER",
        ] {
            assert!(hop(name), "{}", String::from_utf8_lossy(name));
        }
        for name in [&b"Host"[..], b"Content-Length", b"Expect", b"X-Secre", b"Trailers", b"Accept"] {
            assert!(!hop(name), "{}", String::from_utf8_lossy(name));
        }
    }

    #[test]
    fn error_statuses() {
        let cases = [
            (BadRequest("x"), 400),
            (UriTooLong, 414),
            (ExpectationFailed, 417),
            (HeadersTooLarge, 431),
            (NotImplemented("CONNECT"), 501),
            (VersionNotSupported, 505),
        ];
        for (error, status) in cases {
            assert_eq!(error.status(), status);
            assert!(!error.reason().is_empty());
        }
        assert_eq!(BadRequest("x").reason(), "x");
    }

    // Responses.

    fn resp(bytes: &[u8], head: bool) -> Result<Option<ResponseHead>, ResponseError> {
        parse_response(bytes, 256, head, &mut HeadScratch::new(8))
    }

    fn resp_ok(bytes: &[u8], head: bool) -> ResponseHead {
        match resp(bytes, head) {
            Ok(Some(h)) => h,
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(bytes)),
        }
    }

    fn invalid(bytes: &[u8], reason: &'static str) {
        assert_eq!(resp(bytes, false), Err(ResponseError::Invalid(reason)), "{:?}", String::from_utf8_lossy(bytes));
    }

    #[test]
    fn response_framing_by_fields() {
        let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let head = resp_ok(buf, false);
        assert_eq!((head.status, head.version_minor, head.head_len), (200, 1, buf.len() - 5));
        assert_eq!((head.framing, head.keep_alive), (ResponseFraming::Length(5), true));
        assert_eq!(head.reason_bytes(buf), b"OK");
        let chunked = resp_ok(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false);
        assert_eq!((chunked.framing, chunked.keep_alive), (ResponseFraming::Chunked, true));
        let until_close = resp_ok(b"HTTP/1.1 200 OK\r\n\r\n", false);
        assert_eq!((until_close.framing, until_close.keep_alive), (ResponseFraming::UntilClose, false));
    }

    #[test]
    fn responses_without_body() {
        for (buf, head) in [
            (&b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"[..], true),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", true),
            (b"HTTP/1.1 100 Continue\r\n\r\n", false),
            (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", false),
            (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false),
            (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false),
            (b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip\r\n\r\n", false),
        ] {
            let parsed = resp_ok(buf, head);
            assert_eq!((parsed.framing, parsed.keep_alive), (ResponseFraming::None, true));
        }
        assert_eq!(
            resp(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", true),
            Err(ResponseError::Invalid("invalid Content-Length"))
        );
        invalid(
            b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
            "Content-Length with Transfer-Encoding",
        );
        invalid(
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "conflicting Content-Length",
        );
    }

    #[test]
    fn response_framing_refusals() {
        invalid(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding");
        invalid(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", "unsupported Transfer-Encoding");
        invalid(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "Content-Length with Transfer-Encoding",
        );
        invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "conflicting Content-Length");
        invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 3,3\r\n\r\n", "invalid Content-Length");
        invalid(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer-Encoding in HTTP/1.0");
    }

    #[test]
    fn response_status_line_refusals() {
        invalid(b"HTTP/1.1 099 Odd\r\n\r\n", "status code out of range");
        invalid(b"HTTP/1.1 600 Odd\r\n\r\n", "status code out of range");
        invalid(b"HTTP/1.1 20 OK\r\n\r\n", "invalid status line");
        invalid(b"HTTP/1.1 2000 OK\r\n\r\n", "invalid status line");
        invalid(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "no SP after status code");
        invalid(b"HTTP/1.1  200 OK\r\n\r\n", "invalid status line");
        invalid(b"HTTP/2.0 200 OK\r\n\r\n", INVALID_VERSION);
        invalid(b"HTTP/1.1 200 O\x7fK\r\n\r\n", "invalid status line");
        invalid(b"\r\nHTTP/1.1 200 OK\r\n\r\n", "empty line before status line");
        invalid(b"\nHTTP/1.1 200 OK\r\n\r\n", "empty line before status line");
    }

    #[test]
    fn response_line_and_field_refusals() {
        invalid(b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", BARE_LF);
        invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", BARE_LF);
        invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", BARE_LF);
        invalid(b"HTTP/1.1 200 OK\n\n", BARE_LF);
        invalid(b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", "invalid field name");
        invalid(b"HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", "invalid field name");
        invalid(b"HTTP/1.1 200 OK\r\nX: a\0\r\nContent-Length: 0\r\n\r\n", "invalid field value");
        invalid(b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 0\r\n\r\n", "invalid field value");
        invalid(b"HTTP/1.1 200 OK\r\nConnection: close, host\r\n\r\n", "Connection names an end-to-end field");
    }

    #[test]
    fn response_reason_phrase() {
        let buf = b"HTTP/1.1 404 Not \t Found \xe9\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"Not \t Found \xe9");
        let buf = b"HTTP/1.1 200 \r\n\r\n";
        assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"");
        let buf = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"OK");
    }

    #[test]
    fn response_connection_rules() {
        let close = resp_ok(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!close.keep_alive);
        let old = resp_ok(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!old.keep_alive);
        let old_ka = resp_ok(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false);
        assert!(old_ka.keep_alive && old_ka.version_minor == 0);
    }

    #[test]
    fn response_limits_and_incomplete() {
        let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        for end in 0..buf.len() {
            assert_eq!(resp(&buf[..end], false), Ok(None), "prefix of {end} bytes");
        }
        let big = format!("HTTP/1.1 200 OK\r\nX: {}", "y".repeat(300));
        assert_eq!(resp(big.as_bytes(), false), Err(ResponseError::TooLarge));
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: y\r\n".repeat(9));
        assert_eq!(resp(many.as_bytes(), false), Err(ResponseError::TooLarge));
    }

    #[test]
    fn response_fields_and_hop_by_hop() {
        let buf = b"HTTP/1.1 200 OK\r\nConnection: x-up\r\nX-Up: 1\r\nContent-Length: 0\r\n\r\n";
        let mut scratch = HeadScratch::new(8);
        assert!(parse_response(buf, 256, false, &mut scratch).unwrap().is_some());
        assert_eq!(scratch.headers().len(), 3);
        assert_eq!(scratch.headers()[1].value(buf), b"1");
        assert!(is_hop_by_hop(b"X-Up", buf, &scratch));
        assert!(!is_hop_by_hop(b"Content-Length", buf, &scratch));
    }

    fn in_bounds(r: &Range<usize>, len: usize) -> bool {
        r.start <= r.end && r.end <= len
    }

    proptest! {
        #[test]
        fn parse_request_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut scratch = HeadScratch::new(8);
            if let Ok(Some(head)) = parse_request(&bytes, &LIMITS, &mut scratch) {
                prop_assert!(head.head_len <= bytes.len());
                prop_assert!(in_bounds(&head.target, head.head_len) && in_bounds(&head.path, head.head_len));
            }
        }

        #[test]
        fn mutated_requests_never_panic_and_stay_in_bounds(
            at in 0usize..80, byte in any::<u8>(), cut in 0usize..80,
        ) {
            let mut buf = b"POST http://a.example/p?q HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n\r\n".to_vec();
            if let Some(b) = buf.get_mut(at) { *b = byte; }
            buf.truncate(buf.len().saturating_sub(cut));
            let mut scratch = HeadScratch::new(8);
            if let Ok(Some(head)) = parse_request(&buf, &LIMITS, &mut scratch) {
                prop_assert!(head.head_len <= buf.len());
                for r in [&head.method_range, &head.target, &head.path] {
                    prop_assert!(in_bounds(r, head.head_len));
                }
                for h in scratch.headers() {
                    prop_assert!(in_bounds(&h.name_range(), head.head_len));
                    prop_assert!(in_bounds(&h.value_range(), head.head_len));
                }
            }
        }

        #[test]
        fn parse_response_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), head in any::<bool>()) {
            let mut scratch = HeadScratch::new(8);
            if let Ok(Some(parsed)) = parse_response(&bytes, 256, head, &mut scratch) {
                prop_assert!(parsed.head_len <= bytes.len() && in_bounds(&parsed.reason, parsed.head_len));
            }
        }

        #[test]
        fn generated_fields_come_back_exactly(
            fields in proptest::collection::vec(("[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}", "[!-~]([ -~]{0,20}[!-~])?"), 0..6),
        ) {
            let mut text = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
            for (name, value) in &fields {
                text.push_str(&format!("X-{name}:  {value}\t\r\n"));
            }
            text.push_str("\r\n");
            let buf = text.into_bytes();
            let mut scratch = HeadScratch::new(8);
            let parsed = parse_request(&buf, &LIMITS, &mut scratch);
            prop_assert!(matches!(parsed, Ok(Some(_))), "{:?}", parsed);
            let got: Vec<(String, String)> = scratch.headers().iter().skip(1).map(|h| {
                (String::from_utf8_lossy(h.name(&buf)).into_owned(), String::from_utf8_lossy(h.value(&buf)).into_owned())
            }).collect();
            let want: Vec<(String, String)> = fields.iter().map(|(n, v)| (format!("X-{n}"), v.clone())).collect();
            prop_assert_eq!(got, want);
        }
    }
}
