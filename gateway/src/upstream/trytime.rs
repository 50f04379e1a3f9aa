//! The adaptive per-try timeout: how long a try may wait for its response head before it is
//! abandoned for a retry on another endpoint, when the route sets no `per_try_timeout` and
//! retries a timed-out try (`reset` in `retry_on`, the default).
//!
//! A cut is made only when another endpoint of the cluster is eligible (a retry on the same
//! endpoint would meet the same hang), for an idempotent request whose body is absent or held.
//!
//! Per cluster and worker, the gateway keeps a decaying peak of the time to a response head
//! (any status): a slower sample is taken at once, each later one pulls the peak down by
//! 1/64 of itself, so the peak follows the slow tail of the last few hundred responses (about
//! their p99) and never lags a slowdown. A try that could still be retried is cut at
//!
//! ```text
//! clamp(ADAPTIVE_TRY_FACTOR x peak, ADAPTIVE_TRY_FLOOR, route timeout / ADAPTIVE_TRY_CAP_DIVISOR)
//! ```
//!
//! with three exceptions that keep a slow but working cluster working:
//! - factor x peak above the cap: the cluster is slow rather than one endpoint hanging; tries
//!   are not cut (they share the route timeout, as without retries on timeouts);
//! - fewer than `ADAPTIVE_TRY_WARMUP` responses seen (a new worker, cluster or reload): the
//!   cap, so an endpoint that hangs from the start costs at most half the route timeout;
//! - a request whose cut try was followed by a 504 (no try answered in time) teaches the
//!   estimate that the cut was too short: its length is taken as a sample and the warm-up
//!   ends, so the next cut is `factor` times longer, or none once above the cap. A cluster
//!   whose answers take more than half the route timeout thus loses one request per worker
//!   (a 504) after a start before its tries stop being cut.
//!
//! The last try a request may make is never cut: it has what remains of the route timeout, so
//! the tries always fit it (what `gateway check` shows as "adaptive").

use std::cell::Cell;
use std::time::Duration;

use gateway_config::defaults::{ADAPTIVE_TRY_FACTOR, ADAPTIVE_TRY_FLOOR, ADAPTIVE_TRY_WARMUP};
use gateway_config::RetryPolicy;

/// One cluster's observed time to a response head on one worker.
#[derive(Debug, Default)]
pub struct HeadLatency {
    /// The decaying peak, in microseconds.
    peak_us: Cell<u64>,
    /// Samples taken, saturating (only compared with the warm-up count).
    samples: Cell<u32>,
}

impl HeadLatency {
    /// Takes the time from a try's start to its response head (or to a cut that proved too
    /// short).
    pub fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let peak = self.peak_us.get();
        self.peak_us.set(us.max(peak - peak / 64));
        self.samples.set(self.samples.get().saturating_add(1));
    }

    /// Learns that a cut of length `cut` was too short (the tries after it ran out too): the
    /// cut becomes a sample and the warm-up ends, so the next cut is `factor` times longer, or
    /// none once that exceeds the cap.
    pub fn cut_too_short(&self, cut: Duration) {
        self.observe(cut);
        self.samples.set(self.samples.get().max(ADAPTIVE_TRY_WARMUP));
    }

    /// The timeout of a try that a timeout would retry, on a route with `route_timeout`;
    /// `None`: not cut (the cluster is slow: the try shares the route timeout).
    pub fn per_try(&self, route_timeout: Duration) -> Option<Duration> {
        let cap = RetryPolicy::adaptive_cap(route_timeout);
        if self.samples.get() < ADAPTIVE_TRY_WARMUP {
            return Some(cap);
        }
        let wanted = Duration::from_micros(self.peak_us.get()).saturating_mul(ADAPTIVE_TRY_FACTOR);
        (wanted <= cap).then(|| wanted.max(ADAPTIVE_TRY_FLOOR).min(cap))
    }

    /// The current peak (for tests and the admin view).
    pub fn peak(&self) -> Duration {
        Duration::from_micros(self.peak_us.get())
    }

    /// Takes over `old`'s estimate (the same cluster rebuilt by a reload).
    pub fn take_over(&self, old: &HeadLatency) {
        self.peak_us.set(old.peak_us.get());
        self.samples.set(old.samples.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: Duration = Duration::from_secs(2);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn warm_up_then_the_floor_for_a_fast_cluster() {
        let h = HeadLatency::default();
        assert_eq!(h.per_try(ROUTE), Some(ms(1000)), "no samples: half the route timeout");
        for _ in 0..ADAPTIVE_TRY_WARMUP - 1 {
            h.observe(Duration::from_micros(300));
        }
        assert_eq!(h.per_try(ROUTE), Some(ms(1000)), "still warming up");
        h.observe(Duration::from_micros(300));
        assert_eq!(h.per_try(ROUTE), Some(ADAPTIVE_TRY_FLOOR), "4 x 0.3ms is below the floor");
    }

    #[test]
    fn the_peak_is_taken_at_once_and_decays_slowly() {
        let h = HeadLatency::default();
        for _ in 0..20 {
            h.observe(ms(1));
        }
        h.observe(ms(100));
        assert_eq!(h.per_try(ROUTE), Some(ms(400)));
        for _ in 0..64 {
            h.observe(ms(1));
        }
        // (63/64)^64 of 100ms is about 36.5ms: still well above the fast samples.
        let peak = h.peak();
        assert!(peak > ms(30) && peak < ms(40), "{peak:?}");
        for _ in 0..1000 {
            h.observe(ms(1));
        }
        assert_eq!(h.peak(), ms(1), "back to the fast samples");
    }

    #[test]
    fn a_slow_cluster_is_not_cut_and_a_cut_that_failed_lengthens_the_next() {
        let h = HeadLatency::default();
        for _ in 0..10 {
            h.observe(ms(300));
        }
        assert_eq!(h.per_try(ROUTE), None, "4 x 300ms is above half of 2s: not cut");
        let h = HeadLatency::default();
        for _ in 0..10 {
            h.observe(ms(50));
        }
        assert_eq!(h.per_try(ROUTE), Some(ms(250)));
        // A request whose cut try at 250ms ended in a 504 teaches it: 4 x 250ms = 1s, the cap.
        h.cut_too_short(ms(250));
        assert_eq!(h.per_try(ROUTE), Some(ms(1000)));
        h.cut_too_short(ms(1000));
        assert_eq!(h.per_try(ROUTE), None);
        // During the warm-up, one cut that proved too short ends it.
        let h = HeadLatency::default();
        h.cut_too_short(ms(1000));
        assert_eq!(h.per_try(ROUTE), None);
    }
}
