//! Streaming a message body from one connection to another with bounded buffers.
//!
//! The body is never held whole: bytes are read into the source buffer, framed for the
//! destination (passed through, or re-encoded as canonical chunks) and written out before more
//! is read. Chunked input is decoded strictly, so nothing ambiguous reaches the other side.

use std::io;
use std::time::Duration;

use crate::runtime::stream::Stream;

use super::chunked::{encode_chunk, ChunkedDecoder, LAST_CHUNK};
use crate::runtime::io::{make_room, read_append_timeout};
use crate::runtime::splice;

/// How the source delimits the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Length(u64),
    Chunked,
    UntilClose,
}

/// A readable side: its socket and the buffer holding bytes already read from it
/// (`buf[pos..]` not yet consumed).
pub struct Side<'a> {
    pub stream: &'a mut Stream,
    pub buf: &'a mut Vec<u8>,
    pub pos: &'a mut usize,
}

/// Where a body goes: an HTTP/1.1 connection, or an HTTP/2 stream (flow control respected).
pub enum Dest<'a> {
    Stream(&'a mut Stream),
    /// A stream of a downstream connection, whose waits for window are reported to the watch.
    H2(&'a mut h2::SendStream<bytes::Bytes>, Option<&'a crate::codec::h2io::FlowWatch>),
    /// A stream of a downstream HTTP/2 connection (the gateway's own codec).
    H2Native(&'a crate::codec::h2shared::H2Stream, Option<&'a crate::codec::h2io::FlowWatch>),
}

impl Dest<'_> {
    /// Writes `buf[range]` completely within `limit`, returning the buffer.
    async fn write(
        &mut self,
        buf: Vec<u8>,
        range: std::ops::Range<usize>,
        limit: Duration,
    ) -> (io::Result<()>, Vec<u8>) {
        match self {
            Dest::Stream(s) => match crate::runtime::timeout(limit, s.write_all_range(buf, range)).await {
                Ok(r) => r,
                Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
            },
            Dest::H2Native(stream, watch) => {
                let data = buf.get(range).unwrap_or_default();
                let res = match crate::runtime::timeout(limit, stream.send_data(data, false, *watch)).await {
                    Ok(r) => r.map_err(io::Error::other),
                    Err(_) => Err(io::ErrorKind::TimedOut.into()),
                };
                (res, buf)
            }
            Dest::H2(tx, watch) => {
                let data = bytes::Bytes::copy_from_slice(buf.get(range).unwrap_or_default());
                let send = crate::codec::h2io::send_data_watched(tx, data, false, *watch);
                let res = match crate::runtime::timeout(limit, send).await {
                    Ok(r) => r.map_err(io::Error::other),
                    Err(_) => Err(io::ErrorKind::TimedOut.into()),
                };
                (res, buf)
            }
        }
    }
}

pub struct Limits {
    /// Most body bytes (decoded) accepted.
    pub max_bytes: u64,
    /// Longest wait for the next bytes from the source.
    pub read_timeout: Duration,
    /// Longest wait for the destination to accept a write.
    pub write_timeout: Duration,
}

#[derive(Debug)]
pub enum TransferError {
    /// The source ended before the body was complete.
    Truncated,
    /// The source's chunked framing was invalid.
    Framing,
    /// The body exceeded `Limits::max_bytes`.
    TooLarge,
    ReadTimeout,
    Read(io::Error),
    /// The destination failed or timed out; nothing more can be sent to it.
    Write(io::Error),
}

