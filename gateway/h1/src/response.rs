//! Response heads from an upstream: the status line and how the body is framed.

use std::mem::MaybeUninit;
use std::ops::Range;

use httparse::Status;

use super::fields::{scan_fields, Fields, Te};
use super::{bytes_at, httparse_reason, HeadScratch, MAX_HEADERS};

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
