//! The origin's worker pool as an admission gate: at most `capacity` requests in service at once,
//! the rest wait in one unbounded FIFO queue and are admitted strictly in arrival order. An
//! unlimited gate ([`Gate::unlimited`]) admits everything at once and only counts.
//!
//! The capacity halves `halve_after` after the first request since start (or since the last
//! [`Gate::reset`]); requests already in service finish, and the queue then drains at the new
//! capacity.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The initial capacity of an unlimited gate.
const UNLIMITED: usize = usize::MAX;

/// What the origin has seen since start or since the last reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CapacityStats {
    /// The capacity now (the initial one, or half of it after the halving); 0: no limit.
    pub capacity: usize,
    /// The capacity has been halved.
    pub halved: bool,
    /// Requests in service now.
    pub in_service: usize,
    /// Requests waiting for a slot now.
    pub queued: usize,
    /// Most requests ever in service at once; never more than the capacity at that time.
    pub max_in_service: usize,
    /// Longest the queue has been.
    pub max_queued: usize,
    /// Most requests ever received and not yet answered (in service plus queued): the
    /// concurrency the client (the proxy) put on the origin.
    pub max_in_flight: usize,
    /// Requests that completed their service time.
    pub served: u64,
    /// Served requests whose answer could not be written: the client had given up on them, so
    /// their service time was wasted.
    pub unanswered: u64,
}

/// The admission gate; see the module documentation.
pub(crate) struct Gate {
    initial: usize,
    halve_after: Option<Duration>,
    inner: Mutex<Inner>,
}

struct Inner {
    /// When the first request since start or reset arrived.
    clock: Option<Instant>,
    in_service: usize,
    /// One sender per waiting request, in arrival order; a count sent hands it a slot (the
    /// count: the requests in service when it got it).
    waiting: VecDeque<SyncSender<usize>>,
    closed: bool,
    stats: CapacityStats,
}

/// A slot in service; dropping it frees the slot for the next waiting request.
pub(crate) struct Permit<'a> {
    gate: &'a Gate,
    /// Other requests in service when this one got its slot.
    pub(crate) others: usize,
}

impl Gate {
    /// A gate admitting `capacity` (at least 1) requests at once.
    pub(crate) fn new(capacity: usize, halve_after: Option<Duration>) -> Gate {
        let initial = capacity.max(1);
        let stats = CapacityStats { capacity: initial, ..CapacityStats::default() };
        Gate {
            initial,
            halve_after,
            inner: Mutex::new(Inner { clock: None, in_service: 0, waiting: VecDeque::new(), closed: false, stats }),
        }
    }

    /// A gate admitting every request at once (its stats report capacity 0).
    pub(crate) fn unlimited() -> Gate {
        Gate::new(UNLIMITED, None)
    }

