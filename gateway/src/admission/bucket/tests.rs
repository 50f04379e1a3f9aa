//! Tests of the GCRA core, `LocalBucket`, `Rate`, `split_for_workers` and `key_hash`, and the
//! window-bound checker shared with the `SharedBucket` and `KeyedBuckets` tests.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

const MS: u64 = 1_000_000;

/// When a decision lets its request through: now, at the end of its wait, or never.
pub(super) fn admitted_at(now: Nanos, decision: Decision) -> Option<Nanos> {
    match decision {
        Decision::Admit => Some(now),
        Decision::Wait(d) => Some(now + d.as_nanos() as u64),
        Decision::Reject { .. } => None,
    }
}

/// Asserts the token-bucket bound over every window of sorted admission times: the `n` admissions
/// in any `[a, b]` satisfy `n <= burst + (b - a) / T` with the enforced interval `T`, and so
/// `n <= burst + rate x (b - a) + 1` with the configured rate.
///
/// Checked in O(n) by replaying the times through a virtual schedule: after the k-th admission
/// `tat = max over i <= k of (t_i + (k - i + 1) T)`, so `tat - t_k <= burst x T` for every `k`
/// says exactly `(k - i + 1 - burst) T <= t_k - t_i` for every window `[t_i, t_k]`. Short inputs
/// are also checked pair by pair, directly.
pub(super) fn assert_window_bound(times: &[Nanos], rate: Rate) {
    let Gcra { interval, capacity } = Gcra::new(rate);
    let burst = capacity / interval;
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "admission times must be sorted");
    let mut tat = 0u64;
    for (k, &t) in times.iter().enumerate() {
        tat = tat.max(t).saturating_add(interval);
        assert!(tat - t <= capacity, "admission {k} at {t} ns exceeds burst + elapsed / T for {rate:?}");
    }
    if let (Some(&first), Some(&last)) = (times.first(), times.last()) {
        let configured = burst as f64 + rate.per_second * (last - first) as f64 / 1e9 + 1.0;
        assert!(times.len() as f64 <= configured, "{} admitted in {} ns: {rate:?}", times.len(), last - first);
    }
    if times.len() > 400 {
        return;
    }
    for (i, &start) in times.iter().enumerate() {
        for (offset, &end) in times[i..].iter().enumerate() {
            let count = offset as u64 + 1;
            assert!(count <= burst + (end - start) / interval, "{count} admitted in [{start}, {end}] ns: {rate:?}");
        }
    }
}

fn rate(per_second: f64, burst: u32) -> Rate {
    Rate::new(per_second, burst).unwrap()
}

#[test]
fn full_burst_at_once_then_one_per_interval() {
    let mut b = LocalBucket::new(rate(10.0, 5));
    assert_eq!(b.remaining(0), 5);
    assert_eq!(b.reset_after(0), Duration::ZERO);
    for left in (0..5).rev() {
        assert_eq!(b.acquire(0, Duration::ZERO), Decision::Admit);
        assert_eq!(b.remaining(0), left);
    }
    assert_eq!(b.reset_after(0), Duration::from_millis(500));
    assert_eq!(b.acquire(0, Duration::ZERO), Decision::Reject { retry_after: Duration::from_millis(100) });
    assert_eq!(b.acquire(40 * MS, Duration::ZERO), Decision::Reject { retry_after: Duration::from_millis(60) });
    // One token per 100 ms from then on, and not a nanosecond earlier.
    for k in 1..=20u64 {
        let due = k * 100 * MS;
        assert_eq!(b.acquire(due - 1, Duration::ZERO), Decision::Reject { retry_after: Duration::from_nanos(1) });
        assert_eq!(b.acquire(due, Duration::ZERO), Decision::Admit, "token {k}");
        assert_eq!(b.remaining(due), 0);
        assert_eq!(b.reset_after(due), Duration::from_millis(500));
    }
}

