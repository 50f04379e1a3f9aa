//! Token buckets for rate limiting: one algorithm (GCRA), three owners.
//!
//! * [`LocalBucket`]: one worker's bucket (per route, `scope = "worker"`), plain `&mut self`.
//! * [`SharedBucket`]: one bucket for the whole process (`scope = "process"`), one `AtomicU64`.
//! * [`KeyedBuckets`]: one worker's buckets per client key, bounded in number by LRU eviction.
//!
//! # Algorithm
//!
//! The Generic Cell Rate Algorithm in its virtual-scheduling form, which is exactly a token bucket
//! of `burst` tokens refilled at `per_second`, stored as a single integer: the *theoretical
//! arrival time* `tat` (nanoseconds), the instant at which the bucket would be full again. With
//! `T` the emission interval (`1 / per_second`) and `C = burst × T` the capacity, a request at
//! `now` needs a token that becomes available at `max(tat, now) + T − C`. If that is not later
//! than `now` the request is admitted and `tat` moves to `max(tat, now) + T`; the bucket holds
//! `floor((C − (tat − now)) / T)` tokens. All arithmetic is integer: nothing drifts.
//!
//! # Accuracy
//!
//! * `T` is rounded *up* to whole nanoseconds (except where `1e9 / per_second` is an integer
//!   within float noise), so the enforced rate never exceeds the configured one and falls short of
//!   it by less than one part in `T` (nanoseconds): below 0.1 % for rates up to 1,000,000/s,
//!   exact for rates dividing 1e9. [`Rate::effective_per_second`] gives the enforced value.
//! * In any interval `[a, b]` at most `burst + (b − a) / T` requests are admitted, where a delayed
//!   request counts at the instant its wait ends. The property tests check exactly this.
//! * Out-of-range values that bypass [`Rate::new`] (the fields are public) are clamped, never a
//!   panic: `T` to `[1 ns, MAX_SPAN]`, the capacity and any wait to `MAX_SPAN` (about 146 years).
//!   Times are `u64` nanoseconds since a per-process epoch; arithmetic saturates after 292 years.

mod keyed;
mod shared;

use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::time::Duration;
use std::{error, fmt};

pub use keyed::KeyedBuckets;
pub use shared::SharedBucket;

/// Nanoseconds since an arbitrary per-process epoch, from a monotonic clock. Passed in by the
/// caller so that every decision is a pure function of its inputs.
pub type Nanos = u64;

/// A sustained rate and the burst allowed on top of it.
///
/// Build it with [`Rate::new`] from configuration; the fields are public for literals in tests
/// and for the lead's config conversion, and buckets clamp whatever they are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// Tokens added per second; valid values are finite and in `[MIN_PER_SECOND, 1e9]`.
    pub per_second: f64,
    /// Bucket size: requests admitted at once from a full bucket; at least 1.
    pub burst: u32,
}

/// Why a configured rate was refused by [`Rate::new`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateError {
    /// `per_second` is not finite or outside `[MIN_PER_SECOND, 1e9]`.
    PerSecond(f64),
    /// `burst` is 0: nothing could ever be admitted.
    ZeroBurst,
    /// `burst / per_second` exceeds about 146 years.
    TooLarge,
}

/// The outcome of one `acquire`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A token was available and has been consumed: proceed now.
    Admit,
    /// A token has been *reserved* and becomes valid after this long (never more than the
    /// `max_wait` given): sleep, then proceed. Reserving keeps waiters in FIFO order and the
    /// bound honest; a caller that abandons the wait (client gone) forfeits the token, which
    /// errs on the side of admitting less.
    Wait(Duration),
    /// No token within `max_wait`; nothing was consumed. A token becomes available after
    /// `retry_after` (for `Retry-After`, rounded up by `retry_after_secs`).
    Reject { retry_after: Duration },
}

/// A worker-local token bucket. Starts full.
#[derive(Clone, Debug)]
pub struct LocalBucket {
    gcra: Gcra,
    tat: Nanos,
}

/// The smallest accepted rate: one token per 11.6 days.
pub const MIN_PER_SECOND: f64 = 1e-6;
/// The largest accepted rate: one token per nanosecond, the clock's resolution.
pub const MAX_PER_SECOND: f64 = 1e9;
/// Bound on any span the buckets store (capacity, interval, wait): 2^62 ns, about 146 years.
const MAX_SPAN: u64 = 1 << 62;
const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Rate {
    /// A validated rate: `per_second` finite within `[MIN_PER_SECOND, MAX_PER_SECOND]`,
    /// `burst >= 1`, and a full refill (`burst / per_second`) shorter than about 146 years.
    pub fn new(per_second: f64, burst: u32) -> Result<Rate, RateError> {
        if !(MIN_PER_SECOND..=MAX_PER_SECOND).contains(&per_second) {
            return Err(RateError::PerSecond(per_second));
        }
        if burst == 0 {
            return Err(RateError::ZeroBurst);
        }
        let rate = Rate { per_second, burst };
        if u128::from(burst) * u128::from(interval_nanos(per_second)) > u128::from(MAX_SPAN) {
            return Err(RateError::TooLarge);
        }
        Ok(rate)
    }

    /// The emission interval as enforced: `1 / per_second` rounded up to whole nanoseconds.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(Gcra::new(*self).interval)
    }

    /// Time for an empty bucket to become full again: `burst` intervals.
    pub fn refill_time(&self) -> Duration {
        Duration::from_nanos(Gcra::new(*self).capacity)
    }

    /// The rate actually enforced after rounding the interval (never above `per_second`).
    pub fn effective_per_second(&self) -> f64 {
        NANOS_PER_SEC as f64 / Gcra::new(*self).interval as f64
    }
}

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateError::PerSecond(v) => {
                write!(f, "rate {v}/s is outside [{MIN_PER_SECOND}, {MAX_PER_SECOND}] per second")
            }
            RateError::ZeroBurst => f.write_str("burst must be at least 1"),
            RateError::TooLarge => f.write_str("burst / rate exceeds the longest supported refill time (146 years)"),
        }
    }
}

