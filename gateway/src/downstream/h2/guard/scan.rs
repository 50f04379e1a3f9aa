//! The frame-header state machine behind [`FrameGuard`](super::FrameGuard): it walks the inbound
//! byte stream chunk by chunk, parses only the 9-byte frame headers, skips payloads by count and
//! counts the frames a flood is made of.

use std::time::Instant;

use super::{GuardLimits, Violation};

/// The client connection preface (RFC 9113 section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADER_LEN: usize = 9;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const CONTINUATION: u8 = 0x9;

const FLAG_ACK: u8 = 0x1;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;

/// What a chunk did, in positions of the chunk prefixed by the bytes [`Scanner::carried`]
/// returned before the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// The first `n` bytes may be delivered; the rest are an incomplete frame header, now carried.
    Pass(usize),
    /// The frame whose header starts at `n` broke a limit; the first `n` bytes may be delivered,
    /// nothing after them ever.
    Trip(Violation, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Inside the connection preface, `matched` bytes of it seen.
    Preface { matched: u8 },
    /// At a frame header; `header[..filled]` are its first bytes.
    Header { filled: u8 },
    /// Inside a payload with `remaining` bytes still to skip.
    Payload { remaining: u32 },
    /// The preface was wrong: the h2 crate rejects the connection, nothing more to count.
    Passthrough,
    /// A limit was broken; no byte is accepted any more.
    Tripped(Violation),
}

/// Frame counters over a fixed window. No allocation; the clock is read only for counted frames.
#[derive(Debug)]
pub(super) struct Scanner {
    limits: GuardLimits,
    state: State,
    header: [u8; HEADER_LEN],
    /// Payload bytes of the header block in progress (HEADERS/PUSH_PROMISE up to END_HEADERS).
    block: Option<u32>,
    window_start: Instant,
    resets: u32,
    control: u32,
    empty: u32,
}

impl Scanner {
    pub(super) fn new(limits: GuardLimits, now: Instant) -> Self {
        Self {
            limits,
            state: State::Preface { matched: 0 },
            header: [0; HEADER_LEN],
            block: None,
            window_start: now,
            resets: 0,
            control: 0,
            empty: 0,
        }
    }

    /// True inside a header block (HEADERS or PUSH_PROMISE seen, END_HEADERS not yet).
    pub(super) fn in_header_block(&self) -> bool {
        self.block.is_some()
    }

    /// True once a limit was broken; [`Scanner::scan`] accepts nothing more.
    pub(super) fn is_tripped(&self) -> bool {
        matches!(self.state, State::Tripped(_))
    }

