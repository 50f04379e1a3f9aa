//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte frame header, each frame type's payload parsed
//! and checked in place, and writers that append frames to a buffer.
//!
//! [`parse`] checks everything a single frame can get wrong and maps each violation to the exact
//! RFC 9113 error (connection or stream error, and its code). What depends on connection state
//! (stream states, CONTINUATION sequencing, flow-control windows, frame size against the local
//! SETTINGS_MAX_FRAME_SIZE) is the caller's.

use core::fmt;

/// Length of the frame header (RFC 9113 §4.1).
pub const HEAD_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value, and its minimum (RFC 9113 §6.5.2).
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
/// SETTINGS_MAX_FRAME_SIZE's maximum: the 24-bit length field's limit.
pub const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
/// Largest flow-control window (RFC 9113 §6.9.1); also the mask of a 31-bit stream id.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The highest stream identifier (§5.1.1).
pub const MAX_STREAM: u32 = (1 << 31) - 1;
/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const PRIORITY: u8 = 2;
    pub const RST_STREAM: u8 = 3;
    pub const SETTINGS: u8 = 4;
    pub const PUSH_PROMISE: u8 = 5;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const WINDOW_UPDATE: u8 = 8;
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags (RFC 9113 §6); which ones apply depends on the frame type.
pub mod flag {
    /// DATA, HEADERS.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE.
    pub const PADDED: u8 = 0x8;
    /// HEADERS.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2, RFC 8441 §3).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 1;
    pub const ENABLE_PUSH: u16 = 2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 3;
    pub const INITIAL_WINDOW_SIZE: u16 = 4;
    pub const MAX_FRAME_SIZE: u16 = 5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 6;
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 8;
}

/// An error code (RFC 9113 §7), as carried by RST_STREAM and GOAWAY. Unknown codes are kept
/// as they are: a receiver must not treat them specially (§7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);

    /// The code's RFC name, or "UNKNOWN" for codes RFC 9113 does not define.
    pub fn name(self) -> &'static str {
        match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "UNKNOWN" => write!(f, "UNKNOWN({:#x})", self.0),
            name => f.write_str(name),
        }
    }
}

/// The 9-byte frame header (RFC 9113 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Payload length (24 bits).
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    /// Stream identifier, the reserved bit masked off (it is ignored on receipt, §4.1).
    pub stream: u32,
}

impl Head {
    /// Whether `flag` is set.
    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Parses a frame header from the start of `bytes`. None when fewer than 9 bytes.
#[inline]
pub fn parse_head(bytes: &[u8]) -> Option<Head> {
    let &[l0, l1, l2, kind, flags, s0, s1, s2, s3] = bytes.first_chunk::<HEAD_LEN>()?;
    Some(Head {
        len: u32::from_be_bytes([0, l0, l1, l2]),
        kind,
        flags,
        stream: u32::from_be_bytes([s0, s1, s2, s3]) & MAX_WINDOW,
    })
}

/// A stream's priority fields (RFC 9113 §5.3, §6.3): deprecated, parsed only to be checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    /// The wire value: the weight minus one.
    pub weight: u8,
}

impl Priority {
    /// Reads the 5 priority bytes.
    fn read(bytes: [u8; 5]) -> Priority {
        let [d0, d1, d2, d3, weight] = bytes;
        let dependency = u32::from_be_bytes([d0, d1, d2, d3]);
        Priority { dependency: dependency & MAX_WINDOW, exclusive: dependency & !MAX_WINDOW != 0, weight }
    }
}

/// A SETTINGS frame's parameters, validated by [`parse`]; iterate pairs in order (unknown ids
/// are skipped by the caller).
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// The payload, a multiple of 6 bytes whose known parameters all hold legal values.
    payload: &'a [u8],
}

