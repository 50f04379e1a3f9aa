//! Every answer the gateway makes itself, and the one place where a failure becomes one.
//!
//! A failure carries which side failed (the client, the upstream, admission, the gateway
//! itself); [`Refusal::for_upstream`] and [`Refusal::for_client_body`] turn it into the status,
//! `x-gateway-reason` and `Retry-After` that both protocols send (`downstream::h1` writes it as
//! HTTP/1.1 lines, `downstream::h2` as an HTTP/2 head), or into no answer at all when none can be
//! sent (the connection is closed or the stream reset instead).

use std::borrow::Cow;

use crate::codec::body::TransferError;
use crate::upstream::UpstreamError;

/// What the gateway answers without (or instead of) an upstream response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A gateway-made error or refusal.
    Refuse(Refusal),
    /// The direct response of route `i`.
    Direct(usize),
    /// The redirect of route `i`.
    Redirect(usize),
}

/// A gateway-made error response: a status, a short text body (its reason phrase), and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    /// Extra fields as HTTP/1.1 field lines (`name: value\r\n`): `retry-after`,
    /// `x-gateway-reason`, the RateLimit fields.
    pub fields: Cow<'static, [u8]>,
}

impl Refusal {
    /// A plain error with no extra field.
    pub const fn status(status: u16) -> Self {
        Self { status, fields: Cow::Borrowed(b"") }
    }

    /// 404: no route matched.
    pub const NOT_FOUND: Self = Self::status(404);

    /// 503: admission shed the request (its class has no capacity now).
    pub const SHED: Self = Self { status: 503, fields: Cow::Borrowed(b"retry-after: 1\r\nx-gateway-reason: shed\r\n") };

    /// 503: a cap was hit (cluster requests, pending, connections).
    pub const OVERFLOW: Self =
        Self { status: 503, fields: Cow::Borrowed(b"retry-after: 1\r\nx-gateway-reason: overflow\r\n") };

    /// 503: every endpoint of the cluster is ejected or unhealthy.
    pub const NO_HEALTHY_UPSTREAM: Self =
        Self { status: 503, fields: Cow::Borrowed(b"x-gateway-reason: no-healthy-upstream\r\n") };

    /// 504: the client's own deadline had passed on arrival.
    pub const DEADLINE: Self = Self { status: 504, fields: Cow::Borrowed(b"x-gateway-reason: deadline\r\n") };

    /// 429 with the rate limit's fields (`Retry-After`, `RateLimit-Policy`, `RateLimit`).
    pub fn rate_limited(mut fields: Vec<u8>) -> Self {
        fields.extend_from_slice(b"x-gateway-reason: rate-limited\r\n");
        Self { status: 429, fields: Cow::Owned(fields) }
    }

    /// The answer to a failed upstream exchange, `None` when none can be sent (the client's
    /// body broke off: the connection closes or the stream is reset).
    pub fn for_upstream(e: &UpstreamError) -> Option<Self> {
        match e {
            UpstreamError::Connect(_)
            | UpstreamError::Send(_)
            | UpstreamError::ClosedEarly
            | UpstreamError::RefusedStream
            | UpstreamError::Protocol(_)
            | UpstreamError::Http1Only => Some(Self::status(502)),
            UpstreamError::Timeout => Some(Self::status(504)),
            UpstreamError::ClientBody(t) => Self::for_client_body(t),
            UpstreamError::Overflow => Some(Self::OVERFLOW),
        }
    }

    /// The answer to a request body that failed, if an answer is still possible.
    pub fn for_client_body(e: &TransferError) -> Option<Self> {
        match e {
            TransferError::TooLarge => Some(Self::status(413)),
            TransferError::Framing => Some(Self::status(400)),
            TransferError::ReadTimeout => Some(Self::status(408)),
            TransferError::Truncated | TransferError::Read(_) => None,
            TransferError::Write(_) => Some(Self::status(502)),
        }
    }

    /// The fields as (lower-case name, value) pairs, for HTTP/2.
    pub fn pairs(&self) -> impl Iterator<Item = (String, &str)> {
        std::str::from_utf8(&self.fields)
            .unwrap_or_default()
            .split("\r\n")
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (n.to_ascii_lowercase(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_one_answer_each() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(Refusal::for_upstream(&UpstreamError::Connect(io())).map(|r| r.status), Some(502));
        assert_eq!(Refusal::for_upstream(&UpstreamError::Timeout).map(|r| r.status), Some(504));
        assert_eq!(Refusal::for_upstream(&UpstreamError::Overflow), Some(Refusal::OVERFLOW));
        let body = |t| Refusal::for_upstream(&UpstreamError::ClientBody(t)).map(|r| r.status);
        assert_eq!(body(TransferError::TooLarge), Some(413));
        assert_eq!(body(TransferError::ReadTimeout), Some(408));
        assert_eq!(body(TransferError::Truncated), None, "a client that left gets no answer");
    }

    #[test]
    fn fields_read_as_pairs() {
        let refusal = Refusal::rate_limited(b"Retry-After: 3\r\n".to_vec());
        let pairs: Vec<_> = refusal.pairs().collect();
        assert_eq!(pairs, vec![("retry-after".to_owned(), "3"), ("x-gateway-reason".to_owned(), "rate-limited")]);
        assert_eq!(Refusal::SHED.pairs().count(), 2);
    }
}
