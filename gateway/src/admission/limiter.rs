//! Priority-class admission to one cluster, per worker.
//!
//! The cluster has an in-flight limit `L` on each worker: with the adaptive limit, the worker's
//! part of the one limit the workers share ([`super::controller`], [`super::gradient`]); else
//! the fixed cap, per worker.
//! A request of class rank `r` (0 = most important, `last` = least):
//!
//! - is admitted at once when fewer than `L` requests are in flight and no request of its rank
//!   or better is waiting;
//! - rank 0 waits first in line: a freed slot goes to it before anyone else, even when the limit
//!   has just shrunk below the requests in flight (the slot changes hands, in flight stays), and
//!   after waiting one no-load latency of the upstream it is admitted above `L` (the limit may
//!   be wrong: too low just after a cut), by at most `max(1, L/4)` and within the hard cap
//!   `max_requests`, else it waits until its deadline; but not while the upstream's latency
//!   shows requests queueing there (above the limit it would only queue behind others: it stays
//!   first in line instead). Without the adaptive limit, `L` is `max_requests` minus a reserve
//!   of `max(1, max_requests/4)` that only rank 0 uses, and rank 0 is admitted at once up to the
//!   cap;
//! - the last rank never waits: no free slot means a fast 503 (shed);
//! - middle ranks wait for a slot at most `baseline * factor * (last - r) / (last - 1)` (the
//!   baseline being the upstream's measured no-load latency), less `baseline * (ratio - 1)`
//!   when the upstream's last window took `ratio` times its no-load latency (waiting plus being
//!   served stays within the bound while the upstream queues too), then are shed; and when their own
//!   queue stands (the queue-delay signal, [`super::queue_delay`]: the shortest wait over a whole
//!   interval above `target * (last - r)` and above half their wait bound), they are shed on
//!   arrival instead of joining it, as long as two of their rank are queued to take the next
//!   slots (never leaving a freed slot to a lower class);
//! - more than `max_pending` waiters, or `max_requests` in flight (the hard cap), means 503
//!   overflow (rank 0 waits at the cap while `max_pending` allows).
//!
//! A finishing request hands its slot directly to the best waiter (lowest rank first, then
//! arrival order), so a freed slot is never taken by a newcomer of a lower class. Nothing here is
//! tuned to an upstream's capacity: the limit finds it, the classes only say who goes first.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use gateway_config::Cluster;

use super::controller::Controller;
use super::queue_delay::QueueDelay;
use super::reserve::Reserve;

/// Classes supported (config validation enforces it).
pub const MAX_CLASSES: usize = 8;
/// Waiters of a class that stay queued when its queue stands: enough to take the class's next
/// slots, so that shedding on arrival never leaves a freed slot to a lower class.
const MIN_STANDING_QUEUE: usize = 2;
/// Wait bound for middle classes before any latency was measured.
const DEFAULT_BASELINE: Duration = Duration::from_millis(20);
/// With the adaptive limit, how long rank 0 waits for a slot under the limit before it takes
/// one above it, as a share of the no-load latency.
const FIRST_CLASS_WAIT_SHARE: f64 = 1.0;
/// With the limit shared by several workers, how many times per no-load latency a waiting
/// first-class request looks for a slot another worker freed.
const FIRST_CLASS_POLLS: u32 = 8;

/// How far above an adaptive limit not yet measured (no latency window closed yet: the limit is
/// `initial_limit`, a guess) requests are admitted: two doublings.
pub const UNVALIDATED_ROOM: usize = 4;

/// The outcome of asking for a slot.
pub enum Admission {
    Admitted(Permit),
    /// No capacity for this class now: 503 `x-gateway-reason: shed`.
    Shed,
    /// The same, decided on arrival because the class's queue stands (the queue-delay signal).
    ShedStanding,
    /// A cap was hit: 503 `x-gateway-reason: overflow`.
    Overflow,
}

/// How the limiter treats classes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Priority classes on (`[overload] enabled`); off: only the caps apply.
    pub enabled: bool,
    pub classes: usize,
    pub queue_wait_factor: f64,
    /// Hold the last free slot under the adaptive limit for the first class
    /// ([`super::reserve`]).
    pub first_class_reserve: bool,
    /// The queue-delay signal's target and interval.
    pub queue_delay_target: Duration,
    pub queue_delay_interval: Duration,
}

