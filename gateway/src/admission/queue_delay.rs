//! The queue-delay signal of one wait queue (CoDel's standing-queue test): a queue that
//! absorbs a burst drains, so some request soon passes with a short wait; a queue that stands
//! (demand above what the upstream serves) keeps every wait long. The signal is the shortest
//! wait of a whole interval when it stayed above the target, and zero as soon as one request
//! passes within the target (CoDel leaves its dropping state the same way). A request admitted
//! without waiting passes with a zero wait.
//!
//! Pure arithmetic on explicit instants, per worker; unit-tested.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct QueueDelay {
    target: Duration,
    interval: Duration,
    /// End of the current interval and the shortest wait seen in it.
    interval_end: Option<Instant>,
    min: Duration,
    /// The signal: zero, or the shortest wait of the last whole interval (above the target).
    standing: Duration,
}

impl QueueDelay {
    pub fn new(target: Duration, interval: Duration) -> Self {
        Self { target, interval, interval_end: None, min: Duration::MAX, standing: Duration::ZERO }
    }

    /// A request left the queue (admitted, or gave up) after waiting `waited`.
    pub fn observe(&mut self, waited: Duration, now: Instant) {
        if waited <= self.target {
            self.drained();
            return;
        }
        match self.interval_end {
            None => {
                self.interval_end = Some(now + self.interval);
                self.min = waited;
            }
            Some(end) if now >= end => {
                // A whole interval without a wait within the target: the queue stands.
                self.standing = self.min.min(waited);
                self.interval_end = Some(now + self.interval);
                self.min = waited;
            }
            Some(_) => self.min = self.min.min(waited),
        }
    }

    /// A request passed within the target (or without waiting): the queue drains, no standing
    /// queue, and a new interval starts with the next long wait.
    pub fn drained(&mut self) {
        self.standing = Duration::ZERO;
        self.interval_end = None;
        self.min = Duration::MAX;
    }

    /// The standing queue delay now: zero when the queue drained, or when nothing passed for
    /// two intervals (no evidence left).
    pub fn signal(&self, now: Instant) -> Duration {
        match self.interval_end {
            Some(end) if now < end + self.interval => self.standing,
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_that_drains_is_no_signal_and_a_standing_queue_is() {
        let t0 = Instant::now();
        let mut q = QueueDelay::new(5 * MS, 100 * MS);
        // A burst: long waits for 60 ms, then one passes quickly.
        for i in 0..6 {
            q.observe(20 * MS, t0 + i * 10 * MS);
        }
        q.observe(MS, t0 + 60 * MS);
        assert_eq!(q.signal(t0 + 61 * MS), Duration::ZERO);
        // Standing: every wait above 8 ms for longer than an interval.
        for i in 0..25 {
            q.observe((8 + i % 3) * MS, t0 + (100 + i * 10) * MS);
        }
        assert_eq!(q.signal(t0 + 345 * MS), 8 * MS, "the shortest wait of the interval");
        // It ends with the first quick pass...
        q.observe(2 * MS, t0 + 350 * MS);
        assert_eq!(q.signal(t0 + 351 * MS), Duration::ZERO);
    }

    #[test]
    fn the_signal_goes_stale_without_traffic() {
        let t0 = Instant::now();
        let mut q = QueueDelay::new(5 * MS, 100 * MS);
        for i in 0..30 {
            q.observe(30 * MS, t0 + i * 10 * MS);
        }
        assert_eq!(q.signal(t0 + 300 * MS), 30 * MS);
        assert_eq!(q.signal(t0 + 600 * MS), Duration::ZERO, "two intervals without a request");
    }
}
