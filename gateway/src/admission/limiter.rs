//! Priority-class admission to one cluster, per worker.
//!
//! The cluster has an in-flight limit `L` (adaptive, see [`super::gradient`], or the fixed cap).
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
//!   baseline being the upstream's measured no-load latency), then are shed; and when their own
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
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use gateway_config::Cluster;

use super::gradient::Gradient;
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
    gradient: Option<RefCell<Gradient>>,
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
    pub fn new(cluster: &Cluster, policy: Policy) -> Self {
        let adaptive = policy.enabled && cluster.adaptive_concurrency.enabled;
        Self {
            policy,
            max_requests: cluster.caps.max_requests.max(1),
            max_pending: cluster.caps.max_pending,
            in_flight: Cell::new(0),
            pending: Cell::new(0),
            gradient: adaptive.then(|| {
                RefCell::new(Gradient::new(&cluster.adaptive_concurrency, cluster.caps.max_requests, Instant::now()))
            }),
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
        let fixed = self.max_requests.saturating_sub(headroom(self.max_requests)).max(1);
        match &self.gradient {
            Some(g) => {
                let g = g.borrow();
                // Until the upstream's latency was first measured the adaptive limit is a guess
                // (`initial_limit`): a burst gets two doublings of room above it (what slow start
                // would reach in two windows), so that a healthy upstream is not shed for it.
                if g.measured() {
                    g.limit().min(self.max_requests)
                } else {
                    g.limit().saturating_mul(UNVALIDATED_ROOM).min(fixed)
                }
            }
            None => fixed,
        }
    }

    /// Asks for a slot for a request of class `rank`, waiting at most until `deadline`. The flag
    /// says whether the request waited in the queue.
    pub async fn admit(self: &Rc<Self>, rank: usize, deadline: Instant) -> (Admission, bool) {
        let rank = rank.min(self.policy.classes.saturating_sub(1)).min(MAX_CLASSES - 1);
        self.reserve.arrival(rank);
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
        let adaptive = self.gradient.is_some();
        if in_flight >= self.max_requests {
            // The hard cap: only the first class may still wait for a slot.
            if rank != 0 || self.pending.get() >= self.max_pending {
                return Ok(Admission::Overflow);
            }
            return Err(Instant::now() + Duration::from_secs(3600));
        }
        // The classes after the first leave the last free slot to the first for a moment.
        let usable = if rank == 0 { limit } else { self.reserve.others(in_flight, limit, || self.baseline()).limit };
        if in_flight < usable && !self.waiting_at_or_above(rank) {
            // A free slot nobody of this class or better waits for.
            if let Some(d) = self.delays.borrow_mut().get_mut(rank) {
                d.drained();
            }
            return Ok(Admission::Admitted(self.grant()));
        }
        if let Some(g) = &self.gradient {
            // No slot under the limit: it binds (a limit that never binds is never cut).
            g.borrow_mut().note_bound();
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
        self.gradient.as_ref().is_some_and(|g| g.borrow().queueing())
    }

    fn baseline(&self) -> Duration {
        self.gradient.as_ref().and_then(|g| g.borrow().baseline()).unwrap_or(DEFAULT_BASELINE)
    }

    /// How long a middle class may wait for a slot.
    fn wait_bound(&self, rank: usize, last: usize) -> Duration {
        let baseline = self.baseline();
        let share = if last <= 1 { 1.0 } else { (last - rank) as f64 / (last - 1) as f64 };
        baseline.mul_f64((self.policy.queue_wait_factor * share).max(0.0))
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
        loop {
            let _ = monoio::time::timeout(until.saturating_duration_since(Instant::now()), Granted(&waiter)).await;
            let now = Instant::now();
            if waiter.granted.get() || now >= deadline {
                break;
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
            Admission::Admitted(Permit { limiter: Rc::clone(self), started: None })
        } else {
            Admission::Shed
        }
    }

    fn waiting_in(&self, rank: usize) -> usize {
        self.waiters.borrow().get(rank).map_or(0, VecDeque::len)
    }

    fn waiting_at_or_above(&self, rank: usize) -> bool {
        self.waiters.borrow().iter().take(rank + 1).any(|q| !q.is_empty())
    }

    fn grant(self: &Rc<Self>) -> Permit {
        self.take_slot();
        Permit { limiter: Rc::clone(self), started: None }
    }

    /// One more request in flight (the adaptive limit notes the concurrency reached).
    fn take_slot(&self) {
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        if self.reserve.enabled() {
            self.reserve.taken(n, self.limit());
        }
        if let Some(g) = &self.gradient {
            let mut g = g.borrow_mut();
            g.observe_in_flight(n);
            g.set_in_flight(n, Instant::now());
        }
    }

    /// One request fewer in flight.
    fn release_slot(&self) {
        let n = self.in_flight.get().saturating_sub(1);
        self.in_flight.set(n);
        if self.reserve.enabled() {
            self.reserve.freed(n, self.limit());
        }
        if let Some(g) = &self.gradient {
            g.borrow_mut().set_in_flight(n, Instant::now());
        }
    }

    /// Gives free slots to waiters, best rank first. `freed`: a request just finished, and its
    /// slot may go to a first-class waiter even when the limit has shrunk below the requests in
    /// flight (the slot changes hands; in flight does not grow).
    fn dispatch(&self, freed: bool) {
        let limit = self.limit();
        let adaptive = self.gradient.is_some();
        let mut handoff = freed;
        let mut held = false;
        let mut waiters = self.waiters.borrow_mut();
        for (rank, queue) in waiters.iter_mut().enumerate() {
            while let Some(front) = queue.front() {
                let cap = match rank {
                    0 if !adaptive => self.max_requests,
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
}

impl Permit {
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
        if let (Some(started), Some(g)) = (self.started.take(), &self.limiter.gradient) {
            let now = Instant::now();
            g.borrow_mut().sample(now.saturating_duration_since(started), now);
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
mod tests {
    use super::*;
    use gateway_config::{AdaptiveConcurrency, Caps, PoolSettings};

    fn cluster(max_requests: usize, max_pending: usize) -> Cluster {
        Cluster {
            name: "c".into(),
            endpoints: Vec::new(),
            configured: Vec::new(),
            dns_refresh: None,
            balancer: gateway_config::Balancer::P2c,
            pool: PoolSettings { max_idle_per_endpoint: 1, idle_timeout: Duration::from_secs(1) },
            connect_timeout: Duration::from_secs(1),
            caps: Caps { max_connections: 10, max_pending, max_requests, max_retries: 1 },
            retry_budget: gateway_config::RetryBudget { percent: 20.0, min_concurrent: 1 },
            adaptive_concurrency: AdaptiveConcurrency {
                enabled: false,
                initial_limit: 1,
                min_limit: 1,
                tolerance: 0.05,
                probe_interval: Duration::from_secs(10),
            },
            protocol: gateway_config::UpstreamProtocol::Http1,
            tls: None,
            health_check: None,
            outlier_detection: Default::default(),
            all_unhealthy: gateway_config::AllUnhealthy::Fail,
            hash_key: None,
        }
    }

    fn policy(enabled: bool) -> Policy {
        Policy {
            enabled,
            classes: 4,
            queue_wait_factor: 1.0,
            first_class_reserve: true,
            queue_delay_target: Duration::from_millis(5),
            queue_delay_interval: Duration::from_millis(100),
        }
    }

    /// Adaptive limit 2 (its initial value), taken as measured (a no-load latency of 20 ms),
    /// hard cap 4.
    fn adaptive() -> Rc<Limiter> {
        let mut c = cluster(4, 8);
        c.adaptive_concurrency.enabled = true;
        c.adaptive_concurrency.initial_limit = 2;
        let l = Rc::new(Limiter::new(&c, policy(true)));
        if let Some(g) = &l.gradient {
            g.borrow_mut().assume_measured(DEFAULT_BASELINE);
        }
        l
    }

    #[test]
    fn a_limit_not_yet_measured_gives_a_burst_room() {
        let mut c = cluster(100, 8);
        c.adaptive_concurrency.enabled = true;
        c.adaptive_concurrency.initial_limit = 16;
        let l = Rc::new(Limiter::new(&c, policy(true)));
        assert_eq!(l.limit(), 64, "two doublings above initial_limit before any latency was measured");
        l.gradient.as_ref().unwrap().borrow_mut().assume_measured(DEFAULT_BASELINE);
        assert_eq!(l.limit(), 16);
        c.caps.max_requests = 40;
        let small = Rc::new(Limiter::new(&c, policy(true)));
        assert_eq!(small.limit(), 30, "never above the fixed limit (the cap less the first class's reserve)");
    }

    fn admitted(a: (Admission, bool)) -> Permit {
        match a.0 {
            Admission::Admitted(p) => p,
            _ => panic!("not admitted"),
        }
    }

    fn limiter(max_requests: usize) -> Rc<Limiter> {
        Rc::new(Limiter::new(&cluster(max_requests, 8), policy(true)))
    }

    fn run<F: Future>(f: F) -> F::Output {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        rt.block_on(f)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    #[test]
    fn lower_classes_are_shed_first_and_the_first_class_uses_the_headroom() {
        run(async {
            // Cap 8: limit 6, the rest reserved for the first class.
            let l = limiter(8);
            assert_eq!(l.limit(), 6);
            let mut held = Vec::new();
            for _ in 0..6 {
                match l.admit(3, far()).await.0 {
                    Admission::Admitted(p) => held.push(p),
                    _ => panic!("below the limit every class is admitted"),
                }
            }
            assert!(matches!(l.admit(3, far()).await.0, Admission::Shed), "last class never waits");
            let (normal, waited) = l.admit(2, far()).await;
            assert!(matches!(normal, Admission::Shed) && waited, "a middle class waits briefly, then is shed");
            assert!(matches!(l.admit(0, far()).await.0, Admission::Admitted(_)), "first class on the headroom");
        });
    }

    #[test]
    fn a_freed_slot_goes_to_the_best_waiter_and_overflow_beyond_the_cap() {
        run(async {
            let l = limiter(2); // limit 1, headroom 1
            let first = match l.admit(1, far()).await.0 {
                Admission::Admitted(p) => p,
                _ => panic!("admitted"),
            };
            let second = match l.admit(0, far()).await.0 {
                Admission::Admitted(p) => p,
                _ => panic!("first class on the headroom"),
            };
            assert_eq!(l.in_flight(), 2);
            assert!(matches!(l.admit(1, far()).await.0, Admission::Overflow), "hard cap");
            let l2 = Rc::clone(&l);
            let waiter = monoio::spawn(async move { matches!(l2.admit(0, far()).await.0, Admission::Admitted(_)) });
            monoio::time::sleep(Duration::from_millis(5)).await;
            assert_eq!(l.pending(), 1);
            drop(first);
            assert!(waiter.await, "the waiter got the freed slot");
            assert_eq!(l.in_flight(), 1, "its permit was dropped again by the task");
            drop(second);
            assert_eq!(l.in_flight(), 0);
        });
    }

    #[test]
    fn a_waiter_that_goes_away_gives_its_slot_back() {
        run(async {
            let l = limiter(2);
            let a = match l.admit(1, far()).await.0 {
                Admission::Admitted(p) => p,
                _ => panic!("admitted"),
            };
            let b = match l.admit(0, far()).await.0 {
                Admission::Admitted(p) => p,
                _ => panic!("admitted"),
            };
            // A first-class waiter that is cancelled (its request dropped) while queued.
            let l2 = Rc::clone(&l);
            let gone = monoio::time::timeout(Duration::from_millis(10), async move { l2.admit(0, far()).await }).await;
            assert!(gone.is_err());
            assert_eq!(l.pending(), 0, "left the queue");
            drop(a);
            drop(b);
            assert_eq!(l.in_flight(), 0, "no slot leaked");
        });
    }

    #[test]
    fn with_classes_off_only_the_cap_applies() {
        run(async {
            let l = Rc::new(Limiter::new(&cluster(1, 8), policy(false)));
            let held = l.admit(3, far()).await.0;
            assert!(matches!(held, Admission::Admitted(_)));
            assert!(matches!(l.admit(0, far()).await.0, Admission::Overflow));
        });
    }

    #[test]
    fn the_last_free_slot_waits_a_moment_for_the_first_class_then_goes_to_anyone() {
        run(async {
            let mut c = cluster(8, 8);
            c.adaptive_concurrency.enabled = true;
            c.adaptive_concurrency.initial_limit = 4;
            let l = Rc::new(Limiter::new(&c, policy(true)));
            l.gradient.as_ref().unwrap().borrow_mut().assume_measured(Duration::from_millis(200));
            // Half the arrivals are first class: the hold is 200 ms x min(0.5, 1/4) = 50 ms.
            for i in 0..640 {
                l.reserve.arrival(if i % 2 == 0 { 0 } else { 2 });
            }
            let mut full = Vec::new();
            for _ in 0..4 {
                full.push(admitted(l.admit(2, far()).await));
            }
            drop(full.pop());
            assert_eq!(l.in_flight(), 3);
            assert!(matches!(l.admit(3, far()).await.0, Admission::Shed), "the held slot is not the last class's");
            let critical = admitted(l.admit(0, far()).await);
            assert_eq!(l.in_flight(), 4, "the first class took the held slot at once");
            drop(critical);
            // No first-class request comes: a middle class takes the slot when the hold ends,
            // long before its own wait bound (200 ms).
            let asked = Instant::now();
            let normal = admitted(l.admit(1, far()).await);
            assert!(asked.elapsed() >= Duration::from_millis(45), "{:?}", asked.elapsed());
            assert_eq!(l.in_flight(), 4);
            // Two slots free: nothing is held.
            drop(normal);
            drop(full.pop());
            let _a = admitted(l.admit(3, far()).await);
            assert_eq!(l.in_flight(), 3);
        });
    }

    #[test]
    fn the_first_class_waits_first_in_line_at_the_adaptive_limit_and_takes_the_next_slot() {
        run(async {
            let l = adaptive();
            assert_eq!(l.limit(), 2);
            let a = admitted(l.admit(2, far()).await);
            let b = admitted(l.admit(2, far()).await);
            // A middle class queues first, then the first class arrives: it goes ahead.
            let l1 = Rc::clone(&l);
            let normal = monoio::spawn(async move { matches!(l1.admit(2, far()).await.0, Admission::Admitted(_)) });
            let l0 = Rc::clone(&l);
            let critical = monoio::spawn(async move {
                let p = admitted(l0.admit(0, far()).await);
                let in_flight = l0.in_flight();
                drop(p);
                in_flight
            });
            monoio::time::sleep(Duration::from_millis(2)).await;
            assert_eq!((l.pending(), l.in_flight()), (2, 2), "both wait at the limit");
            drop(a);
            assert_eq!(critical.await, 2, "the freed slot went to the first class, nothing above the limit");
            assert!(normal.await, "and the next one to the middle class");
            drop(b);
            assert_eq!((l.in_flight(), l.pending()), (0, 0));
        });
    }

    #[test]
    fn the_first_class_goes_a_little_above_the_adaptive_limit_after_a_short_wait() {
        run(async {
            let l = adaptive();
            let held: Vec<Permit> = vec![admitted(l.admit(2, far()).await), admitted(l.admit(2, far()).await)];
            let started = Instant::now();
            // One no-load latency (20 ms).
            let c1 = admitted(l.admit(0, far()).await);
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(10) && waited < Duration::from_millis(500), "{waited:?}");
            assert_eq!(l.in_flight(), 3);
            // At most max(1, L/4) above the limit: the next one waits until its deadline.
            let soon = Instant::now() + Duration::from_millis(30);
            let (decision, waited) = l.admit(0, soon).await;
            assert!(matches!(decision, Admission::Shed) && waited);
            assert!(Instant::now() >= soon);
            drop((held, c1));
            assert_eq!((l.in_flight(), l.pending()), (0, 0));
        });
    }

    #[test]
    fn a_standing_queue_sheds_a_middle_class_on_arrival_while_others_wait() {
        run(async {
            let l = limiter(2); // limit 1; class 2 of 4 waits up to 10 ms (no baseline yet)
            let held = admitted(l.admit(1, far()).await);
            // Class 2 waiters time out after 10 ms, over and over: their queue stands.
            let mut fast = 0;
            for _ in 0..16 {
                let waiters: Vec<_> = (0..MIN_STANDING_QUEUE)
                    .map(|_| {
                        let l2 = Rc::clone(&l);
                        monoio::spawn(async move { l2.admit(2, far()).await })
                    })
                    .collect();
                monoio::time::sleep(Duration::from_millis(1)).await;
                let started = Instant::now();
                let (decision, waited) = l.admit(2, far()).await;
                assert!(matches!(decision, Admission::Shed | Admission::ShedStanding));
                assert_eq!(matches!(decision, Admission::ShedStanding), !waited);
                if !waited && started.elapsed() < Duration::from_millis(2) {
                    fast += 1;
                }
                for w in waiters {
                    assert!(matches!(w.await.0, Admission::Shed));
                }
            }
            assert!(
                l.queue_delay(2, Instant::now()) >= Duration::from_millis(9),
                "{:?}",
                l.queue_delay(2, Instant::now())
            );
            assert!(fast >= 4, "shed on arrival once the queue stood for an interval: {fast}");
            // Too few queued: a newcomer joins the queue rather than leave slots to lower classes.
            let (_, waited) = l.admit(2, far()).await;
            assert!(waited);
            // The class above has its own queue and its own signal.
            assert_eq!(l.queue_delay(1, Instant::now()), Duration::ZERO);
            drop(held);
        });
    }
}
