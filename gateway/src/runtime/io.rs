//! Small helpers over monoio's owned-buffer I/O.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use monoio::time::Sleep;

use super::idle_timer::Expiry;
use super::stream::Stream;

/// Reads into the spare capacity of `buf`, appending to its contents. `buf` must have spare
/// capacity (the caller compacts or grows it first). `Ok(0)` means end of stream.
pub async fn read_append(stream: &mut Stream, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
    stream.read_append(buf).await
}

/// [`read_append`] bounded by `limit`; a timeout is reported as `ErrorKind::TimedOut`.
pub async fn read_append_timeout(stream: &mut Stream, buf: Vec<u8>, limit: Duration) -> (io::Result<usize>, Vec<u8>) {
    // The buffer is owned by the operation; on timeout it is lost with the cancelled read,
    // so hand back a fresh empty one (the caller closes the connection anyway).
    match crate::runtime::timeout(limit, read_append(stream, buf)).await {
        Ok(r) => r,
        Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`read_append`] bounded by a deadline of the worker's coarse timer (`expiry`); a timeout is
/// reported as `ErrorKind::TimedOut`. The wait holds three words instead of a timer entry.
pub async fn read_append_expiry(stream: &mut Stream, buf: Vec<u8>, expiry: Expiry<'_>) -> (io::Result<usize>, Vec<u8>) {
    // As above: on timeout the buffer goes with the cancelled read.
    monoio::select! {
        r = read_append(stream, buf) => r,
        _ = expiry => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// Writes `buf[from..]` completely, bounded by `limit`; returns the buffer.
pub async fn write_from(stream: &mut Stream, buf: Vec<u8>, from: usize, limit: Duration) -> (io::Result<()>, Vec<u8>) {
    if from >= buf.len() {
        return (Ok(()), buf);
    }
    let len = buf.len();
    let fut = stream.write_all_range(buf, from..len);
    match crate::runtime::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// Writes `buf[range]` completely, bounded by a deadline of the worker's coarse timer (`expiry`:
/// never early, up to about 0.2 s late), for writes to a client bounded by `body_io`: the wait
/// holds three words and costs no timer entry. Returns the buffer.
pub async fn write_range_expiry(
    stream: &mut Stream,
    buf: Vec<u8>,
    range: std::ops::Range<usize>,
    expiry: Expiry<'_>,
) -> (io::Result<()>, Vec<u8>) {
    if range.is_empty() {
        return (Ok(()), buf);
    }
    monoio::select! {
        r = stream.write_all_range(buf, range) => r,
        _ = expiry => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`read_append`] bounded by `timer`, which the caller holds across several operations of one
/// exchange (one timer entry for all of them, instead of one per operation); a timeout is
/// `ErrorKind::TimedOut`.
pub async fn read_append_by(stream: &mut Stream, buf: Vec<u8>, timer: Pin<&mut Sleep>) -> (io::Result<usize>, Vec<u8>) {
    // As above: on timeout the buffer goes with the cancelled read.
    monoio::select! {
        r = read_append(stream, buf) => r,
        _ = timer => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`write_from`] bounded by `timer`, as [`read_append_by`].
pub async fn write_from_by(
    stream: &mut Stream,
    buf: Vec<u8>,
    from: usize,
    timer: Pin<&mut Sleep>,
) -> (io::Result<()>, Vec<u8>) {
    if from >= buf.len() {
        return (Ok(()), buf);
    }
    let len = buf.len();
    monoio::select! {
        r = stream.write_all_range(buf, from..len) => r,
        _ = timer => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// Makes room to read at least `min_spare` more bytes: drops the consumed prefix
/// `buf[..*pos]` first, then grows the buffer only if that was not enough and the result
/// stays within `max_len`. Returns false when the buffer cannot take more bytes.
pub fn make_room(buf: &mut Vec<u8>, pos: &mut usize, min_spare: usize, max_len: usize) -> bool {
    if *pos > 0 && buf.capacity() - buf.len() < min_spare {
        buf.drain(..*pos);
        *pos = 0;
    }
    if buf.capacity() - buf.len() >= min_spare {
        return true;
    }
    if buf.len() >= max_len {
        return false;
    }
    let want = (buf.len() + min_spare).min(max_len.max(buf.len() + 1));
    buf.reserve_exact(want - buf.len());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_room_compacts_before_growing() {
        let mut buf = Vec::with_capacity(8);
        buf.extend_from_slice(b"abcdefgh");
        let mut pos = 6;
        assert!(make_room(&mut buf, &mut pos, 4, 16));
        assert_eq!(buf, b"gh");
        assert_eq!(pos, 0);
        assert_eq!(buf.capacity(), 8);
    }

    #[test]
    fn make_room_grows_up_to_the_limit_only() {
        let mut buf = Vec::with_capacity(4);
        buf.extend_from_slice(b"abcd");
        let mut pos = 0;
        assert!(make_room(&mut buf, &mut pos, 4, 6));
        assert!(buf.capacity() >= 5);
        buf.resize(6, b'x');
        assert!(!make_room(&mut buf, &mut pos, 4, 6));
    }
}