/// Moves one body from `src` to `dst`. `out` holds bytes to send first (typically the head);
/// it is used as the write buffer and returned empty. When `chunk_out` the destination gets the
/// body as canonical chunks ending with the last chunk; otherwise raw bytes. Returns the number
/// of body bytes moved.
pub async fn transfer(
    src: Side<'_>,
    mut dst: Option<Dest<'_>>,
    out: &mut Vec<u8>,
    source: Source,
    chunk_out: bool,
    limits: &Limits,
    scratch: &mut Vec<u8>,
) -> Result<u64, TransferError> {
    let Side { stream, buf, pos } = src;
    let mut moved: u64 = 0;
    let mut remaining = match source {
        Source::Length(n) => n,
        _ => u64::MAX,
    };
    let mut decoder = ChunkedDecoder::new();
    loop {
        // 1. Frame what is buffered.
        let avail = buf.get(*pos..).unwrap_or_default();
        let done = match source {
            Source::Length(_) => {
                let take = avail.len().min(usize::try_from(remaining).unwrap_or(usize::MAX));
                let data = avail.get(..take).unwrap_or_default();
                frame(out, data, chunk_out);
                *pos += take;
                remaining -= take as u64;
                moved += take as u64;
                remaining == 0
            }
            Source::UntilClose => {
                frame(out, avail, chunk_out);
                moved += avail.len() as u64;
                *pos += avail.len();
                false
            }
            Source::Chunked => {
                scratch.clear();
                let progress = decoder.decode(avail, scratch).map_err(|_| TransferError::Framing)?;
                *pos += progress.consumed;
                moved += scratch.len() as u64;
                frame(out, scratch, chunk_out);
                progress.done
            }
        };
        if moved > limits.max_bytes {
            return Err(TransferError::TooLarge);
        }
        if done && chunk_out {
            out.extend_from_slice(LAST_CHUNK);
        }
        // 2. Flush (or drop, when discarding).
        if let (false, Some(dst)) = (out.is_empty(), dst.as_mut()) {
            let len = out.len();
            let (res, b) = dst.write(std::mem::take(out), 0..len, limits.write_timeout).await;
            *out = b;
            res.map_err(TransferError::Write)?;
        }
        out.clear();
        if done {
            return Ok(moved);
        }
        // 3. Read more. A large Length body is streamed without copying through `out`, and
        //    between two plain TCP sockets the rest of it is spliced (no copy at all).
        if *pos == buf.len() {
            buf.clear();
            *pos = 0;
            if let (Source::Length(_), false, Some(Dest::Stream(to))) = (source, chunk_out, dst.as_ref()) {
                if remaining >= splice::SPLICE_MIN && moved.saturating_add(remaining) <= limits.max_bytes {
                    if let Some(spliced) = splice_rest(stream, to, buf, remaining, limits).await {
                        return spliced.map(|n| moved + n);
                    }
                }
            }
        }
        if !make_room(buf, pos, 1024, buf.capacity().max(crate::runtime::buffers::BUF_SIZE)) {
            return Err(TransferError::Read(io::Error::other("no buffer space")));
        }
        let (res, b) = read_append_timeout(stream, std::mem::take(buf), limits.read_timeout).await;
        *buf = b;
        match res {
            Ok(0) if source == Source::UntilClose => {
                if let (true, Some(dst)) = (chunk_out, dst.as_mut()) {
                    out.extend_from_slice(LAST_CHUNK);
                    let len = out.len();
                    let (res, b) = dst.write(std::mem::take(out), 0..len, limits.write_timeout).await;
                    *out = b;
                    out.clear();
                    res.map_err(TransferError::Write)?;
                }
                return Ok(moved);
            }
            Ok(0) => return Err(TransferError::Truncated),
            Ok(_) => {
                if let (Source::Length(_), false, Some(dst)) = (source, chunk_out, dst.as_mut()) {
                    moved += pass_through(dst, buf, pos, &mut remaining, limits).await?;
                    if moved > limits.max_bytes {
                        return Err(TransferError::TooLarge);
                    }
                    if remaining == 0 {
                        return Ok(moved);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(TransferError::ReadTimeout),
            Err(e) => return Err(TransferError::Read(e)),
        }
    }
}

/// Splices the `remaining` bytes of a Length body from `from` to `to` when both are plain TCP
/// sockets; `None` when they are not, or splicing could not start (nothing moved: the caller
/// copies). Bytes already waiting beyond the body are taken into `buf`, as the copying path's
/// last read would have.
async fn splice_rest(
    from: &Stream,
    to: &Stream,
    buf: &mut Vec<u8>,
    remaining: u64,
    limits: &Limits,
) -> Option<Result<u64, TransferError>> {
    let (from, to) = (from.tcp()?, to.tcp()?);
    Some(match splice::splice_exact(from, to, remaining, limits.read_timeout, limits.write_timeout).await {
        Ok(n) => {
            splice::take_waiting(from, buf);
            Ok(n)
        }
        Err(splice::SpliceError::Unavailable(e)) => {
            tracing::debug!(error = %e, "splice unavailable, copying the body");
            return None;
        }
        Err(splice::SpliceError::Truncated) => Err(TransferError::Truncated),
        Err(splice::SpliceError::ReadTimeout) => Err(TransferError::ReadTimeout),
        Err(splice::SpliceError::Read(e)) => Err(TransferError::Read(e)),
        Err(splice::SpliceError::Write(e)) => Err(TransferError::Write(e)),
    })
}

/// Writes the buffered part of a Length body straight from the read buffer (no copy).
async fn pass_through(
    dst: &mut Dest<'_>,
    buf: &mut Vec<u8>,
    pos: &mut usize,
    remaining: &mut u64,
    limits: &Limits,
) -> Result<u64, TransferError> {
    let avail = buf.len() - *pos;
    let take = avail.min(usize::try_from(*remaining).unwrap_or(usize::MAX));
    if take == 0 {
        return Ok(0);
    }
    let start = *pos;
    let owned = std::mem::take(buf);
    let (res, owned) = dst.write(owned, start..start + take, limits.write_timeout).await;
    *buf = owned;
    res.map_err(TransferError::Write)?;
    *pos += take;
    *remaining -= take as u64;
    Ok(take as u64)
}

/// Reads one body from `src` and drops it (bounded by `limits.max_bytes`).
pub async fn discard(
    src: Side<'_>,
    source: Source,
    limits: &Limits,
    scratch: &mut Vec<u8>,
) -> Result<u64, TransferError> {
    let mut out = Vec::new();
    transfer(src, None, &mut out, source, false, limits, scratch).await
}

fn frame(out: &mut Vec<u8>, data: &[u8], chunk_out: bool) {
    if chunk_out {
        encode_chunk(data, out);
    } else {
        out.extend_from_slice(data);
    }
}
