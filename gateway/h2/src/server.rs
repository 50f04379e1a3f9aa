//! The server side of one HTTP/2 connection, without I/O (RFC 9113).
//!
//! [`Conn::recv`] takes the bytes the client sent and turns every complete frame into state
//! changes and [`Event`]s (a request head decoded and checked, body bytes, trailers, a reset, a
//! window that opened); the caller hands each event to the stream it concerns. The caller's
//! answers ([`Conn::send_head`], [`Conn::send_data`], ...) are encoded straight into the
//! connection's write buffer ([`Conn::out`]), which the caller writes to the socket. Nothing is
//! queued per frame and nothing is shared: one connection, one owner.
//!
//! What it enforces on its own: the preface and the first SETTINGS, stream identifiers and
//! states (§5.1), flow control both ways (§5.2, §6.9), the header block's CONTINUATION sequence
//! and size, HPACK (RFC 7541), the request's fields (§8.2, §8.3: pseudo-header set and order,
//! lowercase names, no connection-specific fields, TE, field values), content-length against
//! the DATA received (§8.1.1) and the concurrent stream limit (REFUSED_STREAM). A connection
//! error queues GOAWAY and returns the error; the caller flushes and closes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::frame::{self, flag, kind, setting, Frame, FrameError, Head, Reason};
use crate::hpack::{self, DecodeError, Field};

/// What the server advertises and enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub max_concurrent_streams: u32,
    /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE), at least 65 535.
    pub stream_window: u32,
    /// The connection's receive window, at least 65 535.
    pub conn_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload accepted.
    pub max_frame: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger decoded list is answered 431 (the stream only).
    pub max_header_list: u32,
    /// Stream errors the client may cause (each answered with RST_STREAM) before the
    /// connection ends with ENHANCE_YOUR_CALM: a client could otherwise make the server reset
    /// streams without end, the other side of a rapid-reset flood.
    pub max_stream_errors: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 100,
            stream_window: 256 * 1024,
            conn_window: 1024 * 1024,
            max_frame: frame::DEFAULT_MAX_FRAME,
            max_header_list: 16 * 1024,
            max_stream_errors: 200,
        }
    }
}

/// [`ConnError::what`] of a header block over the limit (ENHANCE_YOUR_CALM).
pub const BLOCK_TOO_LARGE: &str = "header block too large";
/// [`ConnError::what`] of a client over [`Config::max_stream_errors`] (ENHANCE_YOUR_CALM).
pub const TOO_MANY_STREAM_ERRORS: &str = "too many stream errors";

/// A connection error: GOAWAY with `reason` is queued in [`Conn::out`]; nothing more is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    pub reason: Reason,
    /// What was wrong, for logs and counters.
    pub what: &'static str,
}

/// A request's pseudo-header fields, as ranges into [`RequestHead::buf`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pseudo {
    pub method: Option<(u32, u32)>,
    pub scheme: Option<(u32, u32)>,
    pub authority: Option<(u32, u32)>,
    pub path: Option<(u32, u32)>,
}

/// A decoded and checked request head: the decoded bytes and the regular fields (pseudo-header
/// fields are in `pseudo`, not in `fields`).
#[derive(Clone, Debug, Default)]
pub struct RequestHead {
    pub buf: Vec<u8>,
    pub fields: Vec<Field>,
    pub pseudo: Pseudo,
    /// The content-length field's value, when there is one (checked: one value, digits).
    pub content_length: Option<u64>,
}

impl RequestHead {
    /// Empty, with room for what a block of `block_len` bytes usually decodes to (names from
    /// the static table and Huffman-coded values come out longer than they went in), so that
    /// decoding it does not grow the buffers a step at a time.
    fn for_block(block_len: usize) -> Self {
        Self {
            buf: Vec::with_capacity((block_len * 2).clamp(128, 4096)),
            fields: Vec::with_capacity(8),
            ..Self::default()
        }
    }

    /// A head from its parts, as the decoder would have made it (for code that makes requests
    /// itself, and tests). `content_length` is taken from the fields.
    pub fn from_parts(
        method: &[u8],
        scheme: Option<&[u8]>,
        authority: Option<&[u8]>,
        path: Option<&[u8]>,
        fields: &[(&[u8], &[u8])],
    ) -> Self {
        let mut head = Self::default();
        let push = |buf: &mut Vec<u8>, bytes: &[u8]| {
            let start = buf.len() as u32;
            buf.extend_from_slice(bytes);
            (start, buf.len() as u32)
        };
        head.pseudo.method = Some(push(&mut head.buf, method));
        head.pseudo.scheme = scheme.map(|v| push(&mut head.buf, v));
        head.pseudo.authority = authority.map(|v| push(&mut head.buf, v));
        head.pseudo.path = path.map(|v| push(&mut head.buf, v));
        for (name, value) in fields {
            let (name_start, name_end) = push(&mut head.buf, name);
            let (value_start, value_end) = push(&mut head.buf, value);
            head.fields.push(Field { name_start, name_end, value_start, value_end, never_indexed: false });
            if *name == b"content-length" {
                head.content_length = parse_length(value);
            }
        }
        head
    }

    fn range(&self, r: Option<(u32, u32)>) -> Option<&[u8]> {
        let (a, b) = r?;
        self.buf.get(a as usize..b as usize)
    }

    pub fn method(&self) -> &[u8] {
        self.range(self.pseudo.method).unwrap_or_default()
    }

    pub fn scheme(&self) -> Option<&[u8]> {
        self.range(self.pseudo.scheme)
    }

