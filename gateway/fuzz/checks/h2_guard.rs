//! `FrameGuard` over an in-memory transport carrying a valid connection preface and then
//! arbitrary bytes, read in fuzzer-chosen chunk and buffer sizes: never panics, always makes
//! progress, and delivers a prefix of the input: all of it at EOF, and once tripped nothing more.

use std::cell::Cell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use gateway::downstream::h2::guard::{FrameGuard, GuardLimits};
use tokio::io::{AsyncRead, ReadBuf};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Small limits, so every violation is within reach of short inputs.
const LIMITS: GuardLimits = GuardLimits {
    window: Duration::from_secs(3600),
    max_resets: 3,
    max_control_frames: 3,
    max_empty_frames: 3,
    max_header_block_bytes: 64,
};

/// Hands out `data` at most `chunk` bytes per read, and Pending every other read if `pend`.
struct Transport {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
    pend: bool,
    pended: bool,
}

impl AsyncRead for Transport {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.pend {
            this.pended = !this.pended;
            if this.pended {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        let rest = &this.data[this.pos..];
        let n = rest.len().min(this.chunk).min(buf.remaining());
        buf.put_slice(&rest[..n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let Some((&pick, frames)) = data.split_first() else { return };
    let chunk = [1, 3, 9, 10, 64, 4096, usize::MAX][usize::from(pick & 7) % 7];
    let buf_size = [1, 5, 9, 16, 100, 16 * 1024][usize::from(pick >> 3) % 6];
    let pend = pick & 0x80 != 0;
    let mut input = PREFACE.to_vec();
    input.extend_from_slice(frames);

    let transport = Transport { data: input.clone(), pos: 0, chunk, pend, pended: false };
    let tripped = Rc::new(Cell::new(None));
    let mut guard = FrameGuard::new(transport, LIMITS, Rc::clone(&tripped));
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    let mut storage = vec![0u8; buf_size];
    for _ in 0..input.len() * 4 + 100 {
        let mut rb = ReadBuf::new(&mut storage);
        match Pin::new(&mut guard).poll_read(&mut cx, &mut rb) {
            Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                assert_eq!(tripped.get(), None, "EOF after a trip");
                assert_eq!(out, input, "EOF before the whole input was delivered");
                return;
            }
            Poll::Ready(Ok(())) => {
                out.extend_from_slice(rb.filled());
                assert!(input.starts_with(&out), "output is not a prefix of the input");
            }
            Poll::Ready(Err(e)) => panic!("read error {e}"),
            Poll::Pending if tripped.get().is_some() => {
                let mut rb = ReadBuf::new(&mut storage);
                assert!(Pin::new(&mut guard).poll_read(&mut cx, &mut rb).is_pending(), "read after a trip");
                assert!(input.starts_with(&out), "output is not a prefix of the input");
                return;
            }
            Poll::Pending => {}
        }
    }
    panic!("guard made no progress");
}
