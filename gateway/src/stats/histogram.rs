//! A fixed-bucket latency histogram with a single writer.
//!
//! The owning worker records with relaxed loads and stores only (no read-modify-write), like
//! [`Counter`]; any thread may take a [`HistogramSnapshot`]. Buckets are stored as per-bucket
//! counts and made cumulative on read, so a snapshot is always a valid Prometheus histogram even
//! when the reader races the writer: the cumulative counts never decrease and `_count` is the
//! `+Inf` bucket by construction.

use std::time::Duration;

use super::Counter;

/// Number of buckets, the last one being `+Inf`.
pub const BUCKETS: usize = BOUNDS_NANOS.len() + 1;

/// Inclusive upper bounds of the finite buckets, in nanoseconds.
pub const BOUNDS_NANOS: [u64; 15] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
];

/// The same bounds in seconds (for exporters that take them as numbers).
pub const BOUNDS_SECONDS: [f64; 15] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// The `le` label of each bucket, in seconds, ending with `+Inf`.
pub const LE_LABELS: [&str; BUCKETS] = [
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30",
    "+Inf",
];

/// Latency histogram with the buckets of [`LE_LABELS`]. Only the owning worker may record.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts.
    buckets: [Counter; BUCKETS],
    sum_nanos: Counter,
}

/// A histogram read at one (approximate) moment: cumulative bucket counts and the sum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramSnapshot {
    /// Cumulative counts, one per entry of [`LE_LABELS`]; never decreasing.
    pub cumulative: [u64; BUCKETS],
    /// Sum of the recorded durations, in seconds.
    pub sum_seconds: f64,
}

impl Histogram {
    /// Records one observation: two relaxed load/store pairs, no lock, no read-modify-write.
    /// Durations beyond `u64::MAX` nanoseconds (584 years) count as that.
    #[inline]
    pub fn record(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(bucket) = self.buckets.get(bucket_index(nanos)) {
            bucket.inc();
        }
        self.sum_nanos.add(nanos);
    }

    /// The current cumulative counts and sum; any thread.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = [0u64; BUCKETS];
        let mut running = 0u64;
        for (out, bucket) in cumulative.iter_mut().zip(&self.buckets) {
            running = running.saturating_add(bucket.value());
            *out = running;
        }
        // Precision loss past 2^53 ns (104 days of summed latency) is irrelevant to a rate.
        HistogramSnapshot { cumulative, sum_seconds: self.sum_nanos.value() as f64 / 1e9 }
    }
}

impl HistogramSnapshot {
    /// Number of observations: the `+Inf` bucket, so it always agrees with the buckets.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

/// Index of the first bucket whose bound is `>= nanos` (`BUCKETS - 1` for `+Inf`), computed as
/// the number of bounds below `nanos`: fifteen compares and adds, no data-dependent branch.
#[inline]
fn bucket_index(nanos: u64) -> usize {
    BOUNDS_NANOS.iter().map(|&bound| usize::from(nanos > bound)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index_of(d: Duration) -> usize {
        let h = Histogram::default();
        h.record(d);
        let s = h.snapshot();
        s.cumulative.iter().position(|&c| c == 1).unwrap()
    }

    #[test]
    fn bounds_agree_with_labels_and_seconds() {
        for ((nanos, secs), label) in BOUNDS_NANOS.iter().zip(BOUNDS_SECONDS).zip(LE_LABELS) {
            assert_eq!(*nanos as f64 / 1e9, secs);
            assert_eq!(label.parse::<f64>().unwrap(), secs);
        }
        assert_eq!(LE_LABELS[BUCKETS - 1], "+Inf");
        assert!(BOUNDS_NANOS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn boundaries_are_inclusive() {
        assert_eq!(index_of(Duration::ZERO), 0);
        assert_eq!(index_of(Duration::from_nanos(500_000)), 0, "0.5 ms is le=0.0005");
        assert_eq!(index_of(Duration::from_nanos(500_001)), 1);
        assert_eq!(index_of(Duration::from_millis(1)), 1);
        assert_eq!(index_of(Duration::from_millis(100)), 7);
        assert_eq!(index_of(Duration::from_secs(1)), 10);
        assert_eq!(index_of(Duration::from_secs(30)), 14);
        assert_eq!(index_of(Duration::from_secs(30) + Duration::from_nanos(1)), 15, "+Inf");
        assert_eq!(index_of(Duration::MAX), 15);
        for (i, &bound) in BOUNDS_NANOS.iter().enumerate() {
            assert_eq!(index_of(Duration::from_nanos(bound)), i);
            assert_eq!(index_of(Duration::from_nanos(bound + 1)), i + 1);
        }
    }

    #[test]
    fn snapshot_is_cumulative_with_sum() {
        let h = Histogram::default();
        h.record(Duration::from_micros(100)); // le=0.0005
        h.record(Duration::from_millis(3)); // le=0.005
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(60)); // +Inf
        let s = h.snapshot();
        assert_eq!(s.cumulative, [1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4]);
        assert_eq!(s.count(), 4);
        assert!((s.sum_seconds - 60.0061).abs() < 1e-9, "{}", s.sum_seconds);
    }

    #[test]
    fn snapshots_stay_valid_while_a_writer_records() {
        let h = std::sync::Arc::new(Histogram::default());
        let writer = {
            let h = std::sync::Arc::clone(&h);
            std::thread::spawn(move || {
                for i in 0..200_000u64 {
                    h.record(Duration::from_micros(i % 40_000_000));
                }
            })
        };
        let mut last_count = 0;
        for _ in 0..2_000 {
            let s = h.snapshot();
            assert!(s.cumulative.windows(2).all(|w| w[0] <= w[1]), "{:?}", s.cumulative);
            assert!(s.count() >= last_count, "count went back: {} < {last_count}", s.count());
            last_count = s.count();
        }
        writer.join().unwrap();
        assert_eq!(h.snapshot().count(), 200_000);
    }

    proptest! {
        #[test]
        fn bucket_is_first_bound_at_or_above(nanos in any::<u64>()) {
            let expected = BOUNDS_NANOS.iter().position(|&b| nanos <= b).unwrap_or(BUCKETS - 1);
            prop_assert_eq!(bucket_index(nanos), expected);
        }

        #[test]
        fn count_and_sum_match_recorded(samples in proptest::collection::vec(0u64..60_000_000_000, 0..64)) {
            let h = Histogram::default();
            for &n in &samples {
                h.record(Duration::from_nanos(n));
            }
            let s = h.snapshot();
            prop_assert_eq!(s.count(), samples.len() as u64);
            let sum: u64 = samples.iter().sum();
            prop_assert!((s.sum_seconds - sum as f64 / 1e9).abs() < 1e-6);
            let below_1s = samples.iter().filter(|&&n| n <= 1_000_000_000).count() as u64;
            prop_assert_eq!(s.cumulative[10], below_1s);
        }
    }
}