    pub fn authority(&self) -> Option<&[u8]> {
        self.range(self.pseudo.authority)
    }

    /// `:path` (absent only for CONNECT).
    pub fn path(&self) -> Option<&[u8]> {
        self.range(self.pseudo.path)
    }

    /// Every regular field as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields.iter().map(|f| field_bytes(&self.buf, f))
    }

    /// The first value of the field `name` (lowercase).
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Empties it for reuse, keeping the allocations.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.fields.clear();
        self.pseudo = Pseudo::default();
        self.content_length = None;
    }
}

/// A field's name and value in `buf`.
pub fn field_bytes<'a>(buf: &'a [u8], f: &Field) -> (&'a [u8], &'a [u8]) {
    let name = buf.get(f.name_start as usize..f.name_end as usize).unwrap_or_default();
    let value = buf.get(f.value_start as usize..f.value_end as usize).unwrap_or_default();
    (name, value)
}

/// What a frame meant for the caller.
#[derive(Debug)]
pub enum Event {
    /// A new stream's request head. `end_stream`: it has no body.
    Request { stream: u32, head: RequestHead, end_stream: bool },
    /// A request that cannot be served for what its head holds, answered by the caller with
    /// `status` (431: the field list is over the limit). The stream is open as for a request.
    Refused { stream: u32, status: u16 },
    /// Body bytes: `input[range]` of the slice given to [`Conn::recv`]. The caller gives their
    /// window back with [`Conn::release`] once it has dealt with them.
    Data { stream: u32, start: usize, end: usize, end_stream: bool },
    /// The request's trailers (the body ends with them).
    Trailers { stream: u32, head: RequestHead },
    /// The stream is gone: the client reset it, or it broke a rule (`reason` as sent to it).
    /// Nothing more is sent or received on it.
    Reset { stream: u32, reason: Reason, by_peer: bool },
    /// A stream that found no send window ([`Conn::send_data`] took less than offered) may send
    /// again.
    Writable { stream: u32 },
    /// The client sent GOAWAY: it opens no more streams.
    GoAway { reason: Reason },
}

/// Why a send was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The stream is not open for sending (never opened, reset, or already ended).
    Closed,
    /// The head was already sent (a second final head), or not yet (data before the head).
    Order,
}

/// One stream's state.
#[derive(Debug)]
struct Stream {
    /// The client ended its side (END_STREAM received).
    recv_closed: bool,
    /// The server ended its side (END_STREAM sent).
    send_closed: bool,
    head_sent: bool,
    /// The request's trailers were received (nothing more may come).
    trailers: bool,
    /// Bytes the client may still send on it.
    recv_window: i64,
    /// Bytes delivered and released by the caller, not yet given back in a WINDOW_UPDATE.
    recv_released: u32,
    /// Bytes the server may still send on it (negative after a SETTINGS change).
    send_window: i64,
    /// A send found no window: tell the caller when there is some.
    blocked: bool,
    /// Reset (by either side): nothing more is sent or received, but the stream counts against
    /// the concurrent stream limit until its owner lets it go ([`Conn::forget`]), so that a
    /// client resetting streams cannot have more in the works than the limit (rapid reset).
    reset: bool,
    /// content-length, when the request gave one, and the DATA bytes received so far.
    expected: Option<u64>,
    received: u64,
}

/// A header block being received (HEADERS without END_HEADERS, then CONTINUATION frames).
#[derive(Debug)]
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
    /// The stream was reset already (a HEADERS frame in error): the block only feeds HPACK.
    discard: bool,
}

/// Connection phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Bytes of the client preface received so far.
    Preface(usize),
    /// The preface came; the first frame must be SETTINGS.
    FirstSettings,
    Open,
    /// A connection error was found: nothing more is read.
    Failed,
}

/// A hasher for maps keyed by stream identifier: distinct small odd numbers, spread by one
/// multiplication (no SipHash per lookup).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        // Spread the bits: hashbrown takes the top 7 bits as the control byte.
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type StreamMap = HashMap<u32, Stream, BuildHasherDefault<IdHasher>>;

/// The largest header block accepted, relative to the list limit: the encoded block of a list
/// within the limit is no larger than the list (every field costs 32 in the list, at most a few
/// bytes of framing in the block).
const BLOCK_SLACK: usize = 1024;

/// One HTTP/2 server connection's protocol state.
pub struct Conn {
    cfg: Config,
    phase: Phase,
    out: Vec<u8>,
    decoder: hpack::Decoder,
    encoder: hpack::Encoder,
    streams: StreamMap,
    /// The highest stream the client opened (or tried to).
    last_stream: u32,
    /// Set once GOAWAY went out: streams above it are ignored.
    goaway_sent: Option<u32>,
    /// A graceful shutdown's first GOAWAY (the highest stream identifier) went out, followed by
    /// a PING with this payload; its ACK sends the final GOAWAY.
    shutdown_ping: Option<[u8; 8]>,
    goaway_received: bool,
    block: Option<Block>,
    /// The peer's settings that matter to the sender.
    peer_stream_window: u32,
    peer_max_frame: u32,
    send_window: i64,
    recv_window: i64,
    recv_released: u32,
    /// Streams with a blocked send, for a connection-level WINDOW_UPDATE.
    blocked: u32,
    /// Reused for decoding a block whose stream is refused or ignored (HPACK must still see it).
    discard: RequestHead,
    /// The streams the server reset last: frames the client sent before it saw the reset are
    /// ignored, not taken for frames on a closed stream.
    recent_resets: [u32; RECENT_RESETS],
    recent_at: usize,
    /// Stream errors the client caused so far.
    stream_errors: u32,
}

