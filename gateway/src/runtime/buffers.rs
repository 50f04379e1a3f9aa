//! A worker-local pool of I/O buffers, in two sizes.
//!
//! Connections take a buffer only while they have bytes to hold and give it back when idle, so
//! an idle keep-alive connection costs no buffer memory and the hot path allocates nothing.
//! The free lists keep what the busiest moment needed, up to 1024 buffers of each size per
//! worker; what then stays unused for a whole trim window of the worker's tick (10 s) is
//! dropped, so a burst's buffers go back to the system 10 to 20 s after it.
//!
//! Most buffers (a client's request, a head being built, chunked framing) are [`BUF_SIZE`]. An
//! upstream's HTTP/1.1 response is read into a [`RESPONSE_BUF_SIZE`] one: it holds
//! [`HEAD_ROOM`], the upstream's head and 16 KiB of
//! body, so a response of that size arrives in one read and leaves in one write (with 16 KiB
//! buffers it took two of each: 12-14% less CPU per 16 KiB response on both drivers,
//! `loadtests/results/response-buffer-20261202.md`). Only an exchange in flight holds one, so
//! a connection that sends a slow request head (the buffer an attacker can make the gateway
//! hold) still holds a small one.

use std::cell::{Cell, RefCell};

/// Capacity of the ordinary pooled buffers.
pub const BUF_SIZE: usize = 16 * 1024;
/// Capacity of the buffers an upstream's HTTP/1.1 response is read into.
pub const RESPONSE_BUF_SIZE: usize = 32 * 1024;
/// Bytes left free at the front of a response buffer (before the upstream's head), so that the
/// rewritten response head can be placed right before the body bytes that arrived with it and
/// both go out in one write without copying the body (see `relay_response`).
pub const HEAD_ROOM: usize = 512;

/// A count of things a worker holds buffers for (receives submitted ahead of their data), with a
/// cap: [`Slots::take`] hands out a [`Slot`] while fewer than the cap are out, and a slot gives
/// itself back when dropped, however its holder ends.
#[derive(Default)]
pub struct Slots(std::rc::Rc<std::cell::Cell<usize>>);

/// One of [`Slots`], held until dropped.
pub struct Slot(std::rc::Rc<std::cell::Cell<usize>>);

