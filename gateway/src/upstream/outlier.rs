//! Passive outlier detection, per worker (shared-nothing: each worker ejects endpoints on the
//! outcomes it saw itself, with no cross-worker coordination; with N workers an endpoint that
//! fails every request is ejected by each worker after its own `consecutive_*` failures).
//!
//! Rules, per endpoint:
//! - a response below 500 resets both counters;
//! - a 5xx response adds one to `consecutive_5xx` and resets the gateway-error counter;
//! - a gateway error (connect failure, reset, timeout, protocol error) adds one to both
//!   counters (the client sees a 502 or 504 for it, so it is a 5xx too);
//! - reaching a non-zero threshold ejects the endpoint for `base_ejection_time x times
//!   ejected`, capped at `max_ejection_time`, unless `floor(endpoints x max_ejection_percent /
//!   100)` endpoints of the cluster are ejected already. So a one-endpoint cluster (and, at the
//!   default 50%, one endpoint of two) is never ejected passively: ejecting it would turn
//!   every request into a 503 even while the endpoint still serves some requests; active
//!   health checks decide that case instead;
//! - an ejected endpoint returns when its time is up, with its counters cleared;
//! - before any rule trips, an endpoint whose last try ended in a gateway error is *suspect*
//!   for `base_ejection_time` after that error, or until it answers: the balancers pass it over
//!   for a request that would not be retried after that kind of failure, when an eligible
//!   endpoint that is not suspect exists ([`OutlierState::suspicion`], `upstream::Shy`,
//!   `upstream::pick`): after a failure before any response (connect failure, reset, timeout)
//!   a POST or a body not held; after a malformed answer, which the default policy retries for
//!   no request, every request. Requests that would be retried still go to it, and their
//!   outcomes clear or confirm the suspicion. One error costs the others nothing more, where
//!   nginx (`max_fails = 1`) takes the endpoint out for everyone;
//! - the multiplier ("times ejected") resets after a quiet period: an endpoint that stays in
//!   for `max_ejection_time` after returning starts again from `base_ejection_time`.
//!
//! A reload that changes the cluster's settings rebuilds the worker's cluster state, which
//! takes this state over by endpoint address (`ClusterState::take_over`).

use std::cell::Cell;
use std::time::{Duration, Instant};

use gateway_config::OutlierDetection;

use super::Outcome;

pub use crate::stats::metrics::EjectReason;

/// One endpoint's outlier state on one worker.
#[derive(Debug, Default)]
pub struct OutlierState {
    consecutive_5xx: Cell<u32>,
    consecutive_gateway: Cell<u32>,
    ejected_until: Cell<Option<Instant>>,
    times_ejected: Cell<u32>,
    returned_at: Cell<Option<Instant>>,
    /// When the last gateway error of the current streak (`consecutive_gateway` > 0) happened.
    last_gateway_error: Cell<Option<Instant>>,
    /// The last gateway error was a malformed answer (a protocol error).
    last_malformed: Cell<bool>,
}

/// Why an endpoint is suspect, if it is ([`OutlierState::suspicion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspicion {
    None,
    /// Its last try failed before a response: connect failure, reset, timeout.
    Failed,
    /// Its last answer was malformed.
    Malformed,
}

/// What the cluster-level functions need of an endpoint.
pub trait Ejectable {
    fn outlier(&self) -> &OutlierState;
}

impl<T: Ejectable> Ejectable for std::rc::Rc<T> {
    fn outlier(&self) -> &OutlierState {
        (**self).outlier()
    }
}

/// A finished ejection decision, for metrics and the admin port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ejection {
    pub reason: EjectReason,
    pub until: Instant,
    pub times: u32,
    pub duration: Duration,
}

impl OutlierState {
    /// Whether the endpoint is ejected (until [`expire`] returns it).
    #[inline]
    pub fn is_ejected(&self) -> bool {
        self.ejected_until.get().is_some()
    }

    /// Ends an ejection without a return (the endpoint left its cluster).
    pub fn forget_ejection(&self) {
        self.ejected_until.set(None);
    }

    pub fn ejected_until(&self) -> Option<Instant> {
        self.ejected_until.get()
    }

    /// How many times the endpoint was ejected (the multiplier of the next ejection).
    pub fn times_ejected(&self) -> u32 {
        self.times_ejected.get()
    }

    /// Takes over `old`'s counters, ejection and multiplier (the same endpoint in a cluster
    /// state rebuilt by a reload).
    pub fn take_over(&self, old: &OutlierState) {
        self.consecutive_5xx.set(old.consecutive_5xx.get());
        self.consecutive_gateway.set(old.consecutive_gateway.get());
        self.ejected_until.set(old.ejected_until.get());
        self.times_ejected.set(old.times_ejected.get());
        self.returned_at.set(old.returned_at.get());
        self.last_gateway_error.set(old.last_gateway_error.get());
        self.last_malformed.set(old.last_malformed.get());
    }