impl<'a> Settings<'a> {
    /// The (identifier, value) pairs in the order they were sent (later ones win, §6.5.3).
    pub fn iter(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        let (pairs, _) = self.payload.as_chunks::<6>();
        pairs
            .iter()
            .map(|&[i0, i1, v0, v1, v2, v3]| (u16::from_be_bytes([i0, i1]), u32::from_be_bytes([v0, v1, v2, v3])))
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.payload.len() / 6
    }

    pub fn is_empty(&self) -> bool {
        self.payload.len() < 6
    }
}

/// One parsed frame, borrowing its payload.
#[derive(Debug)]
pub enum Frame<'a> {
    /// `flow_len`: the whole payload length incl. padding (what flow control counts, RFC 9113 §6.1).
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        flow_len: u32,
    },
    /// `block`: the field block fragment, padding and priority fields stripped.
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    Reset {
        stream: u32,
        reason: Reason,
    },
    Settings {
        ack: bool,
        settings: Settings<'a>,
    },
    /// Never returned by [`parse`]: a server rejects every PUSH_PROMISE (RFC 9113 §8.4).
    PushPromise {
        stream: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        reason: Reason,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    /// Unknown frame types are ignored (RFC 9113 §4.1, §5.5). (Between a HEADERS without
    /// END_HEADERS and its last CONTINUATION, any other frame is the caller's PROTOCOL_ERROR.)
    Unknown {
        kind: u8,
    },
}

/// What [`parse`] rejects a frame with (RFC 9113 §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Send GOAWAY with this code and close the connection (§5.4.1).
    Connection(Reason),
    /// Reset this stream with this code (§5.4.2). The only stream error on a HEADERS frame is a
    /// self-dependency; its field block must still be decoded to keep HPACK in step (§4.3):
    /// get it with [`header_block`].
    Stream(u32, Reason),
}

impl FrameError {
    /// The error code to send.
    pub fn reason(self) -> Reason {
        match self {
            FrameError::Connection(reason) | FrameError::Stream(_, reason) => reason,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Connection(reason) => write!(f, "connection error {reason}"),
            FrameError::Stream(stream, reason) => write!(f, "stream {stream} error {reason}"),
        }
    }
}

impl std::error::Error for FrameError {}

use FrameError::{Connection, Stream};

/// Stream 0 on a frame that must name a stream (or vice versa) is a connection error (§6).
const STREAM_ID_ERROR: FrameError = Connection(Reason::PROTOCOL_ERROR);
/// A frame of the wrong size that could alter connection state is a connection error (§4.2).
const SIZE_ERROR: FrameError = Connection(Reason::FRAME_SIZE_ERROR);