impl error::Error for RateError {}

impl LocalBucket {
    /// A full bucket.
    pub fn new(rate: Rate) -> Self {
        LocalBucket { gcra: Gcra::new(rate), tat: 0 }
    }

    /// Takes one token at `now`. `max_wait` is `Duration::ZERO` in reject mode and the delay bound
    /// in delay mode. `Admit` and `Wait` consume a token; `Reject` leaves the bucket unchanged.
    pub fn acquire(&mut self, now: Nanos, max_wait: Duration) -> Decision {
        let (decision, tat) = self.gcra.decide(self.tat, now, max_wait);
        if let Some(tat) = tat {
            self.tat = tat;
        }
        decision
    }

    /// Whole tokens available at `now` (0 while waiters hold reservations).
    pub fn remaining(&self, now: Nanos) -> u32 {
        self.gcra.remaining(self.tat, now)
    }

    /// Time from `now` until the bucket is full again (zero if it is full).
    pub fn reset_after(&self, now: Nanos) -> Duration {
        reset_after(self.tat, now)
    }
}

/// The rate each of `workers` workers enforces for `scope = "worker"`: `per_second / workers`
/// and `ceil(burst / workers)` (at least 1); `workers = 0` is taken as 1.
///
/// Accuracy: when requests spread evenly over the workers the process admits the configured
/// rate, with a burst of up to `burst + workers − 1` from the rounding. The split is per worker,
/// not per client: a client whose connections all land on one worker gets only `rate / workers`
/// and `ceil(burst / workers)`. Use `scope = "process"` ([`SharedBucket`]) where that matters.
pub fn split_for_workers(rate: Rate, workers: usize) -> Rate {
    let n = workers.max(1);
    let burst = (rate.burst.max(1) as usize).div_ceil(n);
    Rate { per_second: rate.per_second / n as f64, burst: u32::try_from(burst).unwrap_or(u32::MAX) }
}

/// A 64-bit digest of a client key (a header value, an mTLS identity) for [`KeyedBuckets`].
///
/// SipHash-1-3 keyed with a per-process random seed, so clients cannot choose values that collide
/// (no hash flooding) and every worker maps a value to the same digest. Two distinct values share
/// a digest, and so a bucket, with probability 2^-64.
pub fn key_hash(bytes: &[u8]) -> u64 {
    static SEED: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    SEED.get_or_init(Default::default).hash_one(bytes)
}

/// GCRA parameters in nanoseconds, clamped so that `tat` arithmetic cannot overflow.
#[derive(Clone, Copy, Debug)]
struct Gcra {
    /// `T`: time to earn one token, in `[1, MAX_SPAN]`.
    interval: u64,
    /// `C = burst × T`, in `[interval, MAX_SPAN]`.
    capacity: u64,
}

impl Gcra {
    fn new(rate: Rate) -> Self {
        let interval = interval_nanos(rate.per_second);
        let capacity = u64::from(rate.burst.max(1)).saturating_mul(interval).min(MAX_SPAN);
        Gcra { interval, capacity }
    }

    /// The decision at `now` for a bucket in state `tat`, and the new state if a token is taken.
    fn decide(&self, tat: Nanos, now: Nanos, max_wait: Duration) -> (Decision, Option<Nanos>) {
        let new_tat = tat.max(now).saturating_add(self.interval);
        let available_at = new_tat.saturating_sub(self.capacity);
        if available_at <= now {
            return (Decision::Admit, Some(new_tat));
        }
        let wait = available_at - now;
        let max_wait = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX).min(MAX_SPAN);
        if wait <= max_wait {
            (Decision::Wait(Duration::from_nanos(wait)), Some(new_tat))
        } else {
            (Decision::Reject { retry_after: Duration::from_nanos(wait) }, None)
        }
    }

    fn remaining(&self, tat: Nanos, now: Nanos) -> u32 {
        let debt = tat.saturating_sub(now);
        let tokens = self.capacity.saturating_sub(debt) / self.interval;
        u32::try_from(tokens).unwrap_or(u32::MAX)
    }
}

fn reset_after(tat: Nanos, now: Nanos) -> Duration {
    Duration::from_nanos(tat.saturating_sub(now))
}

/// `1e9 / per_second` rounded up to whole nanoseconds and clamped to `[1, MAX_SPAN]`; a quotient
/// within float noise (a few ulps) of an integer is taken as that integer, so that round rates
/// such as 0.1/s map to the intended interval rather than one nanosecond more.
fn interval_nanos(per_second: f64) -> u64 {
    let exact = NANOS_PER_SEC as f64 / per_second;
    if exact.is_nan() || exact < 0.0 {
        return MAX_SPAN; // NaN or a negative rate: as slow as representable (0/s gives +inf: same).
    }
    let nearest = exact.round();
    let noise = (exact * 4.0 * f64::EPSILON).max(1e-6);
    let rounded = if (exact - nearest).abs() <= noise { nearest } else { exact.ceil() };
    // Float-to-int `as` saturates (inf -> u64::MAX), then the clamp applies.
    (rounded as u64).clamp(1, MAX_SPAN)
}

#[cfg(test)]
mod tests;
