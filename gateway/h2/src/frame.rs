//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte frame header, each frame type's payload parsed
//! and checked in place, and writers that append frames to a buffer.
//!
//! API CONTRACT (filled in by the implementation; signatures are fixed):
//!
//! ```ignore
//! pub const HEAD_LEN: usize = 9;
//! pub const DEFAULT_MAX_FRAME: u32 = 16_384;
//! pub const MAX_WINDOW: u32 = (1 << 31) - 1;
//! pub mod kind { DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION: u8 }
//! pub mod flag { END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY: u8 }
//! pub struct Reason(pub u32) with consts NO_ERROR .. HTTP_1_1_REQUIRED;
//! pub struct Head { pub len: u32, pub kind: u8, pub flags: u8, pub stream: u32 }
//! pub fn parse_head(bytes: &[u8]) -> Option<Head>;
//! pub enum Frame<'a> { ... }
//! pub enum FrameError { Connection(Reason), Stream(u32, Reason) }
//! pub fn parse<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError>;
//! pub fn write_* (see below)
//! ```