    /// Whether the endpoint's last try ended in a gateway error (connect failure, reset,
    /// timeout, protocol error) and nothing has answered since: the cheap half of
    /// [`Self::suspicion`], with no clock read.
    #[inline]
    pub fn in_error_streak(&self) -> bool {
        self.consecutive_gateway.get() > 0
    }

    /// Whether the endpoint is suspect at `now`, and why: its last try ended in a gateway error
    /// less than `window` (the cluster's `base_ejection_time`) ago, and no response came since.
    pub fn suspicion(&self, now: Instant, window: Duration) -> Suspicion {
        let recent = self.last_gateway_error.get().is_some_and(|t| now.saturating_duration_since(t) < window);
        match (self.in_error_streak() && recent, self.last_malformed.get()) {
            (false, _) => Suspicion::None,
            (true, false) => Suspicion::Failed,
            (true, true) => Suspicion::Malformed,
        }
    }

    /// Counts `outcome`; returns the rule it trips, if any. Outcomes of requests that were in
    /// flight when the endpoint was ejected are ignored.
    fn observe(&self, outcome: Outcome, s: &OutlierDetection) -> Option<EjectReason> {
        if self.is_ejected() {
            return None;
        }
        let bump = |c: &Cell<u32>| {
            c.set(c.get().saturating_add(1));
            c.get()
        };
        match outcome {
            Outcome::Response(status) if status < 500 => {
                self.consecutive_5xx.set(0);
                self.consecutive_gateway.set(0);
                None
            }
            Outcome::Response(_) => {
                self.consecutive_gateway.set(0);
                let n = bump(&self.consecutive_5xx);
                (s.consecutive_5xx != 0 && n >= s.consecutive_5xx).then_some(EjectReason::Consecutive5xx)
            }
            _ => {
                self.last_gateway_error.set(Some(Instant::now()));
                self.last_malformed.set(outcome == Outcome::Protocol);
                let g = bump(&self.consecutive_gateway);
                let n = bump(&self.consecutive_5xx);
                if s.consecutive_gateway_errors != 0 && g >= s.consecutive_gateway_errors {
                    Some(EjectReason::ConsecutiveGatewayErrors)
                } else {
                    (s.consecutive_5xx != 0 && n >= s.consecutive_5xx).then_some(EjectReason::Consecutive5xx)
                }
            }
        }
    }

    fn eject(&self, reason: EjectReason, now: Instant, s: &OutlierDetection) -> Ejection {
        if self.returned_at.get().is_some_and(|t| now.saturating_duration_since(t) >= s.max_ejection_time) {
            self.times_ejected.set(0);
        }
        let times = self.times_ejected.get().saturating_add(1);
        self.times_ejected.set(times);
        let duration = s.base_ejection_time.saturating_mul(times).min(s.max_ejection_time);
        let until = now + duration;
        self.ejected_until.set(Some(until));
        self.consecutive_5xx.set(0);
        self.consecutive_gateway.set(0);
        Ejection { reason, until, times, duration }
    }
}

/// Records `outcome` of a try on endpoint `index`; ejects it when a rule trips and the
/// cluster's `max_ejection_percent` allows. `ejected` is the cluster's count of ejected
/// endpoints on this worker.
pub fn record<E: Ejectable>(
    endpoints: &[E],
    index: usize,
    outcome: Outcome,
    s: &OutlierDetection,
    ejected: &Cell<usize>,
) -> Option<Ejection> {
    if !s.enabled {
        return None;
    }
    let state = endpoints.get(index)?.outlier();
    let reason = state.observe(outcome, s)?;
    let allowed = endpoints.len() * usize::from(s.max_ejection_percent) / 100;
    if ejected.get() >= allowed {
        return None;
    }
    ejected.set(ejected.get() + 1);
    Some(state.eject(reason, Instant::now(), s))
}