/// Parses one frame whose header is `head` and whose payload is exactly `payload`
/// (`payload.len() == head.len`; the caller checked `head.len` against its SETTINGS_MAX_FRAME_SIZE).
///
/// Every length check uses `payload.len()`, so a mismatch cannot read out of bounds.
pub fn parse<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    let stream = head.stream;
    match head.kind {
        kind::DATA => {
            if stream == 0 {
                return Err(STREAM_ID_ERROR);
            }
            let data = unpad(head, payload, 0)?.1;
            Ok(Frame::Data { stream, data, end_stream: head.has(flag::END_STREAM), flow_len: head.len })
        }
        kind::HEADERS => {
            let (priority, block) = headers_parts(head, payload)?;
            // §5.3.1: a stream cannot depend on itself (a stream error; see FrameError::Stream).
            if priority.is_some_and(|p| p.dependency == stream) {
                return Err(Stream(stream, Reason::PROTOCOL_ERROR));
            }
            Ok(Frame::Headers {
                stream,
                block,
                end_stream: head.has(flag::END_STREAM),
                end_headers: head.has(flag::END_HEADERS),
                priority,
            })
        }
        kind::PRIORITY => {
            if stream == 0 {
                return Err(STREAM_ID_ERROR);
            }
            // §6.3: a PRIORITY frame of the wrong length only breaks its own stream.
            let bytes = exact::<5>(payload).ok_or(Stream(stream, Reason::FRAME_SIZE_ERROR))?;
            let priority = Priority::read(bytes);
            if priority.dependency == stream {
                return Err(Stream(stream, Reason::PROTOCOL_ERROR));
            }
            Ok(Frame::Priority { stream, priority })
        }
        kind::RST_STREAM => {
            if stream == 0 {
                return Err(STREAM_ID_ERROR);
            }
            let code = exact::<4>(payload).ok_or(SIZE_ERROR)?;
            Ok(Frame::Reset { stream, reason: Reason(u32::from_be_bytes(code)) })
        }
        kind::SETTINGS => {
            if stream != 0 {
                return Err(STREAM_ID_ERROR);
            }
            let ack = head.has(flag::ACK);
            if ack && !payload.is_empty() {
                return Err(SIZE_ERROR);
            }
            check_settings(payload)?;
            Ok(Frame::Settings { ack, settings: Settings { payload } })
        }
        // §8.4: a client cannot push; a server treats PUSH_PROMISE as a connection error.
        kind::PUSH_PROMISE => Err(Connection(Reason::PROTOCOL_ERROR)),
        kind::PING => {
            if stream != 0 {
                return Err(STREAM_ID_ERROR);
            }
            let data = exact::<8>(payload).ok_or(SIZE_ERROR)?;
            Ok(Frame::Ping { ack: head.has(flag::ACK), data })
        }
        kind::GOAWAY => {
            if stream != 0 {
                return Err(STREAM_ID_ERROR);
            }
            let (&[l0, l1, l2, l3, c0, c1, c2, c3], debug) = payload.split_first_chunk::<8>().ok_or(SIZE_ERROR)?;
            Ok(Frame::GoAway {
                last_stream: u32::from_be_bytes([l0, l1, l2, l3]) & MAX_WINDOW,
                reason: Reason(u32::from_be_bytes([c0, c1, c2, c3])),
                debug,
            })
        }
        kind::WINDOW_UPDATE => {
            // §6.9: the wrong length is a connection error even on a stream.
            let bytes = exact::<4>(payload).ok_or(SIZE_ERROR)?;
            let increment = u32::from_be_bytes(bytes) & MAX_WINDOW;
            if increment == 0 {
                return Err(if stream == 0 {
                    Connection(Reason::PROTOCOL_ERROR)
                } else {
                    Stream(stream, Reason::PROTOCOL_ERROR)
                });
            }
            Ok(Frame::WindowUpdate { stream, increment })
        }
        kind::CONTINUATION => {
            if stream == 0 {
                return Err(STREAM_ID_ERROR);
            }
            Ok(Frame::Continuation { stream, block: payload, end_headers: head.has(flag::END_HEADERS) })
        }
        kind => Ok(Frame::Unknown { kind }),
    }
}

/// The field block fragment of a HEADERS frame, padding and priority stripped, checking only
/// what makes the frame unusable (connection errors). For a HEADERS frame that [`parse`]
/// rejected with a stream error: its block must still go through HPACK (RFC 9113 §4.3).
pub fn header_block<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    headers_parts(head, payload).map(|(_, block)| block)
}

/// A HEADERS frame's priority fields and field block fragment.
fn headers_parts<'a>(head: &Head, payload: &'a [u8]) -> Result<(Option<Priority>, &'a [u8]), FrameError> {
    if head.stream == 0 {
        return Err(STREAM_ID_ERROR);
    }
    let fixed = if head.has(flag::PRIORITY) { 5 } else { 0 };
    let (fields, block) = unpad(head, payload, fixed)?;
    let priority = fields.first_chunk::<5>().map(|&bytes| Priority::read(bytes));
    Ok((priority, block))
}

