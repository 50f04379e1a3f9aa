//! Interim (1xx) responses from an upstream (HTTP/1.1 or HTTP/2), forwarded to the client
//! before the final response (RFC 9110 §15.2: a proxy MUST forward them unless the client is
//! HTTP/1.0 or the proxy itself asked for them).
//!
//! - `101` is final here (a WebSocket switch, handled by `read_response_head`).
//! - `100 Continue` is not forwarded to an HTTP/1.1 client whose `Expect: 100-continue` the
//!   gateway already answered itself (it strips `Expect` upstream): a second 100 would answer
//!   nothing. Otherwise it is forwarded like any other 1xx.
//! - Other 1xx (`103 Early Hints`, `102`, unknown ones) reach HTTP/1.1 clients (hop-by-hop
//!   fields removed) and HTTP/2 clients (`SendResponse::send_informational`), from HTTP/1.1
//!   and HTTP/2 upstreams (`ResponseFuture::poll_informational`); an HTTP/1.0 client never
//!   sees them.
//! - At most [`MAX_INTERIM`] per response: an upstream that sends more gets a 502 (an endless
//!   stream of 1xx would keep the request open and forward unbounded bytes without ever
//!   answering; 10 is far more than any real server sends, usually one 103 at most).

use std::time::Duration;

use crate::codec::body::TransferError;
use crate::codec::h1::{self, HeadScratch, ResponseHead};
use crate::codec::response::push_num;
use crate::runtime::io::write_from;
use crate::runtime::stream::Stream;
use crate::upstream::UpstreamError;
use crate::worker::Worker;

/// Interim responses accepted per exchange; one more is a 502.
pub const MAX_INTERIM: usize = 10;

/// Where interim responses go.
pub enum Interim<'a> {
    /// Dropped: an HTTP/1.0 client, or nobody (a mirrored copy).
    Drop,
    /// Written to an HTTP/1.1 client connection within `timeout`; `continued`: the gateway
    /// sent this client a 100 Continue already.
    H1 { client: &'a mut Stream, continued: bool, timeout: Duration },
    /// Sent on an HTTP/2 client stream as a HEADERS frame without END_STREAM.
    H2(&'a crate::codec::h2shared::H2Stream),
}

impl Interim<'_> {
    /// The sink for an HTTP/1.x client of minor version `version_minor`; `continued`: the
    /// gateway answered its `Expect: 100-continue` already.
    pub fn h1(client: &mut Stream, version_minor: u8, continued: bool, timeout: Duration) -> Interim<'_> {
        if version_minor >= 1 {
            Interim::H1 { client, continued, timeout }
        } else {
            Interim::Drop
        }
    }

    /// Handles the interim head at the start of `buf` (described by `scratch`): sends it to an
    /// HTTP/2 client at once, or returns the bytes to write to an HTTP/1.1 client (see
    /// [`Interim::write`]). Nothing for a dropped sink, or a 100 the gateway sent already.
    pub(crate) fn prepare(
        &mut self,
        worker: &Worker,
        buf: &[u8],
        resp: &ResponseHead,
        scratch: &HeadScratch,
    ) -> Option<Vec<u8>> {
        if resp.status == 100 && self.continued() {
            return None;
        }
        let fields = || {
            scratch.headers().iter().map(|h| (h.name(buf), h.value(buf))).filter(|(name, _)| {
                !h1::is_hop_by_hop(name, buf, scratch) && !name.eq_ignore_ascii_case(b"content-length")
            })
        };
        match self {
            Interim::Drop => None,
            Interim::H1 { .. } => {
                let mut out = worker.buffers.take();
                out.extend_from_slice(b"HTTP/1.1 ");
                push_num(&mut out, u64::from(resp.status));
                out.push(b' ');
                out.extend_from_slice(buf.get(resp.reason.clone()).unwrap_or_default());
                out.extend_from_slice(b"\r\n");
                for (name, value) in fields() {
                    out.extend_from_slice(name);
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
                Some(out)
            }
            Interim::H2(stream) => {
                let sent = stream.send_head_with(resp.status, false, |w| {
                    for (name, value) in fields() {
                        if !super::h2up::connection_specific_bytes(name) {
                            w.field(name, value);
                        }
                    }
                });
                // A failure means the stream is gone: the final response will fail the same way.
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "interim response not sent to the HTTP/2 client");
                }
                None
            }
        }
    }

    /// Whether the client got a 100 Continue from the gateway already.
    fn continued(&self) -> bool {
        matches!(self, Interim::H1 { continued: true, .. })
    }

    /// Forwards an interim head received from an HTTP/2 upstream (connection-specific fields
    /// removed). Called boxed, like [`Interim::write`].
    pub(crate) async fn forward_h2(
        &mut self,
        worker: &Worker,
        head: http::response::Parts,
    ) -> Result<(), UpstreamError> {
        if head.status == http::StatusCode::CONTINUE && self.continued() {
            return Ok(());
        }
        let fields = || head.headers.iter().filter(|(name, _)| !super::h2up::connection_specific(name.as_str()));
        match self {
            Interim::Drop => Ok(()),
            Interim::H1 { .. } => {
                let mut out = worker.buffers.take();
                out.extend_from_slice(b"HTTP/1.1 ");
                push_num(&mut out, u64::from(head.status.as_u16()));
                out.push(b' ');
                out.extend_from_slice(head.status.canonical_reason().unwrap_or("").as_bytes());
                out.extend_from_slice(b"\r\n");
                for (name, value) in fields() {
                    out.extend_from_slice(name.as_str().as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(value.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
                self.write(worker, out).await.map(|_| ())
            }
            Interim::H2(stream) => {
                let sent = stream.send_head_with(head.status.as_u16(), false, |w| {
                    for (name, value) in fields() {
                        w.field(name.as_str().as_bytes(), value.as_bytes());
                    }
                });
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "interim response not sent to the HTTP/2 client");
                }
                Ok(())
            }
        }
    }

    /// Writes an interim head prepared by [`Interim::prepare`] to the HTTP/1.1 client. Kept out
    /// of `read_response_head`'s future (called boxed): 1xx responses are rare.
    pub(crate) async fn write(&mut self, worker: &Worker, out: Vec<u8>) -> Result<u64, UpstreamError> {
        let Interim::H1 { client, timeout, .. } = self else {
            worker.buffers.give(out);
            return Ok(0);
        };
        let n = out.len() as u64;
        let (res, out) = write_from(client, out, 0, *timeout).await;
        worker.buffers.give(out);
        worker.stats.downstream_bytes_out.add(n);
        res.map(|_| n).map_err(|e| UpstreamError::ClientBody(TransferError::Write(e)))
    }
}
