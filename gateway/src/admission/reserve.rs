//! The first class's reserve under the adaptive limit (`overload.first_class_reserve`).
//!
//! When the upstream is full (every slot under the limit taken), a first-class request that
//! arrives waits for the next completion, and with service times that line up (a pool of
//! workers started together) that wait is often most of a service time. So when a slot frees and
//! leaves exactly one free slot under the limit, that slot is held for the first class for a
//! moment: the cluster's no-load latency times the first class's share of arrivals, at most the
//! no-load latency divided by the limit (the mean time between completions at the limit). A
//! first-class request arriving within the hold takes it at once; when the hold has passed, any
//! class may. Only one slot is ever held, and never while more than one is free, so the cost is
//! bounded by one slot's idle time per completion at the limit, and it shrinks with the share: a
//! cluster whose first class sends nothing holds nothing.
//!
//! Simulated on the overload scenario without its capacity halving (an oracle proxy:
//! `loadtests/bench/overload-oracle.py --reserve 0 1 --hold --no-halve`, three seeds): with a 10%
//! first class at three times the capacity its p99 goes from 1.52-1.56x to 1.36-1.37x the
//! no-load latency, for 4.5-4.6% of goodput; with a 1% first class the cost is 1.1%.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Arrivals per update of the share.
const FOLD: u32 = 64;
/// Weight of a new fold in the share once the first few folds are in.
const FOLD_WEIGHT: f64 = 0.25;

/// The first class's share of arrivals, and the hold on the last free slot.
pub struct Reserve {
    /// Off (`first_class_reserve = false`, one class, or no adaptive limit): never holds.
    enabled: bool,
    share: Cell<f64>,
    folds: Cell<u32>,
    first: Cell<u32>,
    all: Cell<u32>,
    /// Since when a slot under the limit has been free; `None` while none is (or not known yet).
    free_since: Cell<Option<Instant>>,
}

/// What a class after the first may use now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OthersLimit {
    pub limit: usize,
    /// While the last free slot is held: when the hold ends.
    pub held_until: Option<Instant>,
}

