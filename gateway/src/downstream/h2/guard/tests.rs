use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::scan::{Scan, Scanner};
use super::{FrameGuard, GuardLimits, Violation};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn limits() -> GuardLimits {
    GuardLimits {
        window: Duration::from_secs(60),
        max_resets: 3,
        max_control_frames: 3,
        max_empty_frames: 3,
        max_header_block_bytes: 64,
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A frame header claiming `len` payload bytes, without the payload.
fn bare_header(kind: u8, flags: u8, stream: u32, len: u32) -> Vec<u8> {
    let l = len.to_be_bytes();
    let mut f = vec![l[1], l[2], l[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f
}

/// Returns `data` in chunks of the given sizes (cycled), answering Pending every other call
/// when `pend` is set.
struct Script {
    data: Vec<u8>,
    pos: usize,
    chunks: Vec<usize>,
    next: usize,
    pend: bool,
    pended: bool,
    written: Rc<RefCell<Vec<u8>>>,
}

impl Script {
    fn new(data: &[u8], chunks: &[usize], pend: bool) -> Self {
        let written = Rc::default();
        Self { data: data.to_vec(), pos: 0, chunks: chunks.to_vec(), next: 0, pend, pended: false, written }
    }
}

impl AsyncRead for Script {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.pend {
            this.pended = !this.pended;
            if this.pended {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        let size = this.chunks.get(this.next % this.chunks.len().max(1)).copied().unwrap_or(usize::MAX).max(1);
        this.next += 1;
        let n = size.min(buf.remaining()).min(this.data.len() - this.pos);
        buf.put_slice(&this.data[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.written.borrow_mut().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Reads everything the guard delivers; returns it with the violation, if one tripped.
fn drive(input: &[u8], chunks: &[usize], bufs: &[usize], pend: bool) -> (Vec<u8>, Option<Violation>) {
    let script = Script::new(input, chunks, pend);
    let tripped = Rc::new(Cell::new(None));
    let mut guard = FrameGuard::new(script, limits(), tripped.clone());
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    for i in 0..input.len() * 4 + 100 {
        let mut storage = vec![0u8; bufs.get(i % bufs.len().max(1)).copied().unwrap_or(4096).max(1)];
        let mut rb = ReadBuf::new(&mut storage);
        match Pin::new(&mut guard).poll_read(&mut cx, &mut rb) {
            Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                assert_eq!(tripped.get(), None, "EOF after a trip");
                return (out, None);
            }
            Poll::Ready(Ok(())) => out.extend_from_slice(rb.filled()),
            Poll::Ready(Err(e)) => panic!("read error {e}"),
            Poll::Pending if tripped.get().is_some() => {
                // Tripped: Pending forever.
                let mut rb = ReadBuf::new(&mut storage);
                assert!(Pin::new(&mut guard).poll_read(&mut cx, &mut rb).is_pending());
                return (out, tripped.get());
            }
            Poll::Pending => {}
        }
    }
    panic!("guard made no progress");
}

fn whole(input: &[u8]) -> (Vec<u8>, Option<Violation>) {
    drive(input, &[usize::MAX], &[1 << 20], false)
}

/// Preface and a WINDOW_UPDATE (uncounted), then `n` copies of `f`; returns the input and the
/// offset of copy `k`.
fn flood(f: &[u8], n: usize, k: usize) -> (Vec<u8>, usize) {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x8, 0, 0, &[0, 1, 0, 0]));
    let mut at = 0;
    for i in 0..n {
        if i == k {
            at = input.len();
        }
        input.extend_from_slice(f);
    }
    (input, at)
}

fn assert_trips(f: &[u8], v: Violation) {
    // The 4th counted frame breaks a limit of 3.
    let (input, at) = flood(f, 10, 3);
    for (chunks, bufs) in [(&[usize::MAX][..], &[1 << 20][..]), (&[1][..], &[1][..]), (&[7, 3, 11][..], &[5, 64][..])] {
        let (out, tripped) = drive(&input, chunks, bufs, true);
        assert_eq!(tripped, Some(v), "{chunks:?} {bufs:?}");
        assert_eq!(out, input[..at], "{chunks:?} {bufs:?}");
    }
}

#[test]
fn reset_flood_trips_at_the_offending_frame() {
    assert_trips(&frame(0x3, 0, 1, &[0, 0, 0, 8]), Violation::ResetFlood);
}

#[test]
fn control_floods_trip() {
    assert_trips(&frame(0x6, 0, 0, &[7; 8]), Violation::ControlFlood);
    assert_trips(&frame(0x4, 0, 0, &[]), Violation::ControlFlood);
    assert_trips(&frame(0x2, 0, 3, &[0, 0, 0, 0, 15]), Violation::ControlFlood);
}

#[test]
fn empty_frame_floods_trip() {
    assert_trips(&frame(0x0, 0, 1, &[]), Violation::EmptyFrameFlood);
    assert_trips(&frame(0x9, 0, 1, &[]), Violation::EmptyFrameFlood);
}

#[test]
fn acks_and_ended_empty_frames_are_not_counted() {
    for f in [frame(0x6, 1, 0, &[7; 8]), frame(0x4, 1, 0, &[]), frame(0x0, 1, 1, &[]), frame(0x9, 4, 1, &[])] {
        let (input, _) = flood(&f, 50, 0);
        assert_eq!(whole(&input), (input.clone(), None));
    }
}

#[test]
fn header_block_too_large_trips_on_the_continuation_header() {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x1, 0, 1, &[0; 40]));
    input.extend(frame(0x9, 0, 1, &[0; 20]));
    let at = input.len();
    // 60 + 5 > 64: trips on the header alone; the claimed 16 MiB payload never arrives.
    input.extend(bare_header(0x9, 0, 1, 0xff_ffff));
    for chunks in [&[usize::MAX][..], &[1][..], &[4, 9][..]] {
        let (out, tripped) = drive(&input, chunks, &[3, 4096], true);
        assert_eq!(tripped, Some(Violation::HeaderBlockTooLarge));
        assert_eq!(out, input[..at]);
    }
}

#[test]
fn single_oversized_headers_frame_trips() {
    let mut input = PREFACE.to_vec();
    let at = input.len();
    input.extend(bare_header(0x1, 0x5, 1, 65));
    assert_eq!(whole(&input), (input[..at].to_vec(), Some(Violation::HeaderBlockTooLarge)));
}

#[test]
fn end_headers_closes_the_block() {
    let mut input = PREFACE.to_vec();
    for stream in (1..200).step_by(2) {
        input.extend(frame(0x1, 0, stream, &[0; 40]));
        input.extend(frame(0x9, 0x4, stream, &[0; 24]));
    }
    assert_eq!(whole(&input), (input.clone(), None));
}

fn normal_session() -> Vec<u8> {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x4, 0, 0, &[0, 4, 0, 1, 0, 0]));
    input.extend(frame(0x8, 0, 0, &[0, 0x0f, 0, 1]));
    input.extend(frame(0x4, 1, 0, &[]));
    for stream in (1..400).step_by(2) {
        input.extend(frame(0x1, 0x4, stream, &[0x82, 0x86, 0x84, 0x41, 0x01, b'a']));
        input.extend(frame(0x0, 0, stream, &[b'x'; 100]));
        input.extend(frame(0x0, 1, stream, &[]));
        input.extend(frame(0x8, 0, stream, &[0, 0, 1, 0]));
        input.extend(frame(0x6, 1, 0, &[1; 8]));
    }
    input
}

#[test]
fn normal_session_never_trips() {
    let input = normal_session();
    assert_eq!(whole(&input), (input.clone(), None));
    assert_eq!(drive(&input, &[1, 2, 3, 5, 8, 13], &[1, 9, 100], true), (input.clone(), None));
}

#[test]
fn bad_preface_passes_through_uncounted() {
    let mut input = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec();
    for _ in 0..20 {
        input.extend(frame(0x3, 0, 1, &[0, 0, 0, 8]));
    }
    assert_eq!(drive(&input, &[3], &[2], true), (input.clone(), None));
}

#[test]
fn eof_inside_a_frame_header_delivers_the_fragment() {
    let mut input = PREFACE.to_vec();
    input.extend(&frame(0x4, 0, 0, &[])[..5]);
    assert_eq!(drive(&input, &[2], &[3], true), (input.clone(), None));
}

#[test]
fn window_restarts_counting_when_elapsed() {
    let t0 = Instant::now();
    let mut s = Scanner::new(limits(), t0);
    let rst = frame(0x3, 0, 1, &[0, 0, 0, 8]);
    let three: Vec<u8> = rst.iter().chain(&rst).chain(&rst).copied().collect();
    assert_eq!(s.scan(PREFACE, || t0), Scan::Pass(PREFACE.len()));
    assert_eq!(s.scan(&three, || t0 + Duration::from_secs(59)), Scan::Pass(three.len()));
    // The window has elapsed: three more are allowed, the fourth is not.
    assert_eq!(s.scan(&three, || t0 + Duration::from_secs(60)), Scan::Pass(three.len()));
    assert_eq!(s.scan(&rst, || t0 + Duration::from_secs(119)), Scan::Trip(Violation::ResetFlood, 0));
    assert!(s.is_tripped());
}

#[test]
fn labels_are_distinct() {
    let all =
        [Violation::ResetFlood, Violation::ControlFlood, Violation::EmptyFrameFlood, Violation::HeaderBlockTooLarge];
    let labels: std::collections::HashSet<_> = all.iter().map(|v| v.label()).collect();
    assert_eq!(labels.len(), all.len());
    assert_eq!(Violation::ResetFlood.label(), "reset_flood");
}

/// The whole contract with the h2 crate: the server sees the requests before the flood, never an
/// error from a cut frame; the owner sees the flag and gets GOAWAY ENHANCE_YOUR_CALM out.
#[test]
fn h2_server_behind_the_guard_answers_a_reset_flood_with_goaway() {
    let mut input = PREFACE.to_vec();
    input.extend(frame(0x4, 0, 0, &[]));
    // GET / on :scheme http, :authority "a" (literal without indexing, indexed name 1).
    let block = [0x82, 0x86, 0x84, 0x01, 0x01, b'a'];
    for stream in [1u32, 3, 5, 7, 9] {
        input.extend(frame(0x1, 0x5, stream, &block));
        input.extend(frame(0x3, 0, stream, &[0, 0, 0, 8]));
    }
    let script = Script::new(&input, &[5], true);
    let written = script.written.clone();
    let tripped = Rc::new(Cell::new(None));
    let guard = FrameGuard::new(script, limits(), tripped.clone());
    let mut cx = Context::from_waker(Waker::noop());

    let mut handshake = Box::pin(::h2::server::handshake(guard));
    let mut conn = (0..100)
        .find_map(|_| match handshake.as_mut().poll(&mut cx) {
            Poll::Ready(r) => Some(r.expect("handshake")),
            Poll::Pending => None,
        })
        .expect("handshake done");
    let mut accepted = 0;
    for _ in 0..200 {
        match conn.poll_accept(&mut cx) {
            Poll::Ready(Some(Ok(_))) => accepted += 1,
            Poll::Ready(other) => panic!("connection ended: {other:?}"),
            Poll::Pending if tripped.get().is_some() => break,
            Poll::Pending => {}
        }
    }
    assert_eq!(tripped.get(), Some(Violation::ResetFlood));
    assert_eq!(accepted, 4, "streams 1, 3, 5 and 7 were opened before the 4th reset");

    conn.abrupt_shutdown(::h2::Reason::ENHANCE_YOUR_CALM);
    for _ in 0..100 {
        if conn.poll_closed(&mut cx).is_ready() {
            break;
        }
    }
    let out = written.borrow();
    let goaway = out.windows(5).position(|w| w[3] == 0x7 && w[..3] == [0, 0, 8]).expect("a GOAWAY frame");
    assert_eq!(out[goaway + 13..goaway + 17], 0xbu32.to_be_bytes(), "ENHANCE_YOUR_CALM");
}

fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    let kinds = prop_oneof![0u8..=9, Just(0xab)];
    (kinds, any::<u8>(), 0u32..8, 0usize..40)
        .prop_map(|(kind, flags, stream, len)| frame(kind, flags, stream, &vec![0x5a; len]))
}

proptest! {
    #[test]
    fn splits_change_neither_bytes_nor_trip_point(
        frames in prop::collection::vec(any_frame(), 0..40),
        tail in prop::collection::vec(any::<u8>(), 0..12),
        chunks in prop::collection::vec(1usize..30, 1..8),
        bufs in prop::collection::vec(1usize..40, 1..8),
        pend in any::<bool>(),
    ) {
        let mut input = PREFACE.to_vec();
        input.extend(frames.concat());
        input.extend(tail);
        let (out_whole, trip_whole) = whole(&input);
        if trip_whole.is_none() {
            prop_assert_eq!(&out_whole, &input);
        } else {
            prop_assert!(input.starts_with(&out_whole));
        }
        let (out, trip) = drive(&input, &chunks, &bufs, pend);
        prop_assert_eq!(out, out_whole);
        prop_assert_eq!(trip, trip_whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..300),
        chunks in prop::collection::vec(1usize..30, 1..8),
    ) {
        let mut input = PREFACE.to_vec();
        input.extend(body);
        let (out_whole, trip_whole) = whole(&input);
        prop_assert!(input.starts_with(&out_whole));
        prop_assert_eq!(drive(&input, &chunks, &[7, 1, 50], true), (out_whole, trip_whole));
    }
}
