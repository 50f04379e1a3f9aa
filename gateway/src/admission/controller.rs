//! The adaptive concurrency limit of one cluster, shared by every worker of the process.
//!
//! One [`Gradient`] per cluster sees every worker's latency samples and the process's total of
//! requests in flight, so its limit is the upstream's capacity, not a worker's guess at its
//! part of it (each worker with its own controller read a rise that other workers' requests
//! caused as latency not following its own in-flight count: with 4 workers the limits summed
//! to 5-8x the capacity in the overload benchmark). The limit is then split into one limit per
//! worker, so that admission, the priority queues and the first class's reserve stay per
//! worker, on the worker's thread, without waking another thread:
//!
//! - each worker counts its arrivals per class (a relaxed atomic add on its own cache line);
//! - whenever a latency window closes, the worker that closed it turns the counts into a demand
//!   in slots per worker and class (arrival rate x no-load latency, smoothed over windows) and
//!   fills the limit class by class, best first: first-class demand everywhere before any
//!   second-class demand anywhere, and so on; room left over goes in proportion to each
//!   worker's total demand (evenly before any demand was seen). The shares are whole slots
//!   summing to the limit (largest remainders), and a worker's limit is at least one.
//!
//! So the workers' limits sum to the limit (plus at most one per worker whose share rounded to
//! nothing), a worker with fewer connections gets the share its requests need rather than an
//! even split, and a worker whose traffic is more important is served before another's less
//! important traffic. With one worker its limit is the limit.
//!
//! Costs: every request admitted takes the controller's lock three times (slot taken, slot
//! freed, latency sample), for a few arithmetic steps each; reads of the limit, the baseline and
//! whether requests queue upstream are relaxed atomic loads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use gateway_config::{AdaptiveConcurrency, Cluster};

use super::gradient::Gradient;
use super::limiter::{MAX_CLASSES, UNVALIDATED_ROOM};

/// Weight of the newest window in each worker's smoothed demand.
const DEMAND_WEIGHT: f64 = 0.25;
/// The no-load latency used to turn arrival rates into slots before one was measured.
const DEFAULT_BASELINE: Duration = Duration::from_millis(20);

/// One cluster's shared adaptive limit.
pub struct Controller {
    settings: AdaptiveConcurrency,
    max_requests: usize,
    state: Mutex<State>,
    /// A worker found no slot under its limit since the last sample (see [`Gradient::note_bound`]).
    bound: AtomicBool,
    /// Requests in flight in the process (a copy of the count kept under the lock).
    in_flight: AtomicUsize,
    /// First-class requests waiting for a slot, all workers.
    first_waiting: AtomicUsize,
    /// The limit, whether it was measured, the baseline (nanoseconds, 0: none) and whether the
    /// last window showed queueing, as of the last window closed.
    limit: AtomicUsize,
    measured: AtomicBool,
    baseline: AtomicU64,
    queueing: AtomicBool,
    /// The last window's latency over its no-load latency (`f64` bits).
    ratio: AtomicU64,
    workers: Box<[WorkerSlot]>,
}

struct State {
    gradient: Gradient,
    /// Requests in flight in the whole process.
    in_flight: usize,
    /// Each worker's smoothed demand per class, in slots.
    demand: Vec<[f64; MAX_CLASSES]>,
    /// When the arrival counts were last read.
    counted_at: Instant,
}

/// What one worker publishes and reads; its own cache lines.
#[repr(align(128))]
struct WorkerSlot {
    arrivals: [AtomicU32; MAX_CLASSES],
    limit: AtomicUsize,
}