impl Reserve {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            share: Cell::new(0.0),
            folds: Cell::new(0),
            first: Cell::new(0),
            all: Cell::new(0),
            free_since: Cell::new(None),
        }
    }

    /// Whether the reserve can ever hold a slot (callers skip its bookkeeping otherwise).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Counts an arrival of class `rank` (0 = the first class).
    pub fn arrival(&self, rank: usize) {
        if !self.enabled {
            return;
        }
        self.first.set(self.first.get() + u32::from(rank == 0));
        let all = self.all.get() + 1;
        if all < FOLD {
            self.all.set(all);
            return;
        }
        let sample = f64::from(self.first.get()) / f64::from(all);
        let folds = self.folds.get().saturating_add(1);
        // The first folds average plainly, so the share is right after one fold; then it moves
        // by a quarter per fold.
        let weight = (1.0 / f64::from(folds)).max(FOLD_WEIGHT);
        self.share.set(self.share.get() + (sample - self.share.get()) * weight);
        self.folds.set(folds);
        self.first.set(0);
        self.all.set(0);
    }

    /// The first class's share of recent arrivals, 0.0 to 1.0.
    pub fn share(&self) -> f64 {
        self.share.get()
    }

    /// How long the last free slot under `limit` is held for the first class.
    pub fn hold(&self, baseline: Duration, limit: usize) -> Duration {
        if !self.enabled || limit < 2 {
            return Duration::ZERO;
        }
        baseline.mul_f64(self.share.get().min(1.0 / limit as f64))
    }

    /// A slot was taken: `in_flight` now, under `limit`.
    pub fn taken(&self, in_flight: usize, limit: usize) {
        if in_flight >= limit {
            self.free_since.set(None);
        }
    }

    /// A slot was freed: `in_flight` now, under `limit`. When that leaves exactly one free
    /// slot (the upstream was full), its hold starts now.
    pub fn freed(&self, in_flight: usize, limit: usize) {
        if !self.enabled {
            return;
        }
        if in_flight + 1 == limit {
            self.free_since.set(Some(Instant::now()));
        } else if in_flight >= limit {
            self.free_since.set(None);
        }
    }

    /// The limit for the classes after the first: `limit`, or one less while the last free slot
    /// is held (it freed from a full upstream less than a hold ago). Reads the clock only then.
    pub fn others(&self, in_flight: usize, limit: usize, baseline: impl FnOnce() -> Duration) -> OthersLimit {
        let open = OthersLimit { limit, held_until: None };
        let Some(since) = self.free_since.get() else { return open };
        if !self.enabled || in_flight + 1 != limit {
            return open;
        }
        let hold = self.hold(baseline(), limit);
        if hold.is_zero() {
            return open;
        }
        let now = Instant::now();
        let end = since + hold;
        if now >= end {
            open
        } else {
            OthersLimit { limit: limit - 1, held_until: Some(end) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(first_per_ten: usize, arrivals: usize) -> Reserve {
        let r = Reserve::new(true);
        for i in 0..arrivals {
            r.arrival(if i % 10 < first_per_ten { 0 } else { 2 });
        }
        r
    }

    #[test]
    fn the_share_follows_the_first_class_arrivals() {
        assert!((fed(1, 640).share() - 0.1).abs() < 0.03, "{}", fed(1, 640).share());
        assert_eq!(fed(0, 640).share(), 0.0);
        assert!((fed(10, 640).share() - 1.0).abs() < 1e-9);
        // Fewer arrivals than one fold: nothing known yet, nothing held.
        assert_eq!(fed(5, 63).share(), 0.0);
        // A first class that stops arriving loses its reserve within a few folds.
        let r = fed(1, 640);
        for _ in 0..64 * 16 {
            r.arrival(1);
        }
        assert!(r.share() < 0.001, "{}", r.share());
    }

    #[test]
    fn the_hold_is_the_share_of_the_baseline_at_most_one_completion_interval() {
        let baseline = Duration::from_millis(40);
        let r = fed(1, 640);
        let share = r.share();
        assert_eq!(r.hold(baseline, 8), baseline.mul_f64(share));
        assert_eq!(r.hold(baseline, 100), baseline / 100);
        assert_eq!(r.hold(baseline, 1), Duration::ZERO, "the only slot is never held");
        assert_eq!(fed(0, 640).hold(baseline, 8), Duration::ZERO);
        let off = Reserve::new(false);
        for i in 0..640 {
            off.arrival(i % 2);
        }
        assert_eq!(off.hold(baseline, 8), Duration::ZERO);
    }

    #[test]
    fn only_the_last_free_slot_is_held_and_only_for_the_hold() {
        let baseline = Duration::from_millis(200);
        let r = fed(10, 640);
        // Full, then one slot frees: the others see one slot less until the hold ends.
        r.taken(8, 8);
        r.freed(7, 8);
        let held = r.others(7, 8, || baseline);
        assert_eq!(held.limit, 7);
        let end = held.held_until.expect("held");
        assert!(end > Instant::now() && end <= Instant::now() + baseline / 8);
        // Two free slots: nothing is held.
        assert_eq!(r.others(6, 8, || baseline), OthersLimit { limit: 8, held_until: None });
        // A zero hold (no first class seen) holds nothing.
        assert_eq!(fed(0, 640).others(7, 8, || baseline).limit, 8);
        // Filling up to the last slot holds nothing: only a slot freed from a full upstream is.
        let filling = fed(10, 640);
        assert_eq!(filling.others(7, 8, || baseline).limit, 8);
        // The hold ends.
        let short = fed(10, 640);
        short.freed(7, 8);
        std::thread::sleep(Duration::from_millis(3));
        assert_eq!(short.others(7, 8, || Duration::from_millis(16)), OthersLimit { limit: 8, held_until: None });
        // Taking the last slot ends the free period; the next free slot is held afresh.
        short.taken(8, 8);
        short.freed(7, 8);
        assert_eq!(short.others(7, 8, || Duration::from_millis(16)).limit, 7);
    }
}
