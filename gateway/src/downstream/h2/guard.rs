//! A guard between the transport and the h2 server connection that bounds the frame floods the
//! h2 crate does not bound on its own: rapid RST_STREAM (CVE-2023-44487), PING/SETTINGS/PRIORITY
//! floods, empty DATA/HEADERS/CONTINUATION frames and endless header blocks.
//!
//! The guard reads only the 9-byte frame headers of the inbound stream and passes every byte
//! through unchanged. When a limit is broken it delivers the bytes before the offending frame's
//! header (the h2 crate sees only complete earlier frames), sets the shared `tripped` flag, wakes
//! the task and from then on never completes a read. The connection owner sees the flag, sends
//! GOAWAY ENHANCE_YOUR_CALM (`h2::server::Connection::abrupt_shutdown`) and drops the connection;
//! writes keep working so the GOAWAY gets out.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use self::scan::{Scan, Scanner};

mod scan;
#[cfg(test)]
mod tests;

/// Per-connection limits, each counted over a fixed window of `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardLimits {
    /// Length of the counting window; all counters restart when it has elapsed.
    pub window: Duration,
    /// RST_STREAM frames allowed per window.
    pub max_resets: u32,
    /// PING and SETTINGS frames without ACK plus PRIORITY frames allowed per window.
    pub max_control_frames: u32,
    /// DATA frames of length 0 without END_STREAM, and HEADERS/CONTINUATION frames of length 0
    /// without END_HEADERS, allowed per window.
    pub max_empty_frames: u32,
    /// Largest header block, in payload bytes of a HEADERS or PUSH_PROMISE frame and the
    /// CONTINUATION frames up to END_HEADERS. Must be at least the h2 server's max frame size
    /// (16 384 by default), or a legitimate single HEADERS frame trips.
    pub max_header_block_bytes: u32,
}

/// The limit a connection broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    ResetFlood,
    ControlFlood,
    EmptyFrameFlood,
    HeaderBlockTooLarge,
}

impl Violation {
    /// A stable snake_case name for metric labels and logs.
    pub fn label(self) -> &'static str {
        match self {
            Violation::ResetFlood => "reset_flood",
            Violation::ControlFlood => "control_flood",
            Violation::EmptyFrameFlood => "empty_frame_flood",
            Violation::HeaderBlockTooLarge => "header_block_too_large",
        }
    }
}

/// Wraps the transport of one HTTP/2 server connection; see the module documentation.
#[derive(Debug)]
pub struct FrameGuard<T> {
    inner: T,
    scanner: Scanner,
    tripped: Rc<Cell<Option<Violation>>>,
    /// Set to whether the client is inside a header block, after every read (see
    /// [`FrameGuard::observe_header_blocks`]).
    in_block: Option<Rc<Cell<bool>>>,
    /// Checked bytes not yet delivered because the reader's buffer was too small for them.
    pending: [u8; 9],
    pending_at: u8,
    pending_end: u8,
}

impl<T> FrameGuard<T> {
    /// Guards `inner`, which must be at the start of the client's connection preface. `tripped`
    /// is set once, to the first limit broken.
    pub fn new(inner: T, limits: GuardLimits, tripped: Rc<Cell<Option<Violation>>>) -> Self {
        Self {
            inner,
            scanner: Scanner::new(limits, Instant::now()),
            tripped,
            in_block: None,
            pending: [0; 9],
            pending_at: 0,
            pending_end: 0,
        }
    }

    fn note_block(&self) {
        if let Some(cell) = &self.in_block {
            cell.set(self.scanner.in_header_block());
        }
    }

    /// Keeps `cell` set to whether the client is in the middle of a header block: when the h2
    /// crate's own CONTINUATION checks end the connection, this tells it was a header flood.
    pub fn observe_header_blocks(mut self, cell: Rc<Cell<bool>>) -> Self {
        self.in_block = Some(cell);
        self
    }

    /// The wrapped transport (e.g. for the TLS session's ALPN or SNI).
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped transport, read past the guard (a lingering close discards what it reads).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    fn pending(&self) -> &[u8] {
        self.pending.get(usize::from(self.pending_at)..usize::from(self.pending_end)).unwrap_or_default()
    }

    fn set_pending(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.pending.len());
        if let (Some(dst), Some(src)) = (self.pending.get_mut(..n), bytes.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pending_at = 0;
        self.pending_end = u8::try_from(n).unwrap_or(0);
    }

    fn trip(&mut self, v: Violation, cx: &mut Context<'_>) {
        if self.tripped.get().is_none() {
            self.tripped.set(Some(v));
        }
        cx.waker().wake_by_ref();
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FrameGuard<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if !this.pending().is_empty() {
                let n = this.pending().len().min(buf.remaining());
                buf.put_slice(this.pending().get(..n).unwrap_or_default());
                this.pending_at = this.pending_at.saturating_add(u8::try_from(n).unwrap_or(0));
                return Poll::Ready(Ok(()));
            }
            if this.scanner.is_tripped() {
                return Poll::Pending;
            }
            let carried = this.scanner.carried().len();
            if carried == 0 {
                // Common case: read straight into the reader's buffer, then cut it back.
                let start = buf.filled().len();
                ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                let new = buf.filled().get(start..).unwrap_or_default();
                if new.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                let scan = this.scanner.scan(new, Instant::now);
                this.note_block();
                let (Scan::Pass(n) | Scan::Trip(_, n)) = scan;
                buf.set_filled(start + n);
                if let Scan::Trip(v, _) = scan {
                    this.trip(v, cx);
                }
                if n > 0 {
                    return Poll::Ready(Ok(()));
                }
            } else {
                // A frame header straddles reads: complete it in a small buffer of our own.
                let mut header = [0u8; 9];
                if let (Some(dst), Some(src)) = (header.get_mut(..carried), this.scanner.carried().get(..carried)) {
                    dst.copy_from_slice(src);
                }
                let mut more = ReadBuf::new(header.get_mut(carried..).unwrap_or_default());
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut more))?;
                let got = more.filled().len();
                if got == 0 {
                    // EOF inside a frame header: deliver the fragment, the h2 crate reports it.
                    this.scanner.finish();
                    this.set_pending(header.get(..carried).unwrap_or_default());
                    continue;
                }
                let scan = this.scanner.scan(header.get(carried..carried + got).unwrap_or_default(), Instant::now);
                this.note_block();
                let (Scan::Pass(n) | Scan::Trip(_, n)) = scan;
                this.set_pending(header.get(..n).unwrap_or_default());
                if let Scan::Trip(v, _) = scan {
                    this.trip(v, cx);
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FrameGuard<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
