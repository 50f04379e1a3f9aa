//! A worker-local pool of I/O buffers.
//!
//! Connections take a buffer only while they have bytes to hold and give it back when idle, so
//! an idle keep-alive connection costs no buffer memory and the hot path allocates nothing.

use std::cell::RefCell;

/// Capacity of every pooled buffer.
pub const BUF_SIZE: usize = 16 * 1024;

pub struct BufferPool {
    free: RefCell<Vec<Vec<u8>>>,
    max_free: usize,
}

impl BufferPool {
    pub fn new(max_free: usize) -> Self {
        Self { free: RefCell::new(Vec::new()), max_free }
    }

    /// An empty buffer with at least [`BUF_SIZE`] capacity.
    #[inline]
    pub fn take(&self) -> Vec<u8> {
        self.free.borrow_mut().pop().unwrap_or_else(|| Vec::with_capacity(BUF_SIZE))
    }

    /// Returns a buffer; buffers that grew beyond the standard size are dropped.
    #[inline]
    pub fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() != BUF_SIZE {
            return;
        }
        let mut free = self.free.borrow_mut();
        if free.len() < self.max_free {
            buf.clear();
            free.push(buf);
        }
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
        pool.give(pool_take_fresh());
        let b = pool.take();
        assert_eq!(b.as_ptr(), ptr);
        assert!(b.is_empty());
        let mut big = Vec::with_capacity(BUF_SIZE * 4);
        big.push(1);
        pool.give(big);
        assert!(pool.take().capacity() == BUF_SIZE);
    }

    fn pool_take_fresh() -> Vec<u8> {
        Vec::with_capacity(BUF_SIZE)
    }
}