/// Splits a DATA or HEADERS payload into its `fixed`-byte fields after the pad length (if
/// PADDED), and its content with the padding stripped.
///
/// Missing fixed fields are a FRAME_SIZE_ERROR (§4.2: too small for mandatory data; a
/// connection error since HEADERS carries a field block). A missing pad length byte, or padding
/// longer than what is left, is a PROTOCOL_ERROR (§6.1, §6.2).
#[inline]
fn unpad<'a>(head: &Head, payload: &'a [u8], fixed: usize) -> Result<(&'a [u8], &'a [u8]), FrameError> {
    let (pad, rest) = if head.has(flag::PADDED) {
        let (&pad, rest) = payload.split_first().ok_or(Connection(Reason::PROTOCOL_ERROR))?;
        (usize::from(pad), rest)
    } else {
        (0, payload)
    };
    let (fields, rest) = rest.split_at_checked(fixed).ok_or(SIZE_ERROR)?;
    let content_len = rest.len().checked_sub(pad).ok_or(Connection(Reason::PROTOCOL_ERROR))?;
    let content = rest.get(..content_len).ok_or(Connection(Reason::PROTOCOL_ERROR))?;
    Ok((fields, content))
}

/// The payload as an array when it is exactly `N` bytes long.
#[inline]
fn exact<const N: usize>(payload: &[u8]) -> Option<[u8; N]> {
    payload.try_into().ok()
}

/// Checks a SETTINGS payload: whole 6-byte pairs, and each known parameter's value (§6.5.2).
fn check_settings(payload: &[u8]) -> Result<(), FrameError> {
    let (pairs, rest) = payload.as_chunks::<6>();
    if !rest.is_empty() {
        return Err(SIZE_ERROR);
    }
    for &[i0, i1, v0, v1, v2, v3] in pairs {
        let value = u32::from_be_bytes([v0, v1, v2, v3]);
        let reason = match u16::from_be_bytes([i0, i1]) {
            setting::ENABLE_PUSH | setting::ENABLE_CONNECT_PROTOCOL if value > 1 => Reason::PROTOCOL_ERROR,
            setting::INITIAL_WINDOW_SIZE if value > MAX_WINDOW => Reason::FLOW_CONTROL_ERROR,
            setting::MAX_FRAME_SIZE if !(DEFAULT_MAX_FRAME..=MAX_MAX_FRAME).contains(&value) => Reason::PROTOCOL_ERROR,
            _ => continue,
        };
        return Err(Connection(reason));
    }
    Ok(())
}

// ---- Writers -------------------------------------------------------------------------------

/// The 9 header bytes; the stream id's reserved bit is left 0 (§4.1).
#[inline]
fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEAD_LEN] {
    debug_assert!(len <= MAX_MAX_FRAME as usize, "frame payload of {len} bytes");
    let [_, l0, l1, l2] = (len as u32).to_be_bytes();
    let [s0, s1, s2, s3] = (stream & MAX_WINDOW).to_be_bytes();
    [l0, l1, l2, kind, flags, s0, s1, s2, s3]
}

/// Appends a frame header; the caller appends exactly `len` payload bytes next.
#[inline]
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// Appends a SETTINGS frame carrying `params` in order.
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    out.reserve(HEAD_LEN + 6 * params.len());
    write_head(out, 6 * params.len(), kind::SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a SETTINGS frame with ACK.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a PING frame with ACK, echoing `data` (§6.7).
pub fn write_ping_ack(out: &mut Vec<u8>, data: [u8; 8]) {
    out.reserve(HEAD_LEN + 8);
    write_head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(&data);
}

/// Appends a PING frame (not an ACK) carrying `data` (§6.7).
pub fn write_ping(out: &mut Vec<u8>, data: [u8; 8]) {
    out.reserve(HEAD_LEN + 8);
    write_head(out, 8, kind::PING, 0, 0);
    out.extend_from_slice(&data);
}

/// Appends a WINDOW_UPDATE frame; `increment` must be 1..=MAX_WINDOW (§6.9).
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    debug_assert!((1..=MAX_WINDOW).contains(&increment), "window increment {increment}");
    out.reserve(HEAD_LEN + 4);
    write_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Appends a RST_STREAM frame.
pub fn write_rst(out: &mut Vec<u8>, stream: u32, reason: Reason) {
    out.reserve(HEAD_LEN + 4);
    write_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&reason.0.to_be_bytes());
}