#[test]
fn refills_to_burst_and_no_further() {
    let mut b = LocalBucket::new(rate(10.0, 5));
    for _ in 0..5 {
        b.acquire(0, Duration::ZERO);
    }
    assert_eq!(b.remaining(250 * MS), 2);
    assert_eq!(b.reset_after(250 * MS), Duration::from_millis(250));
    assert_eq!(b.remaining(500 * MS), 5);
    assert_eq!(b.remaining(3_600_000 * MS), 5);
    assert_eq!(b.reset_after(3_600_000 * MS), Duration::ZERO);
    let admitted = (0..10).filter(|_| b.acquire(3_600_000 * MS, Duration::ZERO) == Decision::Admit).count();
    assert_eq!(admitted, 5);
}

#[test]
fn delay_mode_reserves_in_order_up_to_the_bound() {
    let mut b = LocalBucket::new(rate(10.0, 1));
    let bound = Duration::from_millis(250);
    assert_eq!(b.acquire(0, bound), Decision::Admit);
    assert_eq!(b.acquire(0, bound), Decision::Wait(Duration::from_millis(100)));
    assert_eq!(b.acquire(10 * MS, bound), Decision::Wait(Duration::from_millis(190)));
    // The next token is 300 ms away: beyond the bound, rejected, and nothing consumed.
    assert_eq!(b.acquire(10 * MS, bound), Decision::Reject { retry_after: Duration::from_millis(290) });
    assert_eq!(b.remaining(10 * MS), 0);
    assert_eq!(b.reset_after(10 * MS), Duration::from_millis(290));
    assert_eq!(b.acquire(60 * MS, bound), Decision::Wait(Duration::from_millis(240)));
}

#[test]
fn retry_after_is_exact() {
    let mut b = LocalBucket::new(rate(3.0, 2));
    b.acquire(0, Duration::ZERO);
    b.acquire(0, Duration::ZERO);
    let Decision::Reject { retry_after } = b.acquire(5 * MS, Duration::ZERO) else { panic!("expected reject") };
    assert_eq!(retry_after, Duration::from_nanos(333_333_334 - 5 * MS));
    let at = 5 * MS + retry_after.as_nanos() as u64;
    let mut early = b.clone();
    assert!(matches!(early.acquire(at - 1, Duration::ZERO), Decision::Reject { .. }));
    assert_eq!(b.acquire(at, Duration::ZERO), Decision::Admit);
}

#[test]
fn rate_validation_and_rounding() {
    assert_eq!(Rate::new(0.0, 1), Err(RateError::PerSecond(0.0)));
    assert!(matches!(Rate::new(f64::NAN, 1), Err(RateError::PerSecond(_))));
    assert_eq!(Rate::new(f64::INFINITY, 1), Err(RateError::PerSecond(f64::INFINITY)));
    assert_eq!(Rate::new(2e9, 1), Err(RateError::PerSecond(2e9)));
    assert_eq!(Rate::new(10.0, 0), Err(RateError::ZeroBurst));
    assert_eq!(Rate::new(1e-6, u32::MAX), Err(RateError::TooLarge));
    assert_eq!(rate(1000.0, 1).interval(), Duration::from_millis(1));
    assert_eq!(rate(0.1, 1).interval(), Duration::from_secs(10));
    assert_eq!(rate(3.0, 1).interval(), Duration::from_nanos(333_333_334));
    assert_eq!(rate(3.0, 6).refill_time(), Duration::from_nanos(2_000_000_004));
    for per_second in [3.0, 7.0, 0.3, 123_456.789, 999_999.0, 3e8] {
        let r = rate(per_second, 1);
        assert!(r.effective_per_second() <= per_second, "{per_second}");
        assert!(r.effective_per_second() > per_second * (1.0 - per_second / 1e9) - 1e-9, "{per_second}");
    }
    assert_eq!(RateError::ZeroBurst.to_string(), "burst must be at least 1");
}

