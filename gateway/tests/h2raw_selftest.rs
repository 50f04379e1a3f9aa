//! The raw HTTP/2 frame writer of `common::h2raw` checked against the h2 crate's server: the
//! bytes it writes decode to the request they describe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::cell::RefCell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use common::h2raw;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A transport that reads the scripted client bytes, then stays Pending (never EOF), and keeps
/// what the server writes.
struct Scripted {
    input: Vec<u8>,
    pos: usize,
    output: Rc<RefCell<Vec<u8>>>,
}

impl AsyncRead for Scripted {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.pos == this.input.len() {
            return Poll::Pending;
        }
        let n = buf.remaining().min(this.input.len() - this.pos);
        buf.put_slice(&this.input[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Scripted {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.output.borrow_mut().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Polls `f` until it is ready; the transport never waits, so a bounded number of polls does.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..100 {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("future not ready after 100 polls");
}

#[test]
fn h2_server_decodes_the_raw_frames() {
    let long = "v".repeat(300);
    let block = h2raw::hpack_literal(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/upload?x=1"),
        (":authority", "test.local"),
        ("x-long", &long),
    ]);
    let (first, rest) = block.split_at(block.len() / 2);
    let mut input = h2raw::preface();
    input.extend(h2raw::settings(&[(0x3, 100), (0x4, 65_535)]));
    input.extend(h2raw::settings_ack());
    input.extend(h2raw::window_update(0, 1 << 20));
    input.extend(h2raw::headers(1, first, false, false));
    input.extend(h2raw::continuation(1, rest, true));
    input.extend(h2raw::priority(1));
    input.extend(h2raw::ping([9; 8]));
    input.extend(h2raw::data(1, b"hello", true));
    let output = Rc::new(RefCell::new(Vec::new()));
    let io = Scripted { input, pos: 0, output: output.clone() };

    let mut conn = ready(h2::server::handshake(io)).expect("handshake");
    let (req, _respond) = ready(conn.accept()).expect("a request").expect("valid request");
    assert_eq!(req.method(), http::Method::POST);
    assert_eq!(req.uri().path_and_query().map(|p| p.as_str()), Some("/upload?x=1"));
    assert_eq!(req.uri().authority().map(|a| a.as_str()), Some("test.local"));
    assert_eq!(req.headers()["x-long"], long.as_str());
    let mut body = req.into_body();
    let chunk = ready(std::future::poll_fn(|cx| body.poll_data(cx))).expect("data").expect("data ok");
    assert_eq!(&chunk[..], b"hello");
    assert!(body.is_end_stream());

    // What the server wrote parses as frames: SETTINGS first, and the PING answered.
    let mut cx = Context::from_waker(Waker::noop());
    assert!(conn.poll_closed(&mut cx).is_pending());
    let written = output.borrow().clone();
    let mut r = &written[..];
    let (kind, flags, stream, _) = h2raw::read_frame(&mut r).expect("server SETTINGS");
    assert_eq!((kind, flags, stream), (h2raw::SETTINGS, 0, 0));
    let mut frames = Vec::new();
    while !r.is_empty() {
        frames.push(h2raw::read_frame(&mut r).expect("a whole frame"));
    }
    assert!(frames.contains(&(h2raw::PING, h2raw::FLAG_ACK, 0, vec![9; 8])), "{frames:?}");
    assert!(frames.contains(&(h2raw::SETTINGS, h2raw::FLAG_ACK, 0, vec![])), "{frames:?}");
}