    /// Waits, in arrival order, for a slot. `None` once the gate is closed.
    pub(crate) fn acquire(&self) -> Option<Permit<'_>> {
        let receiver = {
            let mut inner = self.lock();
            if inner.closed {
                return None;
            }
            let now = Instant::now();
            let clock = *inner.clock.get_or_insert(now);
            let capacity = self.capacity_at(clock, now);
            inner.stats.capacity = capacity;
            inner.stats.halved = capacity < self.initial;
            if inner.waiting.is_empty() && inner.in_service < capacity {
                let others = inner.in_service;
                inner.in_service += 1;
                inner.observe();
                return Some(Permit { gate: self, others });
            }
            let (sender, receiver) = sync_channel(1);
            inner.waiting.push_back(sender);
            inner.observe();
            receiver
        };
        // The releaser counted us in service before sending; a dropped sender means closed.
        receiver.recv().ok().map(|others| Permit { gate: self, others })
    }

    /// Counts a served request whose answer could not be written.
    pub(crate) fn note_unanswered(&self) {
        self.lock().stats.unanswered += 1;
    }

    pub(crate) fn stats(&self) -> CapacityStats {
        let mut inner = self.lock();
        if let Some(clock) = inner.clock {
            let capacity = self.capacity_at(clock, Instant::now());
            inner.stats.capacity = capacity;
            inner.stats.halved = capacity < self.initial;
        }
        inner.stats.in_service = inner.in_service;
        inner.stats.queued = inner.waiting.len();
        let mut stats = inner.stats;
        if self.initial == UNLIMITED {
            stats.capacity = 0;
        }
        stats
    }

    /// Restarts the statistics and the halving clock (the capacity is the initial one again
    /// until `halve_after` after the next request). Requests in service or queued stay.
    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        inner.clock = None;
        inner.stats = CapacityStats { capacity: self.initial, ..CapacityStats::default() };
        inner.observe();
    }

    /// Refuses every later [`Gate::acquire`] and wakes every waiting request with `None`.
    pub(crate) fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.waiting.clear();
    }

    fn release(&self) {
        let mut inner = self.lock();
        inner.in_service = inner.in_service.saturating_sub(1);
        inner.stats.served += 1;
        let now = Instant::now();
        let capacity = inner.clock.map_or(self.initial, |clock| self.capacity_at(clock, now));
        while inner.in_service < capacity {
            let Some(next) = inner.waiting.pop_front() else {
                break;
            };
            // A waiter that is gone (its thread ended) simply loses its place.
            if next.send(inner.in_service).is_ok() {
                inner.in_service += 1;
            }
        }
        inner.observe();
    }

    fn capacity_at(&self, clock: Instant, now: Instant) -> usize {
        match self.halve_after {
            Some(after) if now.duration_since(clock) >= after => (self.initial / 2).max(1),
            _ => self.initial,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Updates the maxima after a change.
    fn observe(&mut self) {
        let queued = self.waiting.len();
        let stats = &mut self.stats;
        stats.max_in_service = stats.max_in_service.max(self.in_service);
        stats.max_queued = stats.max_queued.max(queued);
        stats.max_in_flight = stats.max_in_flight.max(self.in_service + queued);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.release();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::thread;

    use super::*;

    #[test]
    fn admits_up_to_capacity_then_queues() {
        let gate = Gate::new(2, None);
        let a = gate.acquire().unwrap();
        let _b = gate.acquire().unwrap();
        let stats = gate.stats();
        assert_eq!((stats.in_service, stats.queued, stats.max_in_service), (2, 0, 2));
        thread::scope(|s| {
            let waiter = s.spawn(|| gate.acquire().map(|_permit| ()));
            while gate.stats().queued == 0 {
                thread::yield_now();
            }
            assert_eq!(gate.stats().max_in_flight, 3);
            drop(a);
            assert_eq!(waiter.join().unwrap(), Some(()));
        });
        let stats = gate.stats();
        assert_eq!((stats.in_service, stats.queued, stats.served, stats.max_in_service), (1, 0, 2, 2));
    }

    #[test]
    fn admits_waiters_in_arrival_order() {
        let gate = Arc::new(Gate::new(1, None));
        let first = gate.acquire().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::new();
        for i in 0..5 {
            let (g, order) = (Arc::clone(&gate), Arc::clone(&order));
            handles.push(thread::spawn(move || {
                let _permit = g.acquire().unwrap();
                order.lock().unwrap().push(i);
            }));
            // Each waiter is queued before the next one starts.
            while gate.stats().queued != i + 1 {
                thread::yield_now();
            }
        }
        drop(first);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(gate.stats().max_in_service, 1);
        assert_eq!(gate.stats().max_queued, 5);
    }

    #[test]
    fn never_more_in_service_than_capacity_under_contention() {
        let gate = Arc::new(Gate::new(3, None));
        let barrier = Arc::new(Barrier::new(16));
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let (gate, barrier) = (Arc::clone(&gate), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..50 {
                        let _permit = gate.acquire().unwrap();
                        assert!(gate.stats().in_service <= 3);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let stats = gate.stats();
        assert_eq!(stats.served, 16 * 50);
        assert!(stats.max_in_service <= 3, "{stats:?}");
        assert_eq!((stats.in_service, stats.queued), (0, 0));
    }

    #[test]
    fn capacity_halves_after_the_first_request_and_reset_restores_it() {
        let gate = Gate::new(4, Some(Duration::from_millis(30)));
        assert_eq!(gate.stats().capacity, 4);
        let permits: Vec<_> = (0..4).map(|_| gate.acquire().unwrap()).collect();
        thread::sleep(Duration::from_millis(40));
        let stats = gate.stats();
        assert_eq!((stats.capacity, stats.halved), (2, true));
        drop(permits);
        // Two slots now: a third request waits.
        let _a = gate.acquire().unwrap();
        let _b = gate.acquire().unwrap();
        thread::scope(|s| {
            let waiter = s.spawn(|| gate.acquire().is_none());
            while gate.stats().queued == 0 {
                thread::yield_now();
            }
            gate.close();
            assert!(waiter.join().unwrap(), "close wakes waiters with None");
        });
        gate.reset();
        let stats = gate.stats();
        assert_eq!((stats.capacity, stats.halved, stats.served, stats.max_in_service), (4, false, 0, 2));
    }

    #[test]
    fn permits_count_the_others_in_service_and_unlimited_gates_never_queue() {
        let gate = Gate::unlimited();
        let permits: Vec<_> = (0..100).map(|_| gate.acquire().unwrap()).collect();
        assert_eq!(permits.iter().map(|p| p.others).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
        let stats = gate.stats();
        assert_eq!((stats.capacity, stats.in_service, stats.queued, stats.max_in_service), (0, 100, 0, 100));
        drop(permits);
        assert_eq!(gate.acquire().unwrap().others, 0);

        // A queued request learns how many were in service when it got its slot.
        let gate = Gate::new(2, None);
        let a = gate.acquire().unwrap();
        let b = gate.acquire().unwrap();
        assert_eq!((a.others, b.others), (0, 1));
        thread::scope(|s| {
            let waiter = s.spawn(|| gate.acquire().map(|p| p.others));
            while gate.stats().queued == 0 {
                thread::yield_now();
            }
            drop(a);
            assert_eq!(waiter.join().unwrap(), Some(1));
        });
    }

    #[test]
    fn capacity_never_halves_below_one() {
        let gate = Gate::new(1, Some(Duration::ZERO));
        let permit = gate.acquire().unwrap();
        assert_eq!(gate.stats().capacity, 1);
        drop(permit);
        assert!(gate.acquire().is_some());
    }
}
