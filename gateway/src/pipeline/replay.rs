//! An HTTP/2 client's request body kept in memory while it streams to an upstream (of either
//! protocol), so that the next try can send it again when this one fails before its response
//! (Envoy buffers retried bodies the same way). It matters most for an HTTP/2 upstream that
//! refuses the stream (RFC 9113 §8.7, or a GOAWAY that leaves it unprocessed, as during the
//! upstream's restart): the request is safe to send again whatever its method, but a body that
//! was still arriving when the try began has already been taken from the client. (An HTTP/1.1
//! client's body is held whole before the first try instead: `Downstream::hold_body`.)
//!
//! The copy costs no byte copies (the chunks are reference-counted) and is bounded by the
//! route's `retry.max_replay_bytes`: a body that outgrows it is not kept, and the request is
//! then retried only where nothing was sent, as before.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::task::{Poll, Waker};

use bytes::Bytes;
use gateway_h2::server::RequestHead;

/// The body a failed try sent, in memory: the next try sends it first and goes on with what the
/// client still sends.
#[derive(Debug, Default)]
pub struct Replay {
    /// The chunks, in order.
    pub chunks: Vec<Bytes>,
    /// Their bytes.
    pub bytes: u64,
    /// The client's body had ended: the chunks are all of it, and `trailers` its trailers.
    pub complete: bool,
    pub trailers: Option<RequestHead>,
}

impl Replay {
    /// Nothing to send: an empty body that had ended, without trailers.
    pub fn is_empty(&self) -> bool {
        self.complete && self.bytes == 0 && self.trailers.is_none()
    }
}

/// The copy a pump keeps of what it sends, within `limit` bytes (dropped beyond them).
pub struct Keep {
    copy: Option<Replay>,
    limit: u64,
}

impl Keep {
    /// Keeps up to `limit` bytes (0: nothing, no retry would use them).
    pub fn new(limit: u64) -> Self {
        Self { copy: (limit > 0).then(Replay::default), limit }
    }

    /// What an earlier try sent, all of it, before this try sends any (so that a failure part
    /// way keeps the rest too).
    pub fn keep_all(&mut self, earlier: &Replay) {
        for chunk in &earlier.chunks {
            self.push(chunk);
        }
        if earlier.complete {
            self.end(earlier.trailers.as_ref());
        }
    }

    /// One more chunk, about to be sent.
    pub fn push(&mut self, chunk: &Bytes) {
        if let Some(c) = &mut self.copy {
            let bytes = c.bytes + chunk.len() as u64;
            if bytes > self.limit {
                self.copy = None;
            } else {
                c.chunks.push(chunk.clone());
                c.bytes = bytes;
            }
        }
    }

    /// The body ended, with these trailers.
    pub fn end(&mut self, trailers: Option<&RequestHead>) {
        if let Some(c) = &mut self.copy {
            c.complete = true;
            c.trailers = trailers.cloned();
        }
    }

    /// Keeps nothing more, and drops what it kept (no retry can need it).
    pub fn drop_copy(&mut self) {
        self.copy = None;
    }

    /// What was kept: all that was sent, or `None` when it outgrew the limit (boxed: it waits
    /// in the request's state, which every request carries).
    pub fn into_replay(self) -> Option<Box<Replay>> {
        self.copy.map(Box::new)
    }
}

/// How a pump ended: the body bytes it took from the client (the others were a replay), and
/// all it sent when kept.
#[derive(Debug, Default)]
pub struct PumpEnd {
    pub taken: u64,
    pub replay: Option<Box<Replay>>,
}

/// What the try that started a pump tells it: to stop (the try failed before its response; it
/// resets its upstream stream and ends with what it kept), or that the response came (so that
/// nothing need be kept any longer).
#[derive(Default)]
pub struct Signal {
    stopped: Cell<bool>,
    answered: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

impl Signal {
    pub fn answered(&self) {
        self.answered.set(true);
    }

    /// Whether the response came.
    pub fn is_answered(&self) -> bool {
        self.answered.get()
    }

    pub fn stop(&self) {
        self.stopped.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// `f`'s output, or `None` once stopped (before or while it waits).
    pub async fn or<F: Future>(&self, f: F) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        poll_fn(|cx| {
            if self.stopped.get() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            self.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_chunks_until_the_limit_and_then_nothing() {
        let mut k = Keep::new(5);
        k.push(&Bytes::from_static(b"ab"));
        k.push(&Bytes::from_static(b"cde"));
        k.end(None);
        let r = k.into_replay().unwrap();
        assert_eq!((r.bytes, r.chunks.len(), r.complete), (5, 2, true));
        let mut k = Keep::new(5);
        k.push(&Bytes::from_static(b"abc"));
        k.push(&Bytes::from_static(b"def"));
        k.push(&Bytes::from_static(b"g"));
        assert!(k.into_replay().is_none(), "a body over the limit is not kept, even in part");
        assert!(Keep::new(0).into_replay().is_none());
        let mut k = Keep::new(1);
        k.end(None);
        assert!(k.into_replay().unwrap().is_empty());
    }

    #[test]
    fn a_stop_ends_the_wait_it_interrupts_and_every_later_one() {
        let stop = std::rc::Rc::new(Signal::default());
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(async {
            assert_eq!(stop.or(async { 1 }).await, Some(1));
            let s = std::rc::Rc::clone(&stop);
            monoio::spawn(async move {
                monoio::time::sleep(std::time::Duration::from_millis(5)).await;
                s.stop();
            });
            assert_eq!(stop.or(std::future::pending::<()>()).await, None);
            assert_eq!(stop.or(async { 1 }).await, None);
        });
    }
}
