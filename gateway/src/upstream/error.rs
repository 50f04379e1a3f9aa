//! Why an upstream exchange failed, as the forwarders report it.

use std::io;

use super::Outcome;
use crate::codec::body::TransferError;

/// Why an upstream exchange failed before a response head was forwarded.
#[derive(Debug)]
pub enum UpstreamError {
    /// `protocol = "auto"` and the endpoint chose HTTP/1.1 by ALPN: nothing was sent; the
    /// request goes over HTTP/1.1 instead.
    Http1Only,
    Connect(io::Error),
    /// The route timeout expired before the response head arrived.
    Timeout,
    /// Sending the request failed; `retryable` if nothing had been sent from the client body.
    Send(io::Error),
    /// The upstream closed or reset before sending any response byte.
    ClosedEarly,
    /// Malformed, oversized or otherwise unacceptable response.
    Protocol(&'static str),
    /// An HTTP/2 upstream refused the stream (REFUSED_STREAM): it did not process it.
    RefusedStream,
    /// The client's request body failed (too large, malformed, slow, gone).
    ClientBody(TransferError),
    /// The cluster is at `caps.max_connections` and no pooled connection is free.
    Overflow,
}

impl UpstreamError {
    /// What the failure says about the endpoint; `None` when it says nothing (the client's
    /// body failed, the cluster was at its cap, ALPN chose HTTP/1.1).
    pub fn outcome(&self) -> Option<Outcome> {
        match self {
            Self::Connect(_) => Some(Outcome::ConnectFailure),
            Self::Timeout => Some(Outcome::Timeout),
            Self::Send(_) | Self::ClosedEarly | Self::RefusedStream => Some(Outcome::Reset),
            Self::Protocol(_) => Some(Outcome::Protocol),
            Self::Http1Only | Self::ClientBody(_) | Self::Overflow => None,
        }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "connect failed: {e}"),
            Self::Timeout => f.write_str("route timeout before the response head"),
            Self::Send(e) => write!(f, "sending the request failed: {e}"),
            Self::ClosedEarly => f.write_str("upstream closed before responding"),
            Self::Protocol(why) => write!(f, "invalid response: {why}"),
            Self::ClientBody(e) => write!(f, "client request body: {e:?}"),
            Self::Overflow => f.write_str("cluster at its connection cap"),
            Self::Http1Only => f.write_str("the upstream chose HTTP/1.1 by ALPN"),
            Self::RefusedStream => f.write_str("the upstream refused the stream"),
        }
    }
}