/// The payload of a graceful shutdown's PING.
const SHUTDOWN_PING: [u8; 8] = *b"shutdown";

/// How many of the server's latest resets are remembered.
const RECENT_RESETS: usize = 32;

impl Conn {
    /// A server connection at the start of the client's preface. Its SETTINGS (and the
    /// connection window's WINDOW_UPDATE) are queued in [`Conn::out`] at once.
    pub fn new(cfg: Config) -> Self {
        let mut out = Vec::with_capacity(4096);
        let mut params = vec![
            (setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams),
            (setting::INITIAL_WINDOW_SIZE, cfg.stream_window),
            (setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list),
        ];
        if cfg.max_frame != frame::DEFAULT_MAX_FRAME {
            params.push((setting::MAX_FRAME_SIZE, cfg.max_frame));
        }
        frame::write_settings(&mut out, &params);
        let default_window = 65_535u32;
        if cfg.conn_window > default_window {
            frame::write_window_update(&mut out, 0, cfg.conn_window - default_window);
        }
        Self {
            cfg,
            phase: Phase::Preface(0),
            out,
            decoder: hpack::Decoder::new(4096),
            encoder: hpack::Encoder::new(),
            streams: StreamMap::default(),
            last_stream: 0,
            goaway_sent: None,
            shutdown_ping: None,
            goaway_received: false,
            block: None,
            peer_stream_window: default_window,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            send_window: i64::from(default_window),
            recv_window: i64::from(cfg.conn_window.max(default_window)),
            recv_released: 0,
            blocked: 0,
            discard: RequestHead::default(),
            recent_resets: [0; RECENT_RESETS],
            recent_at: 0,
            stream_errors: 0,
        }
    }

    /// A stream error the client caused: counted, and over the limit a connection error.
    fn client_fault(&mut self) -> Result<(), ConnError> {
        self.stream_errors = self.stream_errors.saturating_add(1);
        if self.stream_errors > self.cfg.max_stream_errors {
            return Err(self.fail(Reason::ENHANCE_YOUR_CALM, TOO_MANY_STREAM_ERRORS));
        }
        Ok(())
    }

    /// Writes RST_STREAM and remembers it (see `recent_resets`).
    fn write_reset(&mut self, stream: u32, reason: Reason) {
        frame::write_rst(&mut self.out, stream, reason);
        if let Some(slot) = self.recent_resets.get_mut(self.recent_at % RECENT_RESETS) {
            *slot = stream;
        }
        self.recent_at = self.recent_at.wrapping_add(1);
    }

    fn recently_reset(&self, stream: u32) -> bool {
        self.recent_resets.contains(&stream)
    }

