//! Reading an upstream's HTTP/1.1 response head, interim (1xx) responses included.

use std::io;
use std::pin::Pin;
use std::rc::Rc;

use crate::runtime::idle_timer::Expiry;

use super::{interim, websocket};
use crate::codec::h1::{self, HeadScratch, ResponseHead};
use crate::runtime::io::{make_room, read_append_by};
use crate::runtime::stream::Stream;
use crate::upstream::{UpConn, UpstreamError};
use crate::worker::Worker;

pub use crate::runtime::buffers::HEAD_ROOM;

/// A response head read from an HTTP/1.1 upstream: its read buffer (the head at `upos`, body
/// bytes that came with it after), the head and its field ranges.
pub struct UpHead {
    pub ubuf: Vec<u8>,
    pub upos: usize,
    pub head: ResponseHead,
    pub scratch: HeadScratch,
}

/// Reads the response head (until `timer`, the try's deadline, which the caller also bounded
/// the request's write by) into a pooled response buffer (given back on failure; large enough
/// for a head and 16 KiB of body). With `head_room` (a relay that writes the rewritten head
/// right before the body: HTTP/1.1 clients) the head starts after [`HEAD_ROOM`] unused bytes,
/// which are zeroed; without, at 0, and the buffer's head room is never touched (an HTTP/2
/// client's relay encodes the head elsewhere: zeroing 512 bytes of a buffer that is cold with
/// hundreds of responses in flight cost 8 L2 misses per h2c request,
/// `loadtests/results/boxed-response-20261205.md`). A connection that comes with its receive
/// armed ([`crate::upstream::armed`]) has the head room either way. The head starts at
/// the returned offset.
#[allow(clippy::too_many_arguments)]
pub async fn read_response_head_pooled(
    worker: &Rc<Worker>,
    up: &mut UpConn,
    server: &gateway_config::Server,
    is_head: bool,
    websocket: bool,
    head_room: bool,
    interim: &mut interim::Interim<'_>,
    mut timer: Pin<&mut Expiry<'_>>,
) -> Result<UpHead, UpstreamError> {
    // A connection taken from its pool may come with the response's receive already submitted
    // (`upstream::armed`): its buffer holds the head room, then what arrived.
    let (mut ubuf, first, start) = match up.armed.take() {
        Some(armed) => {
            let (res, buf) = monoio::select! {
                r = armed.received() => r,
                _ = timer.as_mut() => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
            };
            (buf, Some(res), HEAD_ROOM)
        }
        None => {
            let mut ubuf = worker.buffers.take_response();
            let start = if head_room { HEAD_ROOM } else { 0 };
            ubuf.resize(start, 0);
            (ubuf, None, start)
        }
    };
    let mut scratch = worker.take_scratch(server.limits.max_headers);
    let read = match first.map(|res| read_outcome(res, false)) {
        Some(Err(e)) => Err(e),
        _ => {
            let up = &mut up.stream;
            read_response_head(worker, up, &mut ubuf, start, &mut scratch, server, is_head, websocket, interim, timer)
                .await
        }
    };
    match read {
        Ok((upos, head)) => Ok(UpHead { ubuf, upos, head, scratch }),
        Err(e) => {
            worker.buffers.give_response(ubuf);
            worker.give_scratch(scratch);
            Err(e)
        }
    }
}

/// Reads until a final (non-1xx) response head is buffered from `ubuf[start..]` on (the bytes
/// before are left alone unless room is needed; bytes after were received already, by an
/// armed receive); interim 1xx responses go to
/// `interim` (see [`interim`]: at most [`interim::MAX_INTERIM`], then a protocol error).
/// A 101 is final: accepted when `websocket` (the request was a WebSocket handshake) and it
/// switches to WebSocket, refused otherwise.
#[allow(clippy::too_many_arguments)]
pub async fn read_response_head(
    worker: &Rc<Worker>,
    up: &mut Stream,
    ubuf: &mut Vec<u8>,
    start: usize,
    scratch: &mut HeadScratch,
    server: &gateway_config::Server,
    is_head: bool,
    websocket: bool,
    interim: &mut interim::Interim<'_>,
    mut timer: Pin<&mut Expiry<'_>>,
) -> Result<(usize, ResponseHead), UpstreamError> {
    let max = server.limits.max_response_header_bytes;
    let mut upos = start;
    let mut received_any = ubuf.len() > start;
    let mut interims = 0;
    loop {
        let (parsed, switches, out) = {
            let buf = ubuf.get(upos..).unwrap_or_default();
            let parsed = h1::parse_response(buf, max, is_head, scratch);
            let switches =
                matches!(parsed, Ok(Some(ref r)) if r.status == 101) && websocket::accepts_websocket(buf, scratch);
            let out = match &parsed {
                Ok(Some(r)) if r.status < 200 && r.status != 101 && interims < interim::MAX_INTERIM => {
                    interim.prepare(worker, buf, r, scratch)
                }
                _ => None,
            };
            (parsed, switches, out)
        };
        if let Some(out) = out {
            Box::pin(interim.write(worker, out)).await?;
        }
        match parsed {
            Ok(Some(resp)) if resp.status == 101 && websocket && switches => return Ok((upos, resp)),
            Ok(Some(resp)) if resp.status == 101 && websocket => {
                return Err(UpstreamError::Protocol("101 without Upgrade: websocket"))
            }
            Ok(Some(resp)) if resp.status == 101 => return Err(UpstreamError::Protocol("unrequested upgrade")),
            Ok(Some(r)) if r.status < 200 && interims >= interim::MAX_INTERIM => {
                return Err(UpstreamError::Protocol("more than 10 interim (1xx) responses"));
            }
            Ok(Some(resp)) if resp.status < 200 => {
                interims += 1;
                upos += resp.head_len;
                continue;
            }
            Ok(Some(resp)) => return Ok((upos, resp)),
            Ok(None) => {}
            Err(_) => return Err(UpstreamError::Protocol("malformed response head")),
        }
        if !make_room(ubuf, &mut upos, 1024, max + 1) {
            return Err(UpstreamError::Protocol("response head too large"));
        }
        let (res, b) = read_append_by(up, std::mem::take(ubuf), timer.as_mut()).await;
        *ubuf = b;
        read_outcome(res, received_any)?;
        received_any = true;
    }
}

/// What a read of the response head that returned `res` means (`received_any`: bytes of it had
/// arrived before).
fn read_outcome(res: io::Result<usize>, received_any: bool) -> Result<(), UpstreamError> {
    match res {
        Ok(0) if !received_any => Err(UpstreamError::ClosedEarly),
        Ok(0) => Err(UpstreamError::Protocol("closed inside the response head")),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(UpstreamError::Timeout),
        Err(_) if !received_any => Err(UpstreamError::ClosedEarly),
        Err(_) => Err(UpstreamError::Protocol("read error inside the response head")),
    }
}
