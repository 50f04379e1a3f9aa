//! The gateway's HTTP/1.1 codec, a crate of its own so that it can know nothing of routes,
//! upstreams or the runtime: message heads (RFC 9110, RFC 9112), parsed strictly and without
//! heap allocation, and the chunked transfer coding ([`chunked`]).
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

mod ascii;
pub mod chunked;
mod classes;
mod fields;
mod request;
mod response;
mod uri;

pub use ascii::eq_lower;
pub use request::{parse_request, BodyFraming, Method, RequestError, RequestHead, RequestLimits};
pub use response::{parse_response, ResponseError, ResponseFraming, ResponseHead};
pub use uri::{authority_len, valid_origin_form};

use std::ops::Range;

use fields::list_elements;

/// The most field lines one head can carry, whatever the limits say. httparse's slots for them
/// live uninitialised on the stack (32 bytes each), so a parse touches no heap.
pub const MAX_HEADERS: usize = 256;

/// Field lines a [`HeadScratch`] has room for before it grows: more than most requests and
/// responses carry.
pub const TYPICAL_HEADERS: usize = 32;

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

/// Storage that parsing reuses for the field ranges of one head after another: it starts with
/// room for a typical head and grows at most to [`HeadScratch::max_headers`] fields (a head is
/// refused before it could hold more), so a pool of them costs little while requests are few.
#[derive(Debug, Clone)]
pub struct HeadScratch {
    headers: Vec<HeaderRange>,
    /// Indices into `headers` of the `Connection` fields that name options other than the
    /// fixed hop-by-hop fields (`Connection: keep-alive` is not among them).
    connection: Vec<usize>,
    max_headers: usize,
}

impl HeadScratch {
    /// For heads of at most `max_headers` fields (at most [`MAX_HEADERS`]); room for
    /// [`TYPICAL_HEADERS`] at first.
    pub fn new(max_headers: usize) -> Self {
        let max_headers = max_headers.min(MAX_HEADERS);
        Self { headers: Vec::with_capacity(max_headers.min(TYPICAL_HEADERS)), connection: Vec::new(), max_headers }
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

/// Whether a field must not be forwarded: the fixed hop-by-hop fields (`Connection`,
/// `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, `Proxy-Connection`) and every
/// option listed in the head's `Connection` fields, compared case-insensitively. `buf` and
/// `scratch` are those of the last successful parse.
pub fn is_hop_by_hop(name: &[u8], buf: &[u8], scratch: &HeadScratch) -> bool {
    is_fixed_hop_by_hop(name)
        || scratch
            .connection
            .iter()
            .filter_map(|&i| scratch.headers.get(i))
            .any(|h| list_elements(h.value(buf)).any(|option| option.eq_ignore_ascii_case(name)))
}

/// Whether `name` is one of the fixed hop-by-hop fields: `Connection`, `Keep-Alive`, `TE`,
/// `Trailer`, `Transfer-Encoding`, `Upgrade`, `Proxy-Connection` (ASCII case-insensitive).
pub fn is_fixed_hop_by_hop(name: &[u8]) -> bool {
    let is = |fixed: &[u8]| eq_lower(name, fixed);
    // By length first: most names compare with none of them.
    match name.len() {
        2 => is(b"te"),
        7 => is(b"trailer") || is(b"upgrade"),
        10 => is(b"connection") || is(b"keep-alive"),
        16 => is(b"proxy-connection"),
        17 => is(b"transfer-encoding"),
        _ => false,
    }
}

/// Whether a `#rule` list field value has an element equal to `token` (case-insensitive).
pub fn list_contains(value: &[u8], token: &[u8]) -> bool {
    list_elements(value).any(|e| e.eq_ignore_ascii_case(token))
}

const BARE_LF: &str = "line not terminated by CRLF";
const INVALID_VERSION: &str = "invalid HTTP version";

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
mod tests;