/// Appends a GOAWAY frame. `debug` is cut to fit the smallest frame size a peer may allow
/// (16,384 bytes): it is diagnostic only, and must not make the frame oversized.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, reason: Reason, debug: &[u8]) {
    let debug = debug.get(..DEFAULT_MAX_FRAME as usize - 8).unwrap_or(debug);
    out.reserve(HEAD_LEN + 8 + debug.len());
    write_head(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&reason.0.to_be_bytes());
    out.extend_from_slice(debug);
}

/// One DATA frame (data.len() <= the peer's max frame size: the caller splits).
pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    out.reserve(HEAD_LEN + data.len());
    write_head(out, data.len(), kind::DATA, if end_stream { flag::END_STREAM } else { 0 }, stream);
    out.extend_from_slice(data);
}

/// Reserves room for a HEADERS frame header: pushes 9 zero bytes and returns `block_start`
/// (`out.len()` after), where the caller then HPACK-encodes the block before [`finish_headers`].
pub fn write_headers_reserve(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0; HEAD_LEN]);
    out.len()
}

/// A header block that the caller has ALREADY HPACK-encoded at `out[block_start..]`, preceded by
/// 9 bytes the caller reserved at `out[block_start - 9 .. block_start]` ([`write_headers_reserve`]).
/// Fills in the HEADERS frame header in place; if the block is longer than `max_frame`, splits
/// it into HEADERS + CONTINUATION frames (inserting 9-byte headers, moving bytes as needed).
/// END_STREAM goes on the HEADERS frame, END_HEADERS on the last frame (§6.2, §6.10).
pub fn finish_headers(out: &mut Vec<u8>, block_start: usize, stream: u32, end_stream: bool, max_frame: u32) {
    let Some(head_start) = block_start.checked_sub(HEAD_LEN).filter(|_| block_start <= out.len()) else {
        debug_assert!(false, "finish_headers: block_start {block_start} outside the buffer");
        return;
    };
    let end_stream = if end_stream { flag::END_STREAM } else { 0 };
    // A peer's limit is never below 16,384; the clamp only keeps a bad argument from looping.
    let max = max_frame.clamp(1, MAX_MAX_FRAME) as usize;
    let block_len = out.len() - block_start;
    if block_len <= max {
        set_head(out, head_start, head_bytes(block_len, kind::HEADERS, end_stream | flag::END_HEADERS, stream));
        return;
    }
    // Chunk i of the block moves from block_start + i*max to block_start + i*(max + 9), behind
    // its own header. Moving the last chunk first never overwrites a chunk not yet moved.
    let frames = block_len.div_ceil(max);
    out.resize(out.len() + (frames - 1) * HEAD_LEN, 0);
    for i in (1..frames).rev() {
        let from = block_start + i * max;
        let len = max.min(block_len - i * max);
        let to = block_start + i * (max + HEAD_LEN);
        out.copy_within(from..from + len, to);
        let flags = if i == frames - 1 { flag::END_HEADERS } else { 0 };
        set_head(out, to - HEAD_LEN, head_bytes(len, kind::CONTINUATION, flags, stream));
    }
    set_head(out, head_start, head_bytes(max, kind::HEADERS, end_stream, stream));
}

/// Overwrites the 9 bytes at `at` with a frame header.
#[inline]
fn set_head(out: &mut [u8], at: usize, head: [u8; HEAD_LEN]) {
    if let Some(slot) = out.get_mut(at..).and_then(|rest| rest.first_chunk_mut::<HEAD_LEN>()) {
        *slot = head;
    }
}

#[cfg(test)]
mod tests;