impl Controller {
    /// A controller for `workers` workers of a cluster with these settings and hard cap.
    pub fn new(settings: &AdaptiveConcurrency, max_requests: usize, workers: usize, now: Instant) -> Self {
        let workers = workers.max(1);
        let gradient = Gradient::new(settings, max_requests, now);
        let c = Self {
            settings: settings.clone(),
            max_requests: max_requests.max(1),
            state: Mutex::new(State {
                gradient,
                in_flight: 0,
                demand: vec![[0.0; MAX_CLASSES]; workers],
                counted_at: now,
            }),
            bound: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            first_waiting: AtomicUsize::new(0),
            limit: AtomicUsize::new(0),
            measured: AtomicBool::new(false),
            baseline: AtomicU64::new(0),
            queueing: AtomicBool::new(false),
            ratio: AtomicU64::new(1.0f64.to_bits()),
            workers: (0..workers)
                .map(|_| WorkerSlot { arrivals: Default::default(), limit: AtomicUsize::new(0) })
                .collect(),
        };
        let mut state = c.lock();
        c.publish(&mut state, now);
        drop(state);
        c
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this controller was made for these settings (a reload that changes them gets a
    /// new one).
    fn fits(&self, settings: &AdaptiveConcurrency, max_requests: usize, workers: usize) -> bool {
        self.settings == *settings && self.max_requests == max_requests.max(1) && self.workers.len() == workers.max(1)
    }

    /// Workers sharing the limit.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The cluster's limit (all workers).
    pub fn limit(&self) -> usize {
        self.limit.load(Relaxed)
    }

    /// Worker `worker`'s part of the limit (at least 1).
    pub fn worker_limit(&self, worker: usize) -> usize {
        self.workers.get(worker).map_or(1, |w| w.limit.load(Relaxed)).max(1)
    }

    /// Whether the upstream's latency has been measured (a window closed).
    pub fn measured(&self) -> bool {
        self.measured.load(Relaxed)
    }

    /// The measured no-load latency, once known.
    pub fn baseline(&self) -> Option<Duration> {
        match self.baseline.load(Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Whether the last window showed requests queueing at the upstream.
    pub fn queueing(&self) -> bool {
        self.queueing.load(Relaxed)
    }

    /// The last window's latency over its no-load latency (1 before one closed).
    pub fn latency_ratio(&self) -> f64 {
        f64::from_bits(self.ratio.load(Relaxed))
    }

    /// Takes the latency as measured, with this no-load latency (tests at a measured limit).
    #[cfg(test)]
    pub fn assume_measured(&self, baseline: Duration) {
        let mut s = self.lock();
        s.gradient.assume_measured(baseline);
        self.publish(&mut s, Instant::now());
    }

    /// Takes the last window's latency as `ratio` times the no-load latency (tests).
    #[cfg(test)]
    pub fn assume_ratio(&self, ratio: f64) {
        self.ratio.store(ratio.to_bits(), Relaxed);
    }

    /// Counts an arrival of class `rank` at worker `worker`.
    #[inline]
    pub fn arrival(&self, worker: usize, rank: usize) {
        if let Some(a) = self.workers.get(worker).and_then(|w| w.arrivals.get(rank)) {
            a.fetch_add(1, Relaxed);
        }
    }

    /// Whether the process has fewer requests in flight than the limit (some worker leaves
    /// part of its share unused).
    pub fn has_room(&self) -> bool {
        self.in_flight.load(Relaxed) < self.limit.load(Relaxed)
    }

    /// Whether the process has room under the limit for a request of a later class than the
    /// first at a worker whose part is full: two free slots at least (the last is the first
    /// class's to take, as a worker's reserve holds it), and no first-class request waiting
    /// at any worker. While the cluster's limit does not bind, the workers' parts (which follow
    /// their demand only when a window closes, and are a few slots each at a light load over
    /// several workers) do not refuse what the upstream has room for.
    pub fn has_room_for_later_classes(&self) -> bool {
        self.in_flight.load(Relaxed) + 1 < self.limit.load(Relaxed) && self.first_waiting.load(Relaxed) == 0
    }

    /// First-class requests waiting for a slot at any worker.
    pub fn first_waiting(&self) -> usize {
        self.first_waiting.load(Relaxed)
    }

    /// One more (`1`) or one fewer (`-1`) first-class request waiting.
    pub fn first_waiting_changed(&self, by: isize) {
        if by >= 0 {
            self.first_waiting.fetch_add(1, Relaxed);
        } else {
            let _ = self.first_waiting.fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        }
    }

    /// Whether the process has fewer requests in flight than the limit plus its headroom for
    /// the first class (a quarter of it, at least one): how far above the limit first-class
    /// requests that waited may go, all workers together.
    pub fn within_headroom(&self) -> bool {
        let limit = self.limit.load(Relaxed);
        self.in_flight.load(Relaxed) < limit + (limit / 4).max(1)
    }

    /// A request found no slot under its worker's limit: the limit binds.
    pub fn note_bound(&self) {
        if !self.bound.load(Relaxed) {
            self.bound.store(true, Relaxed);
        }
    }

    /// The kinds of request seen, with each one's no-load latency (tests).
    #[cfg(test)]
    pub fn kinds(&self) -> Vec<(u64, Option<Duration>)> {
        self.lock().gradient.kinds()
    }

    /// One more request in flight in the process.
    pub fn taken(&self, now: Instant) {
        let mut s = self.lock();
        s.in_flight += 1;
        let n = s.in_flight;
        self.in_flight.store(n, Relaxed);
        s.gradient.observe_in_flight(n);
        s.gradient.set_in_flight(n, now);
    }

    /// One request fewer in flight in the process.
    pub fn released(&self, now: Instant) {
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        let n = s.in_flight;
        self.in_flight.store(n, Relaxed);
        s.gradient.set_in_flight(n, now);
    }

    /// Adds one successful upstream latency sample; when it closes a window, the limit and the
    /// workers' shares are published again.
    pub fn sample(&self, rtt: Duration, now: Instant) {
        self.sample_kind(rtt, 0, now);
    }

    /// [`Controller::sample`] of a request of `kind` (its route's key): each kind's latency is
    /// compared with its own no-load latency (see [`Gradient::sample_kind`]).
    pub fn sample_kind(&self, rtt: Duration, kind: u64, now: Instant) {
        let mut s = self.lock();
        if self.bound.swap(false, Relaxed) {
            s.gradient.note_bound();
        }
        if s.gradient.sample_kind(rtt, kind, now) {
            self.publish(&mut s, now);
        }
    }

    /// Publishes the limit, the signals and every worker's share.
    fn publish(&self, s: &mut State, now: Instant) {
        let g = &s.gradient;
        let limit = if g.measured() {
            g.limit().min(self.max_requests)
        } else {
            let fixed = self.max_requests.saturating_sub((self.max_requests / 4).max(1)).max(1);
            g.limit().saturating_mul(UNVALIDATED_ROOM).min(fixed)
        };
        self.limit.store(limit, Relaxed);
        self.measured.store(g.measured(), Relaxed);
        self.baseline
            .store(g.baseline().map_or(0, |b| u64::try_from(b.as_nanos()).unwrap_or(u64::MAX).max(1)), Relaxed);
        self.queueing.store(g.queueing(), Relaxed);
        self.ratio.store(g.ratio().to_bits(), Relaxed);
        let baseline = g.baseline().unwrap_or(DEFAULT_BASELINE).as_secs_f64();
        let span = now.saturating_duration_since(s.counted_at).as_secs_f64();
        s.counted_at = now;
        for (slot, demand) in self.workers.iter().zip(s.demand.iter_mut()) {
            for (count, d) in slot.arrivals.iter().zip(demand.iter_mut()) {
                let n = f64::from(count.swap(0, Relaxed));
                if span > 0.0 {
                    *d += DEMAND_WEIGHT * (n / span * baseline - *d);
                }
            }
        }
        for (slot, share) in self.workers.iter().zip(allocate(limit, &s.demand)) {
            slot.limit.store(share, Relaxed);
        }
    }
}

/// Splits `limit` into whole slots per worker: each class's demand (in slots, per worker) is met
/// before the next class's, across all workers; what is left over goes in proportion to each
/// worker's total demand, or evenly when there is none. The shares sum to `limit`.
pub fn allocate(limit: usize, demand: &[[f64; MAX_CLASSES]]) -> Vec<usize> {
    let n = demand.len();
    if n <= 1 {
        return vec![limit; n];
    }
    let mut shares = vec![0.0f64; n];
    let mut left = limit as f64;
    let of = |d: &[f64; MAX_CLASSES], rank: usize| d.get(rank).map_or(0.0, |x| x.max(0.0));
    for rank in 0..MAX_CLASSES {
        if left <= 0.0 {
            break;
        }
        let total: f64 = demand.iter().map(|d| of(d, rank)).sum();
        if total <= 0.0 {
            continue;
        }
        let give = total.min(left);
        for (share, d) in shares.iter_mut().zip(demand) {
            *share += of(d, rank) * give / total;
        }
        left -= give;
    }
    if left > 0.0 {
        let totals: Vec<f64> = demand.iter().map(|d| d.iter().map(|x| x.max(0.0)).sum()).collect();
        let sum: f64 = totals.iter().sum();
        for (share, total) in shares.iter_mut().zip(&totals) {
            *share += if sum > 0.0 { left * total / sum } else { left / n as f64 };
        }
    }
    // Whole slots: the floors, then one more to the largest remainders until they sum to limit.
    let mut whole: Vec<usize> = shares.iter().map(|s| s.floor() as usize).collect();
    let mut missing = limit.saturating_sub(whole.iter().sum());
    let mut order: Vec<(usize, f64)> = shares.iter().map(|s| s - s.floor()).enumerate().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (i, _) in order.into_iter().cycle().take(n * 2) {
        if missing == 0 {
            break;
        }
        if let Some(w) = whole.get_mut(i) {
            *w += 1;
            missing -= 1;
        }
    }
    whole
}

/// The process's controllers, by cluster name: a worker building its state of a cluster takes
/// the one the other workers use, so they share one limit. Entries are weak: a controller lives
/// as long as some worker's state of the cluster does; a reload that changes the cluster's
/// adaptive settings or hard cap starts a new one.
#[derive(Default)]
pub struct Controllers {
    entries: Mutex<HashMap<String, Weak<Controller>>>,
}

impl Controllers {
    /// The controller of `cluster` for `workers` workers.
    pub fn get(&self, cluster: &Cluster, workers: usize) -> Arc<Controller> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, c| c.strong_count() > 0);
        let settings = &cluster.adaptive_concurrency;
        let max = cluster.caps.max_requests;
        if let Some(c) = entries.get(&cluster.name).and_then(Weak::upgrade) {
            if c.fits(settings, max, workers) {
                return c;
            }
        }
        let c = Arc::new(Controller::new(settings, max, workers, Instant::now()));
        entries.insert(cluster.name.clone(), Arc::downgrade(&c));
        c
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
