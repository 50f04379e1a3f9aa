//! Proof of life of every worker: each worker stamps its slot on every tick (100 ms); the
//! admin's `/healthz`, the `gateway_workers_stalled` gauge and systemd's watchdog read them.
//! A worker that stops ticking (a blocking call, an endless loop) or whose thread ended (a
//! panic outside any connection) makes the process unhealthy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a worker may go without a tick before the process reports it stalled. The tick
/// runs every 100 ms; a busy worker still ticks between its tasks.
pub const STALL_AFTER: Duration = Duration::from_secs(2);

/// A slot's value: 0 before the first tick, else milliseconds since `epoch` plus one, or one
/// of these two markers once the worker's thread ended.
const EXITED: u64 = u64::MAX;
const DIED: u64 = u64::MAX - 1;

/// One slot per worker, written by that worker only (relaxed stores).
pub struct Heartbeats {
    epoch: Instant,
    slots: Vec<AtomicU64>,
}

/// What one worker's slot says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pulse {
    /// Ticked this long ago (or started this long ago and has not ticked yet).
    Alive(Duration),
    /// The worker drained and its thread ended normally.
    Exited,
    /// The worker's thread ended with a panic.
    Died,
}

impl Heartbeats {
    pub fn new(workers: usize) -> Self {
        Self { epoch: Instant::now(), slots: (0..workers).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The number of workers.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Stamps `worker`'s slot with the current time (its tick).
    pub fn beat(&self, worker: usize, now: Instant) {
        let ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        if let Some(slot) = self.slots.get(worker) {
            slot.store(ms.saturating_add(1).min(DIED - 1), Ordering::Relaxed);
        }
    }

    /// Records that `worker`'s thread ended, cleanly (drained) or not (panicked).
    pub fn exited(&self, worker: usize, clean: bool) {
        if let Some(slot) = self.slots.get(worker) {
            slot.store(if clean { EXITED } else { DIED }, Ordering::Release);
        }
    }

    /// Every worker's state at `now`.
    pub fn pulses(&self, now: Instant) -> impl Iterator<Item = Pulse> + '_ {
        let since_start = now.saturating_duration_since(self.epoch);
        self.slots.iter().map(move |slot| match slot.load(Ordering::Acquire) {
            EXITED => Pulse::Exited,
            DIED => Pulse::Died,
            0 => Pulse::Alive(since_start),
            v => Pulse::Alive(since_start.saturating_sub(Duration::from_millis(v - 1))),
        })
    }

    /// The workers that are not serving at `now`: died, or silent for longer than `max_age`.
    /// A worker that exited after a drain counts only when `draining` is false.
    pub fn unhealthy(&self, now: Instant, max_age: Duration, draining: bool) -> Vec<(usize, Pulse)> {
        self.pulses(now)
            .enumerate()
            .filter(|(_, p)| match p {
                Pulse::Alive(age) => *age > max_age,
                Pulse::Exited => !draining,
                Pulse::Died => true,
            })
            .collect()
    }
}

impl std::fmt::Display for Pulse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Alive(age) => write!(f, "no tick for {} ms", age.as_millis()),
            Self::Exited => f.write_str("exited"),
            Self::Died => f.write_str("died (panic; see the log)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_unhealthy_when_silent_too_long_or_dead() {
        let beats = Heartbeats::new(3);
        let t0 = beats.epoch;
        beats.beat(0, t0 + Duration::from_millis(100));
        beats.beat(1, t0 + Duration::from_millis(100));
        beats.beat(2, t0 + Duration::from_millis(100));
        let now = t0 + Duration::from_millis(150);
        assert!(beats.unhealthy(now, STALL_AFTER, false).is_empty());
        let later = t0 + Duration::from_secs(5);
        beats.beat(0, later);
        beats.exited(2, false);
        let bad = beats.unhealthy(later, STALL_AFTER, false);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!(bad.first().map(|b| b.0), Some(1));
        assert_eq!(bad.get(1), Some(&(2, Pulse::Died)));
        assert_eq!(bad.first().map(|b| b.1), Some(Pulse::Alive(Duration::from_millis(4900))));
    }

    #[test]
    fn a_drained_worker_counts_only_outside_a_drain() {
        let beats = Heartbeats::new(1);
        beats.exited(0, true);
        let now = Instant::now();
        assert!(beats.unhealthy(now, STALL_AFTER, true).is_empty());
        assert_eq!(beats.unhealthy(now, STALL_AFTER, false), vec![(0, Pulse::Exited)]);
    }

    #[test]
    fn a_worker_that_never_ticked_counts_from_the_start() {
        let beats = Heartbeats::new(1);
        let now = beats.epoch + Duration::from_secs(3);
        assert_eq!(beats.unhealthy(now, STALL_AFTER, false), vec![(0, Pulse::Alive(Duration::from_secs(3)))]);
        assert!(beats.unhealthy(beats.epoch + Duration::from_secs(1), STALL_AFTER, false).is_empty());
    }
}