impl Slots {
    /// A slot, unless `max` are out already.
    pub fn take(&self, max: usize) -> Option<Slot> {
        let n = self.0.get();
        if n >= max {
            return None;
        }
        self.0.set(n + 1);
        Some(Slot(std::rc::Rc::clone(&self.0)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

pub struct BufferPool {
    free: RefCell<Vec<Vec<u8>>>,
    free_response: RefCell<Vec<Vec<u8>>>,
    max_free: usize,
    /// The fewest unused buffers of each size seen by [`BufferPool::observe`] since the last
    /// [`BufferPool::trim`]: that many sat unused all along.
    low: Cell<(usize, usize)>,
}

impl BufferPool {
    /// A pool keeping at most `max_free` unused buffers of each size.
    pub fn new(max_free: usize) -> Self {
        Self {
            free: RefCell::new(Vec::new()),
            free_response: RefCell::new(Vec::new()),
            max_free,
            low: Cell::new((usize::MAX, usize::MAX)),
        }
    }

    /// Notes how many buffers of each size are unused now (the worker's tick, every 100 ms).
    pub fn observe(&self) {
        let (small, response) = self.free_counts();
        let (low_small, low_response) = self.low.get();
        self.low.set((low_small.min(small), low_response.min(response)));
    }

    /// Drops the buffers that stayed unused at every [`BufferPool::observe`] since the last
    /// trim (the coldest ones, at the bottom of each list), so that what a burst left behind
    /// goes back to the allocator once the burst is over; returns how many. The worker trims
    /// every 10 s: a list that a burst filled is emptied 10 to 20 s after it, and a list in use
    /// keeps what its busiest moments needed (a dip between two observations may cost a few
    /// allocations after a trim).
    pub fn trim(&self) -> usize {
        let (low_small, low_response) = self.low.get();
        let mut dropped = 0;
        for (free, low) in [(&self.free, low_small), (&self.free_response, low_response)] {
            let mut free = free.borrow_mut();
            let n = low.min(free.len());
            free.drain(..n);
            dropped += n;
        }
        let (small, response) = self.free_counts();
        self.low.set((small, response));
        dropped
    }

    /// An empty buffer with at least [`BUF_SIZE`] capacity.
    #[inline]
    pub fn take(&self) -> Vec<u8> {
        self.free.borrow_mut().pop().unwrap_or_else(|| Vec::with_capacity(BUF_SIZE))
    }

    /// An empty buffer with at least [`RESPONSE_BUF_SIZE`] capacity, for an upstream's response.
    #[inline]
    pub fn take_response(&self) -> Vec<u8> {
        self.free_response.borrow_mut().pop().unwrap_or_else(|| Vec::with_capacity(RESPONSE_BUF_SIZE))
    }

    /// Returns a buffer [`BufferPool::take`] lent. One that grew beyond [`BUF_SIZE`] is dropped,
    /// whatever size it reached: chunked framing fills a 16 KiB buffer with up to 32 KiB read at
    /// once, and such a buffer, taken back as a response buffer by its size as it was until
    /// 5 December, joined that list while the response buffer it stood in for came back too: one
    /// more idle 32 KiB buffer per such exchange, until `max_free` (32 MiB per worker; the soak of
    /// `loadtests/results/soak-20261205.md`).
    #[inline]
    pub fn give(&self, buf: Vec<u8>) {
        Self::keep(&self.free, buf, BUF_SIZE, self.max_free);
    }

    /// Returns a buffer [`BufferPool::take_response`] lent; one that grew is dropped.
    #[inline]
    pub fn give_response(&self, buf: Vec<u8>) {
        Self::keep(&self.free_response, buf, RESPONSE_BUF_SIZE, self.max_free);
    }

    #[inline]
    fn keep(free: &RefCell<Vec<Vec<u8>>>, mut buf: Vec<u8>, size: usize, max_free: usize) {
        if buf.capacity() != size {
            return;
        }
        let mut free = free.borrow_mut();
        if free.len() < max_free {
            buf.clear();
            free.push(buf);
        }
    }

    /// Unused buffers kept: ordinary ones, and response ones.
    pub fn free_counts(&self) -> (usize, usize) {
        (self.free.borrow().len(), self.free_response.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_cleared_and_bounded() {
        let pool = BufferPool::new(1);
        let mut a = pool.take();
        a.extend_from_slice(b"abc");
        let ptr = a.as_ptr();
        pool.give(a);
        pool.give(Vec::with_capacity(BUF_SIZE));
        let b = pool.take();
        assert_eq!(b.as_ptr(), ptr);
        assert!(b.is_empty());
        let mut big = Vec::with_capacity(BUF_SIZE * 4);
        big.push(1);
        pool.give(big);
        assert!(pool.take().capacity() == BUF_SIZE);
    }

    #[test]
    fn a_buffer_that_grew_into_the_other_size_is_not_kept_as_one() {
        // As the HTTP/1.1 relay of a chunked answer does: a 16 KiB write buffer and the 32 KiB
        // response buffer out together; chunked framing grows the write buffer to 32 KiB.
        let pool = BufferPool::new(1024);
        for _ in 0..1000 {
            let mut wbuf = pool.take();
            let ubuf = pool.take_response();
            wbuf.extend_from_slice(&[b'x'; BUF_SIZE + 1]);
            assert_eq!(wbuf.capacity(), RESPONSE_BUF_SIZE);
            pool.give_response(ubuf);
            pool.give(wbuf);
        }
        // Never more kept than were out at once (it was (0, 1000) when sizes told lists apart).
        assert_eq!(pool.free_counts(), (0, 1));
        // And the other way round: a response buffer given as an ordinary one is not kept.
        pool.give(pool.take_response());
        assert_eq!(pool.free_counts(), (0, 0));
    }

    #[test]
    fn buffers_unused_since_the_last_trim_are_dropped_by_the_next() {
        let pool = BufferPool::new(1024);
        // A burst: 100 buffers of each size out at once, then all back.
        let small: Vec<_> = (0..100).map(|_| pool.take()).collect();
        let large: Vec<_> = (0..100).map(|_| pool.take_response()).collect();
        pool.observe(); // during the burst: none unused
        small.into_iter().for_each(|b| pool.give(b));
        large.into_iter().for_each(|b| pool.give_response(b));
        pool.observe();
        // The burst's window: every buffer was in use at some observation, none is dropped.
        assert_eq!(pool.trim(), 0);
        assert_eq!(pool.free_counts(), (100, 100));
        // Steady traffic needing 3 ordinary buffers at once, observed between exchanges.
        let mut in_use = Vec::new();
        for _ in 0..10 {
            let out: Vec<_> = (0..3).map(|_| pool.take()).collect();
            pool.observe();
            in_use = out.iter().map(|b| b.as_ptr()).collect();
            out.into_iter().for_each(|b| pool.give(b));
            pool.observe();
        }
        // What stayed unused all window goes; what the traffic needed stays, and it is the
        // buffers the traffic used (the top of the list), not the cold ones.
        assert_eq!(pool.trim(), 97 + 100);
        assert_eq!(pool.free_counts(), (3, 0));
        let mut kept: Vec<_> = (0..3).map(|_| pool.take()).collect();
        let mut kept_ptrs: Vec<_> = kept.iter().map(|b| b.as_ptr()).collect();
        kept_ptrs.sort();
        in_use.sort();
        assert_eq!(kept_ptrs, in_use);
        kept.drain(..).for_each(|b| pool.give(b));
        // A window with no traffic at all: everything goes.
        pool.observe();
        assert_eq!(pool.trim(), 3);
        assert_eq!(pool.free_counts(), (0, 0));
    }

    #[test]
    fn slots_are_capped_and_come_back_when_dropped() {
        let slots = Slots::default();
        let a = slots.take(2).unwrap();
        let b = slots.take(2).unwrap();
        assert!(slots.take(2).is_none());
        drop(a);
        let c = slots.take(2).unwrap();
        drop((b, c));
        assert!(slots.take(0).is_none());
        assert_eq!([slots.take(2).is_some(), slots.take(2).is_some()], [true, true]);
    }

    #[test]
    fn each_size_goes_back_to_its_own_list() {
        let pool = BufferPool::new(1);
        let mut r = pool.take_response();
        assert_eq!(r.capacity(), RESPONSE_BUF_SIZE);
        r.extend_from_slice(b"head");
        let ptr = r.as_ptr();
        pool.give_response(r);
        // An ordinary take does not hand out the response buffer, nor the reverse.
        let small = pool.take();
        assert_eq!(small.capacity(), BUF_SIZE);
        assert_ne!(small.as_ptr(), ptr);
        pool.give(small);
        let r = pool.take_response();
        assert_eq!(r.as_ptr(), ptr);
        assert!(r.is_empty());
        assert_eq!(pool.take().capacity(), BUF_SIZE);
    }
}