    /// The bytes of an incomplete frame header held back from the reader; they are the start of
    /// the next chunk's positions.
    pub(super) fn carried(&self) -> &[u8] {
        match self.state {
            State::Header { filled } => self.header.get(..usize::from(filled)).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Forgets the carried bytes (the stream ended inside a frame header: they are delivered
    /// as they are) and stops counting.
    pub(super) fn finish(&mut self) {
        if matches!(self.state, State::Header { .. }) {
            self.state = State::Passthrough;
        }
    }

    /// Scans the next `chunk` of the inbound stream. `now` is read at most once.
    pub(super) fn scan(&mut self, chunk: &[u8], now: impl FnOnce() -> Instant) -> Scan {
        let mut clock = Clock { now: Some(now), at: None };
        let carried = self.carried().len();
        let mut pos = 0usize;
        while pos < chunk.len() {
            let rest = chunk.get(pos..).unwrap_or_default();
            match self.state {
                State::Preface { matched } => {
                    let want = PREFACE.get(usize::from(matched)..).unwrap_or_default();
                    let n = want.len().min(rest.len());
                    if rest.get(..n) != want.get(..n) {
                        self.state = State::Passthrough;
                        continue;
                    }
                    pos += n;
                    let matched = usize::from(matched) + n;
                    self.state = if matched >= PREFACE.len() {
                        State::Header { filled: 0 }
                    } else {
                        State::Preface { matched: u8::try_from(matched).unwrap_or(u8::MAX) }
                    };
                }
                State::Header { filled } => {
                    let filled = usize::from(filled);
                    let n = (HEADER_LEN - filled).min(rest.len());
                    if let (Some(dst), Some(src)) = (self.header.get_mut(filled..filled + n), rest.get(..n)) {
                        dst.copy_from_slice(src);
                    }
                    pos += n;
                    if filled + n < HEADER_LEN {
                        self.state = State::Header { filled: u8::try_from(filled + n).unwrap_or(0) };
                        break;
                    }
                    let frame = FrameHeader::parse(&self.header);
                    if let Err(v) = self.check(frame, &mut clock) {
                        self.state = State::Tripped(v);
                        // The header started `HEADER_LEN` bytes back, partly in the carried bytes.
                        return Scan::Trip(v, (carried + pos).saturating_sub(HEADER_LEN));
                    }
                    self.state = State::Payload { remaining: frame.len };
                }
                State::Payload { remaining } => {
                    let n = rest.len().min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    pos += n;
                    let left = remaining.saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
                    self.state =
                        if left == 0 { State::Header { filled: 0 } } else { State::Payload { remaining: left } };
                }
                State::Passthrough => return Scan::Pass(carried + chunk.len()),
                State::Tripped(v) => return Scan::Trip(v, 0),
            }
        }
        Scan::Pass((carried + chunk.len()).saturating_sub(self.carried().len()))
    }

    /// Counts one complete frame header against the limits.
    fn check<F: FnOnce() -> Instant>(&mut self, f: FrameHeader, clock: &mut Clock<F>) -> Result<(), Violation> {
        match f.kind {
            RST_STREAM => self.count(clock, Counter::Resets)?,
            PING | SETTINGS if f.flags & FLAG_ACK == 0 => self.count(clock, Counter::Control)?,
            PRIORITY => self.count(clock, Counter::Control)?,
            DATA if f.len == 0 && f.flags & FLAG_END_STREAM == 0 => self.count(clock, Counter::Empty)?,
            HEADERS | PUSH_PROMISE | CONTINUATION => {
                let before = if f.kind == CONTINUATION { self.block.unwrap_or(0) } else { 0 };
                let total = before.saturating_add(f.len);
                if total > self.limits.max_header_block_bytes {
                    return Err(Violation::HeaderBlockTooLarge);
                }
                let end_headers = f.flags & FLAG_END_HEADERS != 0;
                self.block = if end_headers { None } else { Some(total) };
                if f.len == 0 && !end_headers && f.kind != PUSH_PROMISE {
                    self.count(clock, Counter::Empty)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn count<F: FnOnce() -> Instant>(&mut self, clock: &mut Clock<F>, which: Counter) -> Result<(), Violation> {
        let now = clock.read();
        if now.saturating_duration_since(self.window_start) >= self.limits.window {
            self.window_start = now;
            self.resets = 0;
            self.control = 0;
            self.empty = 0;
        }
        let (n, max, v) = match which {
            Counter::Resets => (&mut self.resets, self.limits.max_resets, Violation::ResetFlood),
            Counter::Control => (&mut self.control, self.limits.max_control_frames, Violation::ControlFlood),
            Counter::Empty => (&mut self.empty, self.limits.max_empty_frames, Violation::EmptyFrameFlood),
        };
        *n = n.saturating_add(1);
        if *n > max {
            return Err(v);
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Counter {
    Resets,
    Control,
    Empty,
}

/// The clock of one scan: read on first use, then reused.
struct Clock<F> {
    now: Option<F>,
    at: Option<Instant>,
}

impl<F: FnOnce() -> Instant> Clock<F> {
    fn read(&mut self) -> Instant {
        if let Some(at) = self.at {
            return at;
        }
        let at = self.now.take().map_or_else(Instant::now, |f| f());
        self.at = Some(at);
        at
    }
}

#[derive(Debug, Clone, Copy)]
struct FrameHeader {
    len: u32,
    kind: u8,
    flags: u8,
}

impl FrameHeader {
    fn parse(h: &[u8; HEADER_LEN]) -> Self {
        let [l0, l1, l2, kind, flags, ..] = *h;
        Self { len: u32::from_be_bytes([0, l0, l1, l2]), kind, flags }
    }
}