pub struct Limiter {
    policy: Policy,
    max_requests: usize,
    max_pending: usize,
    in_flight: Cell<usize>,
    pending: Cell<usize>,
    /// The cluster's adaptive limit, shared with the other workers, and this worker's index in
    /// it ([`super::controller`]).
    control: Option<(Arc<Controller>, usize)>,
    waiters: RefCell<[VecDeque<Rc<Waiter>>; MAX_CLASSES]>,
    /// The queue-delay signal of each class's queue.
    delays: RefCell<[QueueDelay; MAX_CLASSES]>,
    /// The first class's reserve under the adaptive limit.
    reserve: Reserve,
}

#[derive(Default)]
struct Waiter {
    granted: Cell<bool>,
    /// Rank 0 that waited long enough: a slot above the limit will do.
    above_limit: Cell<bool>,
    /// A later rank whose next slot is held for the first class until then: look again then.
    recheck: Cell<Option<Instant>>,
    waker: RefCell<Option<Waker>>,
}

/// Counts a first-class waiter in the shared controller while it lives.
struct FirstWaiting<'a>(&'a Controller);

impl<'a> FirstWaiting<'a> {
    fn new(c: &'a Controller) -> Self {
        c.first_waiting_changed(1);
        Self(c)
    }
}

impl Drop for FirstWaiting<'_> {
    fn drop(&mut self) {
        self.0.first_waiting_changed(-1);
    }
}

/// Leaves the wait queue on every path out of [`Limiter::queue`].
struct QueueGuard<'a> {
    limiter: &'a Limiter,
    waiter: &'a Rc<Waiter>,
    rank: usize,
    admitted: bool,
}

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        let l = self.limiter;
        l.pending.set(l.pending.get().saturating_sub(1));
        if self.waiter.granted.get() {
            if !self.admitted {
                // Granted, but the request went away before using the slot.
                l.release_slot();
                l.dispatch(true);
            }
        } else if let Some(q) = l.waiters.borrow_mut().get_mut(self.rank) {
            q.retain(|w| !Rc::ptr_eq(w, self.waiter));
        }
    }
}

impl Limiter {
    /// A limiter of its own (one worker): with the adaptive limit, a controller nobody shares.
    pub fn new(cluster: &Cluster, policy: Policy) -> Self {
        Self::with_controller(
            cluster,
            policy,
            |c| Arc::new(Controller::new(&c.adaptive_concurrency, c.caps.max_requests, 1, Instant::now())),
            0,
        )
    }

    /// Worker `worker`'s limiter, its adaptive limit being its part of the one `controller`
    /// gives (called only when the adaptive limit is on).
    pub fn with_controller(
        cluster: &Cluster,
        policy: Policy,
        controller: impl FnOnce(&Cluster) -> Arc<Controller>,
        worker: usize,
    ) -> Self {
        let adaptive = policy.enabled && cluster.adaptive_concurrency.enabled;
        Self {
            policy,
            max_requests: cluster.caps.max_requests.max(1),
            max_pending: cluster.caps.max_pending,
            in_flight: Cell::new(0),
            pending: Cell::new(0),
            control: adaptive.then(|| (controller(cluster), worker)),
            waiters: RefCell::new(Default::default()),
            delays: RefCell::new(std::array::from_fn(|_| {
                QueueDelay::new(policy.queue_delay_target, policy.queue_delay_interval)
            })),
            reserve: Reserve::new(adaptive && policy.first_class_reserve && policy.classes > 1),
        }
    }

    /// The queue-delay signal of class `rank`'s queue now.
    pub fn queue_delay(&self, rank: usize, now: Instant) -> Duration {
        self.delays.borrow().get(rank).map_or(Duration::ZERO, |d| d.signal(now))
    }