    /// The bytes to write to the client. The caller writes them and clears (or drains) it.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Whether there is something to write.
    pub fn wants_write(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether the connection can close: GOAWAY went out (or came) and no stream is left.
    pub fn is_done(&self) -> bool {
        (self.goaway_sent.is_some() || self.goaway_received || self.phase == Phase::Failed) && self.streams.is_empty()
    }

    /// Whether the client's preface and first SETTINGS came.
    pub fn started(&self) -> bool {
        matches!(self.phase, Phase::Open)
    }

    /// Reads every complete frame at the start of `input`; returns how many bytes it took (the
    /// rest is an incomplete frame: give it again with more). Events go to `events`, in order;
    /// [`Event::Data`] ranges index `input`.
    pub fn recv(&mut self, input: &[u8], events: &mut Vec<Event>) -> Result<usize, ConnError> {
        let mut at = 0;
        if let Phase::Preface(got) = self.phase {
            let want = frame::PREFACE.get(got..).unwrap_or_default();
            let n = want.len().min(input.len());
            if input.get(..n) != want.get(..n) {
                return Err(self.fail(Reason::PROTOCOL_ERROR, "not the HTTP/2 client preface"));
            }
            at = n;
            self.phase = if got + n == frame::PREFACE.len() { Phase::FirstSettings } else { Phase::Preface(got + n) };
            if matches!(self.phase, Phase::Preface(_)) {
                return Ok(at);
            }
        }
        while self.phase != Phase::Failed {
            let rest = input.get(at..).unwrap_or_default();
            let Some(head) = frame::parse_head(rest) else { break };
            if head.len > self.cfg.max_frame {
                return Err(self.fail(Reason::FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE"));
            }
            let end = frame::HEAD_LEN + head.len as usize;
            let Some(payload) = rest.get(frame::HEAD_LEN..end) else { break };
            let base = at + frame::HEAD_LEN;
            at += end;
            self.frame(&head, payload, base, events)?;
        }
        Ok(at)
    }

    fn frame(&mut self, head: &Head, payload: &[u8], base: usize, events: &mut Vec<Event>) -> Result<(), ConnError> {
        if self.phase == Phase::FirstSettings && (head.kind != kind::SETTINGS || head.flags & flag::ACK != 0) {
            return Err(self.fail(Reason::PROTOCOL_ERROR, "the first frame is not SETTINGS"));
        }
        // Inside a header block only its CONTINUATION frames may come (§6.10).
        if let Some(b) = &self.block {
            if head.kind != kind::CONTINUATION || head.stream != b.stream {
                return Err(self.fail(Reason::PROTOCOL_ERROR, "a frame inside a header block"));
            }
        }
        let parsed = match frame::parse(head, payload) {
            Ok(f) => f,
            Err(FrameError::Connection(r)) => return Err(self.fail(r, "malformed frame")),
            Err(FrameError::Stream(id, r)) => {
                if head.kind == kind::HEADERS {
                    // The block must still reach HPACK, or every later block decodes wrong.
                    let block = frame::header_block(head, payload).unwrap_or_default();
                    if head.flags & flag::END_HEADERS != 0 {
                        self.decode_discard(block)?;
                    } else {
                        self.block =
                            Some(Block { stream: id, end_stream: false, bytes: block.to_vec(), discard: true });
                    }
                    if id > self.last_stream {
                        self.last_stream = id;
                    }
                }
                self.stream_error(id, r, events)?;
                return Ok(());
            }
        };
        match parsed {
            Frame::Settings { ack, settings } => {
                if !ack {
                    self.apply_settings(settings.iter(), events)?;
                    frame::write_settings_ack(&mut self.out);
                    if self.phase == Phase::FirstSettings {
                        self.phase = Phase::Open;
                    }
                }
            }
            Frame::Headers { stream, block, end_stream, end_headers, .. } => {
                if end_headers {
                    self.header_block(stream, block, end_stream, events)?;
                } else {
                    if block.len() > self.block_limit() {
                        return Err(self.fail(Reason::ENHANCE_YOUR_CALM, BLOCK_TOO_LARGE));
                    }
                    self.block = Some(Block { stream, end_stream, bytes: block.to_vec(), discard: false });
                }
            }
            Frame::Continuation { stream: _, block, end_headers } => {
                let Some(mut b) = self.block.take() else {
                    return Err(self.fail(Reason::PROTOCOL_ERROR, "CONTINUATION without a header block"));
                };
                if b.bytes.len() + block.len() > self.block_limit() {
                    return Err(self.fail(Reason::ENHANCE_YOUR_CALM, BLOCK_TOO_LARGE));
                }
                b.bytes.extend_from_slice(block);
                if end_headers && b.discard {
                    self.decode_discard(&b.bytes)?;
                } else if end_headers {
                    self.header_block(b.stream, &b.bytes, b.end_stream, events)?;
                } else {
                    self.block = Some(b);
                }
            }
            Frame::Data { stream, data, end_stream, flow_len } => {
                let start = base + padding_offset(head, payload);
                self.data(stream, start, data.len(), end_stream, flow_len, events)?;
            }
            Frame::WindowUpdate { stream, increment } => self.window_update(stream, increment, events)?,
            Frame::Reset { stream, reason } => {
                if self.is_idle(stream) {
                    return Err(self.fail(Reason::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
                }
                if self.mark_reset(stream) {
                    events.push(Event::Reset { stream, reason, by_peer: true });
                }
            }
            Frame::Ping { ack, data } => {
                if !ack {
                    frame::write_ping_ack(&mut self.out, data);
                } else if self.shutdown_ping == Some(data) {
                    // The client has read the first GOAWAY: every stream it opened before that
                    // came before this ACK, so the final GOAWAY names them all.
                    self.finish_shutdown();
                }
            }
            Frame::GoAway { reason, .. } => {
                self.goaway_received = true;
                events.push(Event::GoAway { reason });
            }
            Frame::Priority { .. } | Frame::Unknown { .. } => {}
            Frame::PushPromise { .. } => {
                return Err(self.fail(Reason::PROTOCOL_ERROR, "PUSH_PROMISE from a client"));
            }
        }
        Ok(())
    }

    fn block_limit(&self) -> usize {
        self.cfg.max_header_list as usize + BLOCK_SLACK
    }

    /// A stream the client has not opened yet.
    fn is_idle(&self, stream: u32) -> bool {
        stream > self.last_stream
    }

    fn apply_settings(
        &mut self,
        params: impl Iterator<Item = (u16, u32)>,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        for (id, value) in params {
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_max_table_size(value as usize),
                setting::INITIAL_WINDOW_SIZE => {
                    // §6.9.2: every stream's send window moves by the difference.
                    let delta = i64::from(value) - i64::from(self.peer_stream_window);
                    self.peer_stream_window = value;
                    let mut overflow = false;
                    for (&id, s) in &mut self.streams {
                        s.send_window += delta;
                        overflow |= s.send_window > i64::from(frame::MAX_WINDOW);
                        if delta > 0 && s.blocked && s.send_window > 0 && self.send_window > 0 {
                            s.blocked = false;
                            self.blocked = self.blocked.saturating_sub(1);
                            events.push(Event::Writable { stream: id });
                        }
                    }
                    if overflow {
                        return Err(self.fail(Reason::FLOW_CONTROL_ERROR, "a stream window beyond 2^31-1"));
                    }
                }
                setting::MAX_FRAME_SIZE => self.peer_max_frame = value,
                _ => {}
            }
        }
        Ok(())
    }

    fn header_block(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        // Trailers on an open stream.
        if let Some(s) = self.streams.get(&stream) {
            if s.reset {
                return self.decode_discard(block);
            }
            if s.recv_closed || s.trailers {
                // A closed stream's second block (§5.1): HPACK still has to see it.
                self.decode_discard(block)?;
                self.stream_error(stream, Reason::STREAM_CLOSED, events)?;
                return Ok(());
            }
            let mut head = RequestHead::default();
            let decoded = self.decode_into(block, &mut head)?;
            if !end_stream || !decoded || !check_trailers(&head) {
                self.stream_error(stream, Reason::PROTOCOL_ERROR, events)?;
                return Ok(());
            }
            if let Some(s) = self.streams.get_mut(&stream) {
                s.trailers = true;
                s.recv_closed = true;
                if s.expected.is_some_and(|n| n != s.received) {
                    self.stream_error(stream, Reason::PROTOCOL_ERROR, events)?;
                    return Ok(());
                }
            }
            self.reap(stream);
            events.push(Event::Trailers { stream, head });
            return Ok(());
        }
        if stream.is_multiple_of(2) {
            return Err(self.fail(Reason::PROTOCOL_ERROR, "a client stream with an even identifier"));
        }
        if stream <= self.last_stream {
            self.decode_discard(block)?;
            if self.recently_reset(stream) {
                // Sent before the client saw the server's reset.
                return Ok(());
            }
            // §5.1: frames after END_STREAM on a closed stream; §5.1.1: a lower identifier.
            return Err(self.fail(Reason::STREAM_CLOSED, "HEADERS on a closed stream"));
        }
        self.last_stream = stream;
        if self.goaway_sent.is_some_and(|last| stream > last) {
            // After GOAWAY new streams are ignored (§6.8); HPACK still has to see them.
            return self.decode_discard(block);
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.decode_discard(block)?;
            self.write_reset(stream, Reason::REFUSED_STREAM);
            return Ok(());
        }
        let mut head = RequestHead::for_block(block.len());
        let decoded = self.decode_into(block, &mut head)?;
        let stream_state = Stream {
            recv_closed: end_stream,
            send_closed: false,
            head_sent: false,
            trailers: false,
            recv_window: i64::from(self.cfg.stream_window),
            recv_released: 0,
            send_window: i64::from(self.peer_stream_window),
            blocked: false,
            reset: false,
            expected: None,
            received: 0,
        };
        if !decoded {
            self.streams.insert(stream, stream_state);
            events.push(Event::Refused { stream, status: 431 });
            return Ok(());
        }
        if let Err(()) = check_request(&mut head) {
            // Malformed (§8.1.1): a stream error; the stream never reaches the caller.
            self.write_reset(stream, Reason::PROTOCOL_ERROR);
            return self.client_fault();
        }
        if end_stream && head.content_length.is_some_and(|n| n > 0) {
            self.write_reset(stream, Reason::PROTOCOL_ERROR);
            return self.client_fault();
        }
        let mut stream_state = stream_state;
        stream_state.expected = head.content_length;
        self.streams.insert(stream, stream_state);
        events.push(Event::Request { stream, head, end_stream });
        Ok(())
    }

    /// Decodes `block` into `head`: `Ok(false)` for a list over the limit (the stream's
    /// problem: HPACK stays in sync); a compression error is the connection's.
    fn decode_into(&mut self, block: &[u8], head: &mut RequestHead) -> Result<bool, ConnError> {
        match self.decoder.decode(block, &mut head.buf, &mut head.fields, self.cfg.max_header_list as usize) {
            Ok(()) => Ok(true),
            Err(DecodeError::ListTooLarge) => Ok(false),
            Err(DecodeError::Compression(what)) => Err(self.fail(Reason::COMPRESSION_ERROR, what)),
        }
    }

    fn decode_discard(&mut self, block: &[u8]) -> Result<(), ConnError> {
        let mut discard = std::mem::take(&mut self.discard);
        discard.clear();
        let r = self.decode_into(block, &mut discard).map(|_| ());
        self.discard = discard;
        r
    }

    fn data(
        &mut self,
        stream: u32,
        start: usize,
        len: usize,
        end_stream: bool,
        flow_len: u32,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        // The connection window counts every DATA frame, whatever its stream's state.
        self.recv_window -= i64::from(flow_len);
        if self.recv_window < 0 {
            return Err(self.fail(Reason::FLOW_CONTROL_ERROR, "DATA beyond the connection window"));
        }
        let padding = flow_len.saturating_sub(len as u32);
        let Some(s) = self.streams.get_mut(&stream) else {
            if self.is_idle(stream) {
                return Err(self.fail(Reason::PROTOCOL_ERROR, "DATA on an idle stream"));
            }
            // A closed stream: its bytes are given back to the connection at once.
            self.release_conn(flow_len);
            if self.recently_reset(stream) {
                return Ok(());
            }
            return Err(self.fail(Reason::STREAM_CLOSED, "DATA on a closed stream"));
        };
        if s.reset {
            // Sent before the client saw the reset.
            self.release_conn(flow_len);
            return Ok(());
        }
        if s.recv_closed {
            self.release_conn(flow_len);
            self.stream_error(stream, Reason::STREAM_CLOSED, events)?;
            return Ok(());
        }
        s.recv_window -= i64::from(flow_len);
        if s.recv_window < 0 {
            self.release_conn(flow_len);
            self.stream_error(stream, Reason::FLOW_CONTROL_ERROR, events)?;
            return Ok(());
        }
        s.received += len as u64;
        let over = s.expected.is_some_and(|n| s.received > n || (end_stream && s.received != n));
        if end_stream {
            s.recv_closed = true;
        }
        if over {
            // §8.1.1: content-length and the DATA received disagree.
            self.release_conn(flow_len);
            self.stream_error(stream, Reason::PROTOCOL_ERROR, events)?;
            return Ok(());
        }
        // Padding is nobody's to release: given back at once.
        if padding > 0 {
            self.release(stream, padding as usize);
        }
        events.push(Event::Data { stream, start, end: start + len, end_stream });
        if end_stream {
            self.reap(stream);
        }
        Ok(())
    }

    fn window_update(&mut self, stream: u32, increment: u32, events: &mut Vec<Event>) -> Result<(), ConnError> {
        if stream == 0 {
            self.send_window += i64::from(increment);
            if self.send_window > i64::from(frame::MAX_WINDOW) {
                return Err(self.fail(Reason::FLOW_CONTROL_ERROR, "connection window beyond 2^31-1"));
            }
            if self.blocked > 0 && self.send_window > 0 {
                for (&id, s) in &mut self.streams {
                    if s.blocked && s.send_window > 0 {
                        s.blocked = false;
                        events.push(Event::Writable { stream: id });
                    }
                }
                self.blocked = self.streams.values().filter(|s| s.blocked).count() as u32;
            }
            return Ok(());
        }
        if self.is_idle(stream) {
            return Err(self.fail(Reason::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let conn_open = self.send_window > 0;
        let Some(s) = self.streams.get_mut(&stream).filter(|s| !s.reset) else { return Ok(()) };
        s.send_window += i64::from(increment);
        if s.send_window > i64::from(frame::MAX_WINDOW) {
            self.stream_error(stream, Reason::FLOW_CONTROL_ERROR, events)?;
            return Ok(());
        }
        if s.blocked && s.send_window > 0 && conn_open {
            s.blocked = false;
            self.blocked = self.blocked.saturating_sub(1);
            events.push(Event::Writable { stream });
        }
        Ok(())
    }

    /// Resets `stream` with `reason` (RST_STREAM) and forgets it; the caller hears of it when it
    /// knew the stream.
    fn stream_error(&mut self, stream: u32, reason: Reason, events: &mut Vec<Event>) -> Result<(), ConnError> {
        self.write_reset(stream, reason);
        if self.mark_reset(stream) {
            events.push(Event::Reset { stream, reason, by_peer: false });
        }
        self.client_fault()
    }

    /// Queues GOAWAY for a connection error; nothing more is read.
    fn fail(&mut self, reason: Reason, what: &'static str) -> ConnError {
        if self.phase != Phase::Failed {
            self.phase = Phase::Failed;
            frame::write_goaway(&mut self.out, self.last_stream, reason, what.as_bytes());
            self.goaway_sent = Some(self.last_stream);
        }
        ConnError { reason, what }
    }

    /// Forgets a stream both sides have ended.
    fn reap(&mut self, stream: u32) {
        if self.streams.get(&stream).is_some_and(|s| s.recv_closed && s.send_closed) {
            self.streams.remove(&stream);
        }
    }

    /// Gives back `n` bytes of the connection window.
    fn release_conn(&mut self, n: u32) {
        self.recv_released = self.recv_released.saturating_add(n);
        let window = self.cfg.conn_window.max(65_535);
        if self.recv_released >= window / 2 {
            frame::write_window_update(&mut self.out, 0, self.recv_released);
            self.recv_window += i64::from(self.recv_released);
            self.recv_released = 0;
        }
    }

    /// The caller dealt with `n` body bytes of `stream`: the client may send that many more
    /// (WINDOW_UPDATEs go out once half a window is due, per stream and for the connection).
    pub fn release(&mut self, stream: u32, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.release_conn(n);
        let window = self.cfg.stream_window;
        if let Some(s) = self.streams.get_mut(&stream) {
            if s.recv_closed || s.reset {
                return;
            }
            s.recv_released = s.recv_released.saturating_add(n);
            if s.recv_released >= window / 2 {
                frame::write_window_update(&mut self.out, stream, s.recv_released);
                s.recv_window += i64::from(s.recv_released);
                s.recv_released = 0;
            }
        }
    }

    /// Sends a response head (final, or 1xx when `status` < 200, which never ends the stream).
    /// `fields`: regular fields (the caller dropped connection-specific ones).
    pub fn send_head<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), SendError> {
        self.send_head_with(stream, status, end_stream, |w| {
            for (name, value) in fields {
                w.field(name, value);
            }
        })
    }

    /// [`Conn::send_head`] with the fields written by `write`, straight into the frame.
    pub fn send_head_with(
        &mut self,
        stream: u32,
        status: u16,
        end_stream: bool,
        write: impl FnOnce(&mut HeadWriter<'_>),
    ) -> Result<(), SendError> {
        let interim = status < 200;
        let s = self.streams.get_mut(&stream).ok_or(SendError::Closed)?;
        if s.send_closed || s.reset {
            return Err(SendError::Closed);
        }
        if s.head_sent {
            return Err(SendError::Order);
        }
        let end_stream = end_stream && !interim;
        if !interim {
            s.head_sent = true;
        }
        let start = frame::write_headers_reserve(&mut self.out);
        self.encoder.begin(&mut self.out);
        self.encoder.status(status, &mut self.out);
        write(&mut HeadWriter { encoder: &mut self.encoder, out: &mut self.out });
        frame::finish_headers(&mut self.out, start, stream, end_stream, self.peer_max_frame);
        if end_stream {
            self.end_send(stream);
        }
        Ok(())
    }

    /// Sends trailers, which end the stream.
    pub fn send_trailers<'a>(
        &mut self,
        stream: u32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), SendError> {
        self.send_trailers_with(stream, |w| {
            for (name, value) in fields {
                w.field(name, value);
            }
        })
    }

    /// [`Conn::send_trailers`] with the fields written by `write`.
    pub fn send_trailers_with(
        &mut self,
        stream: u32,
        write: impl FnOnce(&mut HeadWriter<'_>),
    ) -> Result<(), SendError> {
        let s = self.streams.get(&stream).ok_or(SendError::Closed)?;
        if s.send_closed || s.reset {
            return Err(SendError::Closed);
        }
        if !s.head_sent {
            return Err(SendError::Order);
        }
        let start = frame::write_headers_reserve(&mut self.out);
        self.encoder.begin(&mut self.out);
        write(&mut HeadWriter { encoder: &mut self.encoder, out: &mut self.out });
        frame::finish_headers(&mut self.out, start, stream, true, self.peer_max_frame);
        self.end_send(stream);
        Ok(())
    }

    /// How many body bytes `stream` may send now (both windows).
    pub fn send_capacity(&self, stream: u32) -> usize {
        let Some(s) = self.streams.get(&stream).filter(|s| !s.reset) else { return 0 };
        usize::try_from(s.send_window.min(self.send_window).max(0)).unwrap_or(0)
    }

    /// Sends as much of `data` as the windows allow, in frames no larger than the client's
    /// SETTINGS_MAX_FRAME_SIZE; returns how much it took. `end_stream` ends the stream with the
    /// last byte (with an empty `data`, at once). When it takes less than all, the stream gets
    /// [`Event::Writable`] once there is window again.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) -> Result<usize, SendError> {
        let room = self.send_capacity(stream);
        let s = self.streams.get_mut(&stream).ok_or(SendError::Closed)?;
        if s.send_closed || s.reset {
            return Err(SendError::Closed);
        }
        if !s.head_sent {
            return Err(SendError::Order);
        }
        let take = data.len().min(room);
        let mut rest = data.get(..take).unwrap_or_default();
        let all = take == data.len();
        let max = self.peer_max_frame as usize;
        if rest.is_empty() && all && end_stream {
            frame::write_data(&mut self.out, stream, &[], true);
        }
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(rest.len().min(max));
            rest = tail;
            frame::write_data(&mut self.out, stream, piece, all && end_stream && rest.is_empty());
        }
        s.send_window -= take as i64;
        self.send_window -= take as i64;
        if !all && !s.blocked {
            s.blocked = true;
            self.blocked += 1;
        }
        if all && end_stream {
            self.end_send(stream);
        }
        Ok(take)
    }

    /// Resets `stream` (the server gives up on it: CANCEL, or INTERNAL_ERROR for a bug).
    pub fn reset(&mut self, stream: u32, reason: Reason) {
        if self.mark_reset(stream) {
            self.write_reset(stream, reason);
        }
    }

    /// The owner of `stream` let it go: a stream still open is reset (CANCEL), and its slot
    /// under the concurrent stream limit is free.
    pub fn forget(&mut self, stream: u32) {
        if self.is_open(stream) {
            self.write_reset(stream, Reason::CANCEL);
        }
        if let Some(s) = self.streams.remove(&stream) {
            if s.blocked {
                self.blocked = self.blocked.saturating_sub(1);
            }
        }
    }

    /// Flags `stream` reset; whether it was open.
    fn mark_reset(&mut self, stream: u32) -> bool {
        let Some(s) = self.streams.get_mut(&stream) else { return false };
        if s.reset {
            return false;
        }
        s.reset = true;
        if s.blocked {
            s.blocked = false;
            self.blocked = self.blocked.saturating_sub(1);
        }
        true
    }

    /// Whether `stream` is still open (not reset, not ended by both sides).
    pub fn is_open(&self, stream: u32) -> bool {
        self.streams.get(&stream).is_some_and(|s| !s.reset)
    }

    /// Starts a graceful shutdown (§6.8): GOAWAY NO_ERROR with the highest stream identifier,
    /// so the client opens no more streams, and a PING. Streams the client opened before it read
    /// the GOAWAY are still taken; the PING's ACK (or [`Conn::finish_shutdown`], if it does not
    /// come) sends the final GOAWAY naming the last stream the client opened, and streams above
    /// that are ignored. A connection whose client has not started yet gets the final GOAWAY at
    /// once.
    pub fn shutdown(&mut self) {
        if self.goaway_sent.is_some() || self.shutdown_ping.is_some() || self.phase == Phase::Failed {
            return;
        }
        if !self.started() {
            self.finish(self.last_stream);
            return;
        }
        frame::write_goaway(&mut self.out, frame::MAX_STREAM, Reason::NO_ERROR, b"");
        frame::write_ping(&mut self.out, SHUTDOWN_PING);
        self.shutdown_ping = Some(SHUTDOWN_PING);
    }

    /// Whether a graceful shutdown waits for the ACK of its PING.
    pub fn shutdown_pending(&self) -> bool {
        self.shutdown_ping.is_some() && self.goaway_sent.is_none()
    }

    /// Sends a graceful shutdown's final GOAWAY now, naming the last stream the client opened:
    /// on the PING's ACK, or when the caller stops waiting for it.
    pub fn finish_shutdown(&mut self) {
        if self.shutdown_ping.take().is_some() && self.phase != Phase::Failed {
            self.finish(self.last_stream);
        }
    }

    fn finish(&mut self, last: u32) {
        if self.goaway_sent.is_none() {
            frame::write_goaway(&mut self.out, last, Reason::NO_ERROR, b"");
            self.goaway_sent = Some(last);
        }
    }

    /// Ends the connection at once with GOAWAY `reason` (e.g. ENHANCE_YOUR_CALM for abuse).
    pub fn abort(&mut self, reason: Reason, what: &'static str) {
        self.fail(reason, what);
        self.streams.clear();
    }

    fn end_send(&mut self, stream: u32) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        s.send_closed = true;
        if s.blocked {
            s.blocked = false;
            self.blocked = self.blocked.saturating_sub(1);
        }
        if s.recv_closed {
            self.streams.remove(&stream);
        } else {
            // The response is complete while the client still sends: §8.1 says to stop it
            // with RST_STREAM NO_ERROR, so it neither sends more nor waits for window.
            s.reset = true;
            self.write_reset(stream, Reason::NO_ERROR);
        }
    }
}

/// Writes the fields of a head being sent, HPACK-encoded in place.
pub struct HeadWriter<'a> {
    encoder: &'a mut hpack::Encoder,
    out: &'a mut Vec<u8>,
}

impl HeadWriter<'_> {
    /// One field; the name in any case (it is sent lowercased). The caller dropped
    /// connection-specific fields.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        self.encoder.field(name, value, self.out);
    }

    /// A field that must never be indexed (a credential).
    pub fn field_never_indexed(&mut self, name: &[u8], value: &[u8]) {
        self.encoder.field_never_indexed(name, value, self.out);
    }
}

/// The offset of a DATA frame's data within its payload (after the pad length byte).
fn padding_offset(head: &Head, payload: &[u8]) -> usize {
    usize::from(head.flags & flag::PADDED != 0 && !payload.is_empty())
}

/// RFC 9113 §8.2, §8.3: splits the pseudo-header fields out of `head.fields` and checks
/// everything a request head must satisfy. `Err` is malformed.
fn check_request(head: &mut RequestHead) -> Result<(), ()> {
    let RequestHead { buf, fields, pseudo, content_length } = head;
    let mut regular = 0;
    let mut seen_regular = false;
    for i in 0..fields.len() {
        let Some(&f) = fields.get(i) else { break };
        let (name, value) = field_bytes(buf, &f);
        if !valid_value(value) {
            return Err(());
        }
        if let Some(p) = name.strip_prefix(b":") {
            if seen_regular {
                return Err(());
            }
            let slot = match p {
                b"method" => &mut pseudo.method,
                b"scheme" => &mut pseudo.scheme,
                b"authority" => &mut pseudo.authority,
                b"path" => &mut pseudo.path,
                _ => return Err(()),
            };
            if slot.is_some() {
                return Err(());
            }
            *slot = Some((f.value_start, f.value_end));
            continue;
        }
        seen_regular = true;
        if !valid_name(name) || connection_specific(name) {
            return Err(());
        }
        if name == b"te" && value != b"trailers" {
            return Err(());
        }
        if name == b"content-length" {
            let n = parse_length(value).ok_or(())?;
            if content_length.is_some_and(|m| m != n) {
                return Err(());
            }
            *content_length = Some(n);
        }
        if let Some(slot) = fields.get_mut(regular) {
            *slot = f;
        }
        regular += 1;
    }
    fields.truncate(regular);
    let method = pseudo.method.and_then(|(a, b)| buf.get(a as usize..b as usize)).ok_or(())?;
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(());
    }
    if method == b"CONNECT" {
        // §8.5: only :method and :authority.
        if pseudo.scheme.is_some() || pseudo.path.is_some() || pseudo.authority.is_none() {
            return Err(());
        }
        return Ok(());
    }
    let (Some(_), Some((a, b))) = (pseudo.scheme, pseudo.path) else { return Err(()) };
    if a == b {
        // An empty :path (§8.3.1).
        return Err(());
    }
    Ok(())
}

