//! Zero-window stall detection for one downstream HTTP/2 connection: a client that leaves
//! responses waiting for flow-control window and never opens any would otherwise hold every such
//! stream's upstream connection, buffers and cluster slot until the body I/O timeout.
//!
//! The connection's streams report their waits for send capacity to a shared
//! [`FlowWatch`](crate::codec::h2io::FlowWatch); the connection task samples it on its
//! existing tick and feeds [`Stall`]: no timer, clock read or allocation per stream.

use std::time::{Duration, Instant};

/// Decides, from periodic samples, whether a connection is stalled: some stream has been
/// waiting for window for `limit` and no waiting stream was granted any in that time.
///
/// A slow reader that still opens window (or drains what was buffered) grants capacity now and
/// then, which restarts the clock; it is never stalled however slow it is. A stream that is
/// starved while another stream of the same connection makes progress is left to the body I/O
/// timeout.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    limit: Duration,
    /// Since when streams have been waiting without a grant, and the grant counter then.
    since: Option<(Instant, u32)>,
}

impl Stall {
    pub fn new(limit: Duration) -> Self {
        Self { limit, since: None }
    }

    /// Takes a sample (`waiting` streams now, `granted` the wrapping grant counter) at `now`;
    /// true once the connection has been stalled for the limit.
    pub fn check(&mut self, waiting: u32, granted: u32, now: Instant) -> bool {
        if waiting == 0 {
            self.since = None;
            return false;
        }
        match self.since {
            Some((since, seen)) if seen == granted => now.saturating_duration_since(since) >= self.limit,
            _ => {
                self.since = Some((now, granted));
                false
            }
        }
    }

    /// How often [`Stall::check`] should be called: a few times per limit, at most every 500 ms
    /// (the connection's tick for its idle timeout).
    pub fn tick(&self) -> Duration {
        (self.limit / 4).clamp(Duration::from_millis(25), Duration::from_millis(500))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(5);

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn waiting_without_grants_for_the_limit_is_a_stall() {
        let t0 = Instant::now();
        let mut s = Stall::new(LIMIT);
        assert!(!s.check(3, 7, t0));
        assert!(!s.check(3, 7, at(t0, 4_999)));
        assert!(s.check(3, 7, at(t0, 5_000)));
    }

    #[test]
    fn any_grant_restarts_the_clock() {
        let t0 = Instant::now();
        let mut s = Stall::new(LIMIT);
        assert!(!s.check(1, 0, t0));
        assert!(!s.check(1, 1, at(t0, 4_000)));
        assert!(!s.check(1, 1, at(t0, 8_999)));
        assert!(s.check(1, 1, at(t0, 9_000)));
    }

    #[test]
    fn nothing_waiting_is_never_a_stall() {
        let t0 = Instant::now();
        let mut s = Stall::new(LIMIT);
        assert!(!s.check(2, 0, t0));
        assert!(!s.check(0, 0, at(t0, 4_000)));
        // The wait that starts again is measured from when it was first seen.
        assert!(!s.check(2, 0, at(t0, 6_000)));
        assert!(!s.check(2, 0, at(t0, 10_999)));
        assert!(s.check(2, 0, at(t0, 11_000)));
        for ms in [0, 60_000, 600_000] {
            assert!(!s.check(0, 0, at(t0, ms)));
        }
    }

    #[test]
    fn a_slow_but_live_reader_is_never_stalled() {
        let t0 = Instant::now();
        let mut s = Stall::new(LIMIT);
        // One grant every 4.5 s, sampled every 500 ms, for ten minutes.
        let mut granted = u32::MAX - 3;
        for step in 0..1200u64 {
            let ms = step * 500;
            if step % 9 == 0 {
                granted = granted.wrapping_add(1);
            }
            assert!(!s.check(1, granted, at(t0, ms)), "stalled at {ms} ms");
        }
    }

    #[test]
    fn the_tick_samples_a_few_times_per_limit() {
        assert_eq!(Stall::new(LIMIT).tick(), Duration::from_millis(500));
        assert_eq!(Stall::new(Duration::from_millis(400)).tick(), Duration::from_millis(100));
        assert_eq!(Stall::new(Duration::from_millis(100)).tick(), Duration::from_millis(25));
    }
}
