//! Forwarding to an HTTP/2 upstream (`protocol = "h2"`, or `"auto"` when ALPN chose h2), from
//! HTTP/2 clients (streams both ways at once, trailers passed through: gRPC works end to end)
//! and from HTTP/1.1 clients (the body sent, then the response relayed).

use std::future::Future;
use std::task::Poll;

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use monoio::time::Instant;

use super::interim::{Interim, MAX_INTERIM};
use crate::upstream::h2pool::{self, H2Endpoint, H2Error, H2Stream};
use crate::upstream::UpstreamError;
use crate::worker::Worker;

/// Fields never forwarded between HTTP/2 peers or from HTTP/1.1 into HTTP/2 (RFC 9113 §8.2.2);
/// `te: trailers` is the one TE value allowed and is kept.
pub fn connection_specific(name: &str) -> bool {
    matches!(name, "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "host")
}

/// [`connection_specific`] for a name in any case (from an HTTP/1.1 head).
pub fn connection_specific_bytes(name: &[u8]) -> bool {
    [&b"connection"[..], b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade", b"host"]
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// Maps a failure to get a stream to the proxy's error kinds (nothing was sent).
pub fn acquire_error(e: H2Error) -> UpstreamError {
    match e {
        H2Error::Connect(io) | H2Error::Tls(io) => UpstreamError::Connect(io),
        H2Error::Timeout => UpstreamError::Connect(std::io::ErrorKind::TimedOut.into()),
        H2Error::NoH2Alpn => UpstreamError::Http1Only,
        H2Error::Handshake(_) => UpstreamError::Protocol("HTTP/2 handshake with the upstream failed"),
        H2Error::Busy => UpstreamError::Overflow,
    }
}

/// Opens a stream and sends the request head; returns the stream slot, the response future
/// and the request body sender (unless `end_of_stream`).
pub async fn send_head(
    worker: &Worker,
    endpoint: &std::rc::Rc<H2Endpoint>,
    req: http::Request<()>,
    end_of_stream: bool,
    deadline: Instant,
    connect_limit: std::time::Duration,
) -> Result<(H2Stream, h2::client::ResponseFuture, Option<SendStream<Bytes>>), UpstreamError> {
    let left = deadline.saturating_duration_since(Instant::now());
    // A limit below the endpoint's own (`forward::connect_limit` cut it to leave a retry time);
    // otherwise the endpoint's wait for a connection or a free slot ends on its own terms.
    let cut = (connect_limit < endpoint.connect_timeout()).then_some(connect_limit);
    let mut stream = match crate::runtime::timeout(cut.map_or(left, |c| left.min(c)), endpoint.acquire()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            if !matches!(e, H2Error::Busy) {
                worker.stats.upstream_connect_errors.inc();
            }
            return Err(acquire_error(e));
        }
        // Cut before the try's deadline: nothing was sent, a connect failure (retried whatever
        // the method).
        Err(_) if cut.is_some_and(|c| c < left) => {
            worker.stats.upstream_connect_errors.inc();
            return Err(UpstreamError::Connect(std::io::ErrorKind::TimedOut.into()));
        }
        Err(_) => return Err(UpstreamError::Timeout),
    };
    let (resp, tx) = h2pool::start(&mut stream, req, end_of_stream).map_err(stream_error)?;
    Ok((stream, resp, tx))
}

/// Maps the error that kept a stream from opening (h2 opens none on a connection that received
/// GOAWAY) or ended it before its response head. Two mean the upstream did not
/// process the stream, so the request can be sent again whatever its method (when its body is
/// not gone): REFUSED_STREAM (RFC 9113 §8.7), and a GOAWAY whose last stream id is below the
/// stream's (§6.8: h2 ends exactly those streams with the GOAWAY's error, from the peer). An
/// upstream that shuts down with one GOAWAY (Go's and nginx's servers do) ignores the streams
/// that crossed it.
pub fn stream_error(e: h2::Error) -> UpstreamError {
    if e.reason() == Some(h2::Reason::REFUSED_STREAM) || (e.is_go_away() && e.is_remote()) {
        UpstreamError::RefusedStream
    } else {
        UpstreamError::Send(std::io::Error::other(e))
    }
}

/// Awaits the response head within the deadline; interim (1xx) heads before it go to
/// `interim` (at most [`MAX_INTERIM`], then a protocol error, as from HTTP/1.1 upstreams).
pub async fn response_head(
    worker: &Worker,
    mut resp: h2::client::ResponseFuture,
    interim: &mut Interim<'_>,
    deadline: Instant,
) -> Result<http::Response<RecvStream>, UpstreamError> {
    let mut interims = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = std::future::poll_fn(|cx| {
            if let Poll::Ready(Some(Ok(info))) = resp.poll_informational(cx) {
                return Poll::Ready(Err(info));
            }
            std::pin::Pin::new(&mut resp).poll(cx).map(Ok)
        });
        match crate::runtime::timeout(left, next).await {
            Ok(Ok(Ok(r))) => return Ok(r),
            Ok(Ok(Err(e))) => return Err(stream_error(e)),
            Ok(Err(_)) if interims >= MAX_INTERIM => {
                return Err(UpstreamError::Protocol("more than 10 interim (1xx) responses"));
            }
            Ok(Err(info)) => {
                interims += 1;
                Box::pin(interim.forward_h2(worker, info.into_parts().0)).await?;
            }
            Err(_) => return Err(UpstreamError::Timeout),
        }
    }
}