/// Trailers carry no pseudo-header fields and follow the request's field rules.
fn check_trailers(head: &RequestHead) -> bool {
    head.fields.iter().all(|f| {
        let (name, value) = field_bytes(&head.buf, f);
        !name.starts_with(b":") && valid_name(name) && !connection_specific(name) && valid_value(value)
    })
}

/// Connection-specific fields, malformed in HTTP/2 (§8.2.2).
pub fn connection_specific(name: &[u8]) -> bool {
    matches!(name, b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade")
}

/// A field name: token characters, no uppercase (§8.2.1).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| CHARS.get(usize::from(b)).is_some_and(|c| c & NAME_CHAR != 0))
}

/// §8.2.1: no NUL, CR or LF; no leading or trailing whitespace. Eight bytes at a time.
fn valid_value(v: &[u8]) -> bool {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = LOW * 0x80;
    // The high bit of a byte is set where `x` has a zero byte (and possibly above it: as a
    // whole, nonzero exactly when some byte is zero).
    let zeros = |x: u64| x.wrapping_sub(LOW) & !x;
    let (cr, lf) = (LOW * u64::from(b'\r'), LOW * u64::from(b'\n'));
    let mut words = v.chunks_exact(8);
    for chunk in &mut words {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        if (zeros(w) | zeros(w ^ cr) | zeros(w ^ lf)) & HIGH != 0 {
            return false;
        }
    }
    if words.remainder().iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
        return false;
    }
    !matches!(v.first(), Some(b' ' | b'\t')) && !matches!(v.last(), Some(b' ' | b'\t'))
}

fn is_tchar(b: u8) -> bool {
    CHARS.get(usize::from(b)).is_some_and(|c| c & TCHAR != 0)
}

/// RFC 9110 §5.6.2 `tchar`.
const TCHAR: u8 = 1;
/// A `tchar` allowed in an HTTP/2 field name: not uppercase (§8.2.1).
const NAME_CHAR: u8 = 2;

/// The classes of each byte.
#[allow(clippy::indexing_slicing)] // `b` < 256 = the table's length
const CHARS: [u8; 256] = {
    let mut t = [0; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            )
        {
            t[b] = if c.is_ascii_uppercase() { TCHAR } else { TCHAR | NAME_CHAR };
        }
        b += 1;
    }
    t
};

/// A content-length value: digits only, no sign, no overflow.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

#[cfg(test)]
mod tests;