    fn observe_wait(&self, rank: usize, waited: Duration, now: Instant) {
        if let Some(d) = self.delays.borrow_mut().get_mut(rank) {
            d.observe(waited, now);
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    pub fn pending(&self) -> usize {
        self.pending.get()
    }

    /// The in-flight limit now: the adaptive limit, or without it the cap minus the headroom
    /// kept for the first class.
    pub fn limit(&self) -> usize {
        match &self.control {
            // This worker's part of the cluster's limit. Until the upstream's latency was first
            // measured the adaptive limit is a guess (`initial_limit`): a burst gets two
            // doublings of room above it (what slow start would reach in two windows), so that
            // a healthy upstream is not shed for it (the controller does this).
            Some((c, worker)) => c.worker_limit(*worker).min(self.max_requests),
            None => self.max_requests.saturating_sub(headroom(self.max_requests)).max(1),
        }
    }

    /// Takes the adaptive limit as measured, with this no-load latency (tests at a measured
    /// limit).
    #[cfg(test)]
    pub fn assume_measured(&self, baseline: Duration) {
        if let Some((c, _)) = &self.control {
            c.assume_measured(baseline);
        }
    }

    /// Takes the upstream's last window as `ratio` times its no-load latency (tests).
    #[cfg(test)]
    pub fn assume_ratio(&self, ratio: f64) {
        if let Some((c, _)) = &self.control {
            c.assume_ratio(ratio);
        }
    }

    /// Asks for a slot for a request of class `rank`, waiting at most until `deadline`. The flag
    /// says whether the request waited in the queue.
    pub async fn admit(self: &Rc<Self>, rank: usize, deadline: Instant) -> (Admission, bool) {
        let rank = rank.min(self.policy.classes.saturating_sub(1)).min(MAX_CLASSES - 1);
        self.reserve.arrival(rank);
        if let Some((c, worker)) = &self.control {
            c.arrival(*worker, rank);
        }
        match self.admit_now(rank) {
            Ok(decision) => (decision, false),
            Err(until) => (self.queue(rank, until.min(deadline), deadline).await, true),
        }
    }

    /// Decides without waiting, or says until when the request may wait in the queue (for rank
    /// 0 with the adaptive limit: until when it waits for a slot under the limit).
    fn admit_now(self: &Rc<Self>, rank: usize) -> Result<Admission, Instant> {
        let limit = self.limit();
        let in_flight = self.in_flight.get();
        if !self.policy.enabled {
            return Ok(if in_flight < self.max_requests {
                Admission::Admitted(self.grant())
            } else {
                Admission::Overflow
            });
        }
        let last = self.policy.classes.saturating_sub(1);
        let adaptive = self.control.is_some();
        if in_flight >= self.max_requests {
            // The hard cap: only the first class may still wait for a slot.
            if rank != 0 || self.pending.get() >= self.max_pending {
                return Ok(Admission::Overflow);
            }
            return Err(Instant::now() + Duration::from_secs(3600));
        }
        // The classes after the first leave the last free slot to the first for a moment.
        let usable = if rank == 0 { limit } else { self.reserve.others(in_flight, limit, || self.baseline()).limit };
        // A slot another worker leaves unused may be taken too: the cluster's limit has room
        // (the workers' parts only follow their demand once a window closes). The first class
        // takes any; later classes leave the last one, and any while a first-class request
        // waits at some worker.
        let room = in_flight < usable
            || self.control.as_ref().is_some_and(|(c, _)| {
                c.workers() > 1 && if rank == 0 { c.has_room() } else { c.has_room_for_later_classes() }
            });
        if room && !self.waiting_at_or_above(rank) {
            // A free slot nobody of this class or better waits for.
            if let Some(d) = self.delays.borrow_mut().get_mut(rank) {
                d.drained();
            }
            return Ok(Admission::Admitted(self.grant()));
        }
        if let Some((c, _)) = &self.control {
            // No slot under the limit: it binds (a limit that never binds is never cut).
            c.note_bound();
        }
        if rank == 0 && !adaptive {
            // The reserve above the fixed limit is the first class's.
            return Ok(Admission::Admitted(self.grant()));
        }
        if rank == last && last > 0 {
            return Ok(Admission::Shed);
        }
        if self.pending.get() >= self.max_pending {
            return Ok(Admission::Overflow);
        }
        let now = Instant::now();
        if rank == 0 {
            return Err(now + self.first_class_wait());
        }
        // This class's queue stands (its shortest wait over an interval stayed above the
        // class's threshold, and above half its wait bound: a newcomer would most likely wait
        // its bound out and be shed then): shed it now rather than later, as long as enough of
        // the class are queued already to take the class's next slots.
        let bound = self.wait_bound(rank, last);
        let threshold = (self.policy.queue_delay_target * u32::try_from(last - rank).unwrap_or(1)).max(bound / 2);
        if self.queue_delay(rank, now) > threshold && self.waiting_in(rank) >= MIN_STANDING_QUEUE {
            return Ok(Admission::ShedStanding);
        }
        Err(now + bound)
    }

    /// How long the first class waits under the adaptive limit before it may go above it.
    fn first_class_wait(&self) -> Duration {
        self.baseline().mul_f64(FIRST_CLASS_WAIT_SHARE)
    }

    fn upstream_queueing(&self) -> bool {
        self.control.as_ref().is_some_and(|(c, _)| c.queueing())
    }

    fn baseline(&self) -> Duration {
        self.control.as_ref().and_then(|(c, _)| c.baseline()).unwrap_or(DEFAULT_BASELINE)
    }

    /// How long a middle class may wait for a slot: its share of `queue_wait_factor` no-load
    /// latencies, less what being served takes now beyond one no-load latency (the last
    /// window's latency ratio), so that waiting plus being served stays within the bound the
    /// factor sets while the upstream queues too.
    fn wait_bound(&self, rank: usize, last: usize) -> Duration {
        let baseline = self.baseline();
        let share = if last <= 1 { 1.0 } else { (last - rank) as f64 / (last - 1) as f64 };
        // `max` drops a ratio that is not a number; an infinite one leaves no wait.
        let slower = self.control.as_ref().map_or(0.0, |(c, _)| c.latency_ratio() - 1.0).max(0.0);
        baseline.mul_f64((self.policy.queue_wait_factor * share - slower).max(0.0))
    }

    /// Waits in class `rank`'s queue until `until`; rank 0 then takes a slot above the limit,
    /// or at the hard cap goes on waiting until `deadline`.
    async fn queue(self: &Rc<Self>, rank: usize, until: Instant, deadline: Instant) -> Admission {
        let waiter = Rc::new(Waiter::default());
        if let Some(q) = self.waiters.borrow_mut().get_mut(rank) {
            q.push_back(Rc::clone(&waiter));
        }
        self.pending.set(self.pending.get() + 1);
        let queued = Instant::now();
        // Whatever ends the wait (grant, timeout, or the request being dropped), the guard
        // leaves the queue cleanly: a slot granted to a request that is gone is given back.
        let mut guard = QueueGuard { limiter: self, waiter: &waiter, rank, admitted: false };
        let bound_end = until;
        // A later rank kept from the last free slot by the first class's hold looks again when
        // the hold ends.
        let held = if rank == 0 {
            None
        } else {
            self.reserve.others(self.in_flight.get(), self.limit(), || self.baseline()).held_until
        };
        let mut until = held.map_or(until, |at| at.min(until));
        // A first-class waiter of a worker sharing the cluster's limit with others is told of
        // their freed slots by no one: it looks for one every `poll`.
        let shared = self.control.as_ref().filter(|(c, _)| rank == 0 && c.workers() > 1).map(|(c, _)| Arc::clone(c));
        let _first = shared.as_ref().map(|c| FirstWaiting::new(c));
        let poll = self.baseline() / FIRST_CLASS_POLLS;
        loop {
            let wake = if shared.is_some() { until.min(Instant::now() + poll) } else { until };
            let _ = crate::runtime::timeout(wake.saturating_duration_since(Instant::now()), Granted(&waiter)).await;
            let now = Instant::now();
            if waiter.granted.get() || now >= deadline {
                break;
            }
            if let Some(c) = &shared {
                if c.has_room() && self.in_flight.get() < self.max_requests {
                    // Another worker left a slot of the cluster's limit free for it.
                    if let Some(q) = self.waiters.borrow_mut().get_mut(rank) {
                        q.retain(|w| !Rc::ptr_eq(w, &waiter));
                    }
                    self.take_slot();
                    waiter.granted.set(true);
                    break;
                }
                if now < until {
                    continue;
                }
            }
            if rank != 0 {
                // A slot this waiter could take is held for the first class: look again when the
                // hold ends, within the wait bound.
                match waiter.recheck.take() {
                    Some(at) if at < bound_end => {
                        until = at;
                        continue;
                    }
                    Some(_) => until = bound_end,
                    None if now < bound_end => {
                        self.dispatch(false);
                        until = bound_end;
                    }
                    None => break,
                }
                continue;
            }
            // The first class waited long enough for a slot under the limit. One above it will
            // do, unless requests are queueing at the upstream already (it would only queue
            // there, behind others): then it stays first in line, looking again a while later.
            if !self.upstream_queueing() {
                waiter.above_limit.set(true);
                self.dispatch(false);
            }
            until = if waiter.above_limit.get() { deadline } else { (now + self.first_class_wait()).min(deadline) };
        }
        let now = Instant::now();
        self.observe_wait(rank, now.saturating_duration_since(queued), now);
        if waiter.granted.get() {
            guard.admitted = true;
            Admission::Admitted(Permit { limiter: Rc::clone(self), started: None, kind: 0 })
        } else {
            Admission::Shed
        }
    }

    fn waiting_in(&self, rank: usize) -> usize {
        self.waiters.borrow().get(rank).map_or(0, VecDeque::len)
    }

    fn waiting_at_or_above(&self, rank: usize) -> bool {
        self.waiters.borrow().iter().take(rank + 1).any(|q| !q.is_empty()) || (rank > 0 && self.first_waits_elsewhere())
    }

    /// Whether a first-class request waits at another worker sharing the cluster's limit: a
    /// free slot of the limit is left to it (it looks for one every few milliseconds).
    fn first_waits_elsewhere(&self) -> bool {
        self.control.as_ref().is_some_and(|(c, _)| {
            let here = self.waiters.borrow().first().map_or(0, VecDeque::len);
            c.first_waiting() > here
        })
    }

    fn grant(self: &Rc<Self>) -> Permit {
        self.take_slot();
        Permit { limiter: Rc::clone(self), started: None, kind: 0 }
    }

    /// One more request in flight (the adaptive limit notes the concurrency reached).
    fn take_slot(&self) {
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        if self.reserve.enabled() {
            self.reserve.taken(n, self.limit());
        }
        if let Some((c, _)) = &self.control {
            c.taken(Instant::now());
        }
    }

    /// One request fewer in flight.
    fn release_slot(&self) {
        let n = self.in_flight.get().saturating_sub(1);
        self.in_flight.set(n);
        if self.reserve.enabled() {
            self.reserve.freed(n, self.limit());
        }
        if let Some((c, _)) = &self.control {
            c.released(Instant::now());
        }
    }

    /// Gives free slots to waiters, best rank first. `freed`: a request just finished, and its
    /// slot may go to a first-class waiter even when the limit has shrunk below the requests in
    /// flight (the slot changes hands; in flight does not grow).
    fn dispatch(&self, freed: bool) {
        let limit = self.limit();
        let adaptive = self.control.is_some();
        let mut handoff = freed;
        let mut held = false;
        // A first-class request waiting at another worker sharing the limit gets the free slot
        // before this worker's later classes.
        let elsewhere = self.first_waits_elsewhere();
        let mut waiters = self.waiters.borrow_mut();
        for (rank, queue) in waiters.iter_mut().enumerate() {
            if rank > 0 && elsewhere {
                break;
            }
            while let Some(front) = queue.front() {
                let cap = match rank {
                    0 if !adaptive => self.max_requests,
                    // Above the limit by its headroom: the cluster's, when the workers share it
                    // (each worker's part's own headroom would add up across workers).
                    0 if front.above_limit.get()
                        && self.control.as_ref().is_some_and(|(c, _)| !c.within_headroom()) =>
                    {
                        limit
                    }
                    0 if front.above_limit.get() => (limit + headroom(limit)).min(self.max_requests),
                    0 if handoff => limit.max(self.in_flight.get() + 1),
                    0 => limit,
                    _ => {
                        let others = self.reserve.others(self.in_flight.get(), limit, || self.baseline());
                        if let Some(at) = others.held_until {
                            // The last free slot is the first class's for now: the front waiter
                            // looks again when the hold ends.
                            held = true;
                            front.recheck.set(Some(at));
                            if let Some(waker) = front.waker.borrow_mut().take() {
                                waker.wake();
                            }
                        }
                        others.limit
                    }
                };
                if self.in_flight.get() >= cap {
                    break;
                }
                let Some(w) = queue.pop_front() else { break };
                handoff = false;
                self.take_slot();
                w.granted.set(true);
                let waker = w.waker.borrow_mut().take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            if !queue.is_empty() && (held || self.in_flight.get() >= limit) {
                // Lower ranks cannot get a slot this rank could not.
                break;
            }
        }
    }
}

fn headroom(limit: usize) -> usize {
    (limit / 4).max(1)
}

/// A slot in flight; freeing it (drop) hands it to the next waiter.
pub struct Permit {
    limiter: Rc<Limiter>,
    started: Option<Instant>,
    /// The request's kind for the adaptive limit (its route's key, see
    /// [`super::gradient::kind_key`]).
    kind: u64,
}

impl Permit {
    /// Names the request's kind (its route's key): its latency is compared with what its own
    /// kind takes unloaded.
    pub fn set_kind(&mut self, kind: u64) {
        self.kind = kind;
    }

    /// Marks the moment the request was sent upstream.
    pub fn start(&mut self) {
        self.start_at(Instant::now());
    }

    /// [`Permit::start`] with a clock reading the caller already has.
    pub fn start_at(&mut self, now: Instant) {
        self.started = Some(now);
    }

    /// Reports a successful exchange: its upstream latency feeds the adaptive limit.
    pub fn success(&mut self) {
        if let (Some(started), Some((c, _))) = (self.started.take(), &self.limiter.control) {
            let now = Instant::now();
            c.sample_kind(now.saturating_duration_since(started), self.kind, now);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let l = &self.limiter;
        l.release_slot();
        l.dispatch(true);
    }
}

struct Granted<'a>(&'a Waiter);

impl Future for Granted<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.granted.get() || self.0.recheck.get().is_some() {
            return Poll::Ready(());
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
#[path = "limiter_tests.rs"]
mod tests;