#[test]
fn out_of_range_fields_are_clamped_not_panics() {
    for r in [
        Rate { per_second: 0.0, burst: 0 },
        Rate { per_second: -5.0, burst: 3 },
        Rate { per_second: f64::NAN, burst: 1 },
        Rate { per_second: f64::INFINITY, burst: u32::MAX },
        Rate { per_second: 1e-300, burst: u32::MAX },
    ] {
        let mut b = LocalBucket::new(r);
        assert_eq!(b.acquire(u64::MAX - 1, Duration::MAX), Decision::Admit);
        b.acquire(u64::MAX, Duration::MAX);
        b.acquire(0, Duration::MAX);
        let _ = (b.remaining(0), b.reset_after(u64::MAX), r.interval(), r.refill_time());
    }
    // A zero burst behaves as 1; a zero rate never refills.
    let mut b = LocalBucket::new(Rate { per_second: 0.0, burst: 0 });
    assert_eq!(b.acquire(0, Duration::ZERO), Decision::Admit);
    assert!(matches!(b.acquire(1_000_000 * MS, Duration::ZERO), Decision::Reject { .. }));
}

#[test]
fn split_for_workers_divides_rate_and_rounds_burst_up() {
    let r = rate(100.0, 10);
    assert_eq!(split_for_workers(r, 4), Rate { per_second: 25.0, burst: 3 });
    assert_eq!(split_for_workers(r, 2), Rate { per_second: 50.0, burst: 5 });
    assert_eq!(split_for_workers(r, 1), r);
    assert_eq!(split_for_workers(r, 0), r);
    assert_eq!(split_for_workers(rate(1.0, 1), 8), Rate { per_second: 0.125, burst: 1 });
    let three = split_for_workers(r, 3);
    assert_eq!(three.burst, 4);
    assert!((three.per_second * 3.0 - 100.0).abs() < 1e-9);
}

#[test]
fn key_hash_is_stable_within_the_process_and_separates_values() {
    assert_eq!(key_hash(b"tenant-a"), key_hash(b"tenant-a"));
    assert_ne!(key_hash(b"tenant-a"), key_hash(b"tenant-b"));
    assert_ne!(key_hash(b""), key_hash(b"\0"));
    let from_thread = std::thread::spawn(|| key_hash(b"tenant-a")).join().unwrap();
    assert_eq!(from_thread, key_hash(b"tenant-a"));
}

proptest! {
    /// Any rate, burst, non-decreasing times and bounds: the window bound holds, a reject
    /// consumes nothing and names a retry time beyond the bound, a wait stays within the bound,
    /// and the reported tokens never exceed the burst.
    #[test]
    fn local_bucket_never_exceeds_burst_plus_rate_times_time(
        per_second in 0.01f64..100_000.0,
        burst in 1u32..100,
        steps in proptest::collection::vec((0u64..50_000_000, 0u64..200_000_000), 1..200),
    ) {
        let r = Rate { per_second, burst };
        let mut b = LocalBucket::new(r);
        let (mut now, mut times) = (0u64, Vec::new());
        for (advance, wait) in steps {
            now += advance;
            let max_wait = Duration::from_nanos(wait);
            let before = b.tat;
            let decision = b.acquire(now, max_wait);
            match decision {
                Decision::Reject { retry_after } => {
                    prop_assert_eq!(b.tat, before);
                    prop_assert!(retry_after > max_wait);
                    let mut probe = b.clone();
                    let at = now + retry_after.as_nanos() as u64;
                    prop_assert_eq!(probe.acquire(at, Duration::ZERO), Decision::Admit);
                }
                Decision::Wait(w) => prop_assert!(w > Duration::ZERO && w <= max_wait),
                Decision::Admit => {}
            }
            prop_assert!(b.remaining(now) <= burst);
            times.extend(admitted_at(now, decision));
        }
        assert_window_bound(&times, r);
    }

    /// Under constant demand the bucket admits exactly burst + elapsed / T: no under-admission.
    #[test]
    fn saturated_bucket_admits_exactly_burst_plus_elapsed_over_interval(
        per_second in 1.0f64..10_000.0,
        burst in 1u32..20,
        probes in 1u64..2_000,
    ) {
        let r = Rate { per_second, burst };
        let interval = Gcra::new(r).interval;
        let mut b = LocalBucket::new(r);
        let step = interval / 3 + 1;
        let mut admitted = 0u64;
        for k in 0..probes {
            if b.acquire(k * step, Duration::ZERO) == Decision::Admit {
                admitted += 1;
            }
        }
        let last = (probes - 1) * step;
        prop_assert_eq!(admitted, (u64::from(burst) + last / interval).min(probes));
    }
}
