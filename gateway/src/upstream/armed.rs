//! On io_uring, an idle plain-TCP upstream connection waits in its pool with the receive of its
//! next response already submitted (an *armed* receive, into the response buffer it will be
//! read into).
//!
//! What it replaces: before reusing an idle connection the gateway must know that nothing came
//! on it while it waited (bytes there are an answer nobody asked for, which the next request
//! would read as its own) and that the upstream did not close it. nginx and HAProxy learn both
//! from the read event their idle upstream connections keep registered in epoll. On io_uring
//! the gateway had no such wait to piggyback on and made one `recv(MSG_PEEK)` system call per
//! reuse, 4-5% of its CPU for h2c (`loadtests/results/where-cpu-goes-20261204.md`); a poll
//! armed on each parked connection and cancelled when it was taken cost more (8%).
//!
//! The armed receive is the ring's counterpart of the registered read event, with no cancel:
//! - while the connection is idle, anything that arrives (bytes, end of stream, an error)
//!   completes the receive, and taking the connection finds it completed: the connection is
//!   dropped, as the peek did;
//! - when the connection is taken and the receive has not completed, the request is sent and
//!   the same receive completes with the response: no receive is submitted after the send, and
//!   no system call is made.
//!
//! What is seen at take time is the ring's completions as of the worker's last turn of its
//! event loop, as nginx and HAProxy see their read events as of their last `epoll_wait`.
//!
//! Each armed receive holds a response buffer ([`RESPONSE_BUF_SIZE`]) while its connection is
//! idle, so at most [`MAX_ARMED`] connections per worker are armed at once (16 MiB), and only
//! while the worker has at most [`ARM_UP_TO_OPEN`] connections open to the cluster (over more,
//! arming costs more than it saves); the others are peeked at when taken, as before. The epoll
//! driver keeps its receive through the driver (`pool::still_idle`): there the check costs no
//! extra system call.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use monoio::buf::SliceMut;
use monoio::io::AsyncReadRent;
use monoio::net::TcpStream;

use crate::runtime::buffers::{BufferPool, Slot, Slots, HEAD_ROOM, RESPONSE_BUF_SIZE};

/// The most connections of one worker armed at once (each holds a [`RESPONSE_BUF_SIZE`]
/// buffer while idle: 16 MiB).
pub const MAX_ARMED: usize = 512;

/// A connection is armed only while its worker has at most this many connections open to the
/// cluster (idle and busy). The armed receive pays where a worker cycles through few upstream
/// connections: its operation, its buffer and the socket are still in cache when the response
/// completes it (small HTTP/1.1 requests over 64 connections: 2.4% less CPU than with a peek
/// per reuse). Over hundreds of connections they are not, and the completion costs more than
/// the peek it saves (h2c, 16 x 32 streams, up to 512 upstream connections: 10% less CPU with
/// the peek; per request, monoio's receive and the kernel's receive and copy into the cold
/// buffer went from 0.4 µs at 64 connections to 1.3 µs at 512).
/// `loadtests/results/h2c-gap-20261204.md`.
pub const ARM_UP_TO_OPEN: usize = 128;

type Read = Pin<Box<dyn Future<Output = monoio::BufResult<usize, SliceMut<Vec<u8>>>>>>;

/// A receive submitted on an idle connection, into a response buffer after [`HEAD_ROOM`]
/// bytes (where the response head is read, as `read_response_head_pooled` reads it).
pub struct ArmedRead {
    read: Read,
    /// One of the worker's armed slots, given back when this ends (however it ends). A receive
    /// still in flight is cancelled by monoio when `read` drops, and its buffer freed when the
    /// cancellation completes.
    _slot: Slot,
}

impl ArmedRead {
    /// Submits the next response's receive on `tcp`, unless the worker has [`MAX_ARMED`]
    /// connections armed already (then `None`: the connection is checked when taken).
    pub fn arm(tcp: &mut TcpStream, buffers: &BufferPool, armed: &Slots) -> Option<Self> {
        let slot = armed.take(MAX_ARMED)?;
        let mut buf = buffers.take_response();
        buf.resize(HEAD_ROOM, 0);
        let read = tcp.read(SliceMut::new(buf, HEAD_ROOM, RESPONSE_BUF_SIZE));
        let read: Pin<Box<dyn Future<Output = _> + '_>> = Box::pin(read);
        // SAFETY: only the lifetime changes. The future `TcpStream::read` returns borrows the
        // stream in its type alone: monoio (pinned at =0.2.4 in the workspace's Cargo.toml for
        // this reason) submits the receive when `read` is called, with its own reference-counted
        // handle of the socket (`Op::recv(self.fd.clone(), buf)`), and the future owns only
        // that operation and the buffer. So it stays valid after the borrow ends, whatever
        // becomes of the `TcpStream` (the socket closes when the last handle goes), and the
        // stream may be written meanwhile (a send beside a receive is ordinary io_uring use).
        let read: Read = unsafe { std::mem::transmute::<Pin<Box<dyn Future<Output = _> + '_>>, Read>(read) };
        Some(Self { read, _slot: slot })
    }

    /// What the receive brought if it completed while the connection was idle (it looks once,
    /// without waiting).
    pub fn completed(&mut self) -> Option<(io::Result<usize>, Vec<u8>)> {
        let mut cx = Context::from_waker(Waker::noop());
        match self.read.as_mut().poll(&mut cx) {
            Poll::Ready((res, slice)) => Some((res, slice.into_inner())),
            Poll::Pending => None,
        }
    }

    /// Waits for the receive: the buffer holds [`HEAD_ROOM`] bytes, then what was received.
    pub async fn received(mut self) -> (io::Result<usize>, Vec<u8>) {
        let (res, slice) = (&mut self.read).await;
        (res, slice.into_inner())
    }
}
