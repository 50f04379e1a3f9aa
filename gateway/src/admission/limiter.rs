//! Priority-class admission to one cluster, per worker.
//!
//! The cluster has an in-flight limit `L` (adaptive, see [`super::gradient`], or the fixed cap).
//! A request of class rank `r` (0 = most important, `last` = least):
//!
//! - is admitted at once when fewer than `L` requests are in flight and no request of its rank
//!   or better is waiting;
//! - rank 0 is admitted whenever the hard cap `max_requests` allows (it waits, first in line,
//!   only at the cap); its requests count against `L`, so the adaptive limit makes room for it
//!   by shrinking what the other classes get;
//! - the last rank never waits: no free slot means a fast 503 (shed);
//! - middle ranks wait for a slot at most `baseline * factor * (last - r) / (last - 1)` (the
//!   baseline being the upstream's measured no-load latency), then are shed;
//! - more than `max_pending` waiters, or `max_requests` in flight (the hard cap), means 503
//!   overflow.
//!
//! Without the adaptive limit, `L` is `max_requests` minus a reserve of `max(1, max_requests/4)`
//! that only the first class can use.
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

/// Classes supported (config validation enforces it).
pub const MAX_CLASSES: usize = 8;
/// Wait bound for middle classes before any latency was measured.
const DEFAULT_BASELINE: Duration = Duration::from_millis(20);

/// The outcome of asking for a slot.
pub enum Admission {
    Admitted(Permit),
    /// No capacity for this class now: 503 `x-gateway-reason: shed`.
    Shed,
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
}

pub struct Limiter {
    policy: Policy,
    max_requests: usize,
    max_pending: usize,
    in_flight: Cell<usize>,
    pending: Cell<usize>,
    gradient: Option<RefCell<Gradient>>,
    waiters: RefCell<[VecDeque<Rc<Waiter>>; MAX_CLASSES]>,
}

#[derive(Default)]
struct Waiter {
    granted: Cell<bool>,
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
                l.in_flight.set(l.in_flight.get().saturating_sub(1));
                l.dispatch();
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
        match &self.gradient {
            Some(g) => g.borrow().limit().min(self.max_requests),
            None => self.max_requests.saturating_sub(headroom(self.max_requests)).max(1),
        }
    }

    /// Asks for a slot for a request of class `rank`, waiting at most until `deadline`. The flag
    /// says whether the request waited in the queue.
    pub async fn admit(self: &Rc<Self>, rank: usize, deadline: Instant) -> (Admission, bool) {
        match self.admit_now(rank) {
            Ok(decision) => (decision, false),
            Err(until) => (self.queue(rank, until.min(deadline)).await, true),
        }
    }

    /// Decides without waiting, or says until when the request may wait in the queue.
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
        let rank = rank.min(self.policy.classes.saturating_sub(1)).min(MAX_CLASSES - 1);
        let last = self.policy.classes.saturating_sub(1);
        if in_flight >= self.max_requests {
            // The hard cap: only the first class may still wait for a slot.
            if rank != 0 || self.pending.get() >= self.max_pending {
                return Ok(Admission::Overflow);
            }
        } else if (in_flight < limit && !self.waiting_at_or_above(rank)) || rank == 0 {
            // A free slot nobody of this class or better waits for; the first class is only
            // held back by the hard cap (the adaptive limit then shrinks for the others).
            return Ok(Admission::Admitted(self.grant()));
        }
        if rank == last && last > 0 {
            return Ok(Admission::Shed);
        }
        if self.pending.get() >= self.max_pending {
            return Ok(Admission::Overflow);
        }
        let far = Instant::now() + Duration::from_secs(3600);
        Err(if rank == 0 { far } else { Instant::now() + self.wait_bound(rank, last) })
    }

    /// How long a middle class may wait for a slot.
    fn wait_bound(&self, rank: usize, last: usize) -> Duration {
        let baseline = self.gradient.as_ref().and_then(|g| g.borrow().baseline()).unwrap_or(DEFAULT_BASELINE);
        let share = if last <= 1 { 1.0 } else { (last - rank) as f64 / (last - 1) as f64 };
        baseline.mul_f64((self.policy.queue_wait_factor * share).max(0.0))
    }

    async fn queue(self: &Rc<Self>, rank: usize, until: Instant) -> Admission {
        let waiter = Rc::new(Waiter::default());
        if let Some(q) = self.waiters.borrow_mut().get_mut(rank) {
            q.push_back(Rc::clone(&waiter));
        }
        self.pending.set(self.pending.get() + 1);
        // Whatever ends the wait (grant, timeout, or the request being dropped), the guard
        // leaves the queue cleanly: a slot granted to a request that is gone is given back.
        let mut guard = QueueGuard { limiter: self, waiter: &waiter, rank, admitted: false };
        let left = until.saturating_duration_since(Instant::now());
        let _ = monoio::time::timeout(left, Granted(&waiter)).await;
        if waiter.granted.get() {
            guard.admitted = true;
            Admission::Admitted(Permit { limiter: Rc::clone(self), started: None })
        } else {
            Admission::Shed
        }
    }

    fn waiting_at_or_above(&self, rank: usize) -> bool {
        self.waiters.borrow().iter().take(rank + 1).any(|q| !q.is_empty())
    }

    fn grant(self: &Rc<Self>) -> Permit {
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        if let Some(g) = &self.gradient {
            g.borrow_mut().observe_in_flight(n);
        }
        Permit { limiter: Rc::clone(self), started: None }
    }

    /// Gives freed slots to waiters, best rank first.
    fn dispatch(&self) {
        let limit = self.limit();
        let mut waiters = self.waiters.borrow_mut();
        for (rank, queue) in waiters.iter_mut().enumerate() {
            let cap = if rank == 0 { self.max_requests } else { limit };
            while self.in_flight.get() < cap {
                let Some(w) = queue.pop_front() else { break };
                self.in_flight.set(self.in_flight.get() + 1);
                w.granted.set(true);
                let waker = w.waker.borrow_mut().take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            if !queue.is_empty() && self.in_flight.get() >= limit {
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
        l.in_flight.set(l.in_flight.get().saturating_sub(1));
        l.dispatch();
    }
}

struct Granted<'a>(&'a Waiter);

impl Future for Granted<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.granted.get() {
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

    fn limiter(max_requests: usize) -> Rc<Limiter> {
        Rc::new(Limiter::new(&cluster(max_requests, 8), Policy { enabled: true, classes: 4, queue_wait_factor: 1.0 }))
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
            let l =
                Rc::new(Limiter::new(&cluster(1, 8), Policy { enabled: false, classes: 4, queue_wait_factor: 1.0 }));
            let held = l.admit(3, far()).await.0;
            assert!(matches!(held, Admission::Admitted(_)));
            assert!(matches!(l.admit(0, far()).await.0, Admission::Overflow));
        });
    }
}