/// Returns endpoints whose ejection time is up; calls `returned(index)` for each. Cheap when
/// nothing is ejected (no clock read).
pub fn expire<E: Ejectable>(endpoints: &[E], ejected: &Cell<usize>, mut returned: impl FnMut(usize)) {
    if ejected.get() == 0 {
        return;
    }
    let now = Instant::now();
    for (i, e) in endpoints.iter().enumerate() {
        let o = e.outlier();
        if o.ejected_until.get().is_some_and(|t| t <= now) {
            o.ejected_until.set(None);
            o.returned_at.set(Some(now));
            ejected.set(ejected.get().saturating_sub(1));
            returned(i);
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    struct Ep(OutlierState);
    impl Ejectable for Ep {
        fn outlier(&self) -> &OutlierState {
            &self.0
        }
    }

    fn eps(n: usize) -> Vec<Ep> {
        (0..n).map(|_| Ep(OutlierState::default())).collect()
    }

    fn settings(c5xx: u32, gw: u32, pct: u8) -> OutlierDetection {
        OutlierDetection {
            enabled: true,
            consecutive_5xx: c5xx,
            consecutive_gateway_errors: gw,
            base_ejection_time: Duration::from_millis(100),
            max_ejection_time: Duration::from_millis(250),
            max_ejection_percent: pct,
        }
    }

    #[test]
    fn consecutive_5xx_ejects_and_a_success_resets() {
        let (e, s, n) = (eps(4), settings(3, 0, 50), Cell::new(0));
        for _ in 0..2 {
            assert_eq!(record(&e, 1, Outcome::Response(503), &s, &n), None);
        }
        assert_eq!(record(&e, 1, Outcome::Response(200), &s, &n), None);
        assert_eq!(record(&e, 1, Outcome::Response(500), &s, &n), None);
        assert_eq!(record(&e, 1, Outcome::Response(502), &s, &n), None);
        let ej = record(&e, 1, Outcome::Reset, &s, &n).unwrap();
        assert_eq!((ej.reason, ej.times, ej.duration), (EjectReason::Consecutive5xx, 1, Duration::from_millis(100)));
        assert!(e[1].0.is_ejected() && n.get() == 1);
        // While ejected, late outcomes are ignored.
        assert_eq!(record(&e, 1, Outcome::Response(500), &s, &n), None);
    }

    #[test]
    fn gateway_errors_and_disabled_rules() {
        let (e, n) = (eps(4), Cell::new(0));
        let s = settings(0, 2, 50);
        assert_eq!(record(&e, 0, Outcome::ConnectFailure, &s, &n), None);
        assert_eq!(record(&e, 0, Outcome::Timeout, &s, &n).unwrap().reason, EjectReason::ConsecutiveGatewayErrors);
        // 5xx responses alone never trip a zero consecutive_5xx.
        assert!((0..100).all(|_| record(&e, 2, Outcome::Response(500), &s, &n).is_none()));
        let off = OutlierDetection { enabled: false, ..settings(1, 1, 100) };
        assert!(record(&e, 3, Outcome::Reset, &off, &n).is_none());
    }

    #[test]
    fn max_ejection_percent_caps_ejections() {
        let (e, s, n) = (eps(5), settings(1, 1, 40), Cell::new(0));
        // floor(5 x 40%) = 2.
        assert!(record(&e, 0, Outcome::Reset, &s, &n).is_some());
        assert!(record(&e, 1, Outcome::Reset, &s, &n).is_some());
        assert!(record(&e, 2, Outcome::Reset, &s, &n).is_none());
        assert!(!e[2].0.is_ejected());
        // One endpoint is never ejected passively, even at 99%.
        let (one, m) = (eps(1), Cell::new(0));
        assert!((0..10).all(|_| record(&one, 0, Outcome::Reset, &settings(1, 1, 99), &m).is_none()));
        // 100% may eject all.
        assert!(record(&one, 0, Outcome::Reset, &settings(1, 1, 100), &m).is_some());
    }

    #[test]
    fn ejections_expire_and_grow_up_to_the_cap() {
        let (e, s, n) = (eps(2), settings(1, 1, 100), Cell::new(0));
        let first = record(&e, 0, Outcome::Reset, &s, &n).unwrap();
        expire(&e, &n, |_| panic!("not yet"));
        std::thread::sleep(first.duration);
        let mut back = Vec::new();
        expire(&e, &n, |i| back.push(i));
        assert_eq!((back, n.get(), e[0].0.is_ejected()), (vec![0], 0, false));
        let second = record(&e, 0, Outcome::Reset, &s, &n).unwrap();
        assert_eq!((second.times, second.duration), (2, Duration::from_millis(200)));
        e[0].0.ejected_until.set(Some(Instant::now()));
        expire(&e, &n, |_| {});
        assert_eq!(record(&e, 0, Outcome::Reset, &s, &n).unwrap().duration, Duration::from_millis(250));
        // After a quiet period as long as max_ejection_time, the multiplier starts again.
        e[0].0.ejected_until.set(Some(Instant::now()));
        expire(&e, &n, |_| {});
        e[0].0.returned_at.set(Some(Instant::now() - Duration::from_millis(300)));
        assert_eq!(record(&e, 0, Outcome::Reset, &s, &n).unwrap().times, 1);
    }
}
