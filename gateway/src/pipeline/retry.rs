//! Retries of a failed try: which failures are retried (the route's `retry_on`), how many
//! (`num_retries`), whether the request can be sent again (a try the upstream never saw, or an
//! idempotent method; body absent or held whole), within the cluster's retry budget, after a
//! full-jitter backoff, and only while the request's deadline leaves time for another try.

use std::time::Duration;

use gateway_config::RetryPolicy;
use monoio::time::Instant;

use crate::upstream::trytime::HeadLatency;
use crate::upstream::{ClusterState, RetrySlot, Shy};
use crate::worker::Worker;

/// Why a try failed, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub(crate) enum Failure {
    /// Nothing was sent: the connection could not be established.
    ConnectFailure,
    /// An HTTP/2 upstream refused the stream: not processed.
    RefusedStream,
    /// The connection closed or reset before a response head, or the per-try timeout expired.
    Reset,
    /// The response was malformed or refused (the gateway answers 502 for it).
    Protocol,
    /// A response head with this status arrived; `shed`: the upstream marked it as load
    /// shedding (`x-gateway-reason: shed`), which is never retried.
    Status { status: u16, shed: bool },
}

/// A try shorter than this is not worth starting: the deadline is as good as expired.
const MIN_TRY: Duration = Duration::from_millis(1);

/// One request's retry state.
pub(crate) struct Retries<'a> {
    policy: &'a RetryPolicy,
    /// Retries made so far.
    done: u32,
    /// The method is idempotent (RFC 9110 §9.2.2).
    idempotent: bool,
    /// The request can be sent again after it went out (no body, or the body held whole).
    resendable: bool,
    /// What the last failed try sent of a streamed body is in memory: sent again by the next
    /// (`super::replay`).
    replayable: bool,
    /// The budget slot of the retry in progress.
    slot: Option<RetrySlot>,
}

impl<'a> Retries<'a> {
    pub fn new(policy: &'a RetryPolicy, idempotent: bool, resendable: bool) -> Self {
        Self { policy, done: 0, idempotent, resendable, replayable: false, slot: None }
    }

    /// The request body is held whole: the request can be sent again after it went out.
    pub fn set_resendable(&mut self) {
        self.resendable = true;
    }

    /// Whether, after a failed try, all that it sent of a streamed body is in memory, so that
    /// the request can be sent again (`super::replay`).
    pub fn set_replayable(&mut self, replayable: bool) {
        self.replayable = replayable;
    }

    /// The request can be sent again after it went out (its body absent, held whole, or kept
    /// as the last try sent it).
    pub fn resendable(&self) -> bool {
        self.resendable || self.replayable
    }

    /// Whether a refused stream can be retried under this policy (any method).
    pub fn refused_stream_possible(&self) -> bool {
        self.policy.num_retries > 0 && self.policy.retry_on.covers_refused_stream()
    }

    /// Whether a retry after the request went out can happen for this request: only then is a
    /// body worth holding (skips the work of preparing one).
    pub fn resend_possible(&self) -> bool {
        self.idempotent && self.policy.num_retries > 0 && !self.policy.retry_on.is_empty()
    }

    /// The suspect endpoints the next try should pass over: those whose last failure it would
    /// not be retried after (`PickHints::shy`). After the request went out, only an idempotent
    /// request whose body is absent or held, with a retry left, is retried: after a reset or a
    /// timeout when the policy retries resets (the default), after a malformed answer when it
    /// retries gateway errors or 5xx (not the default).
    pub fn shy(&self) -> Shy {
        let resend = self.idempotent && self.resendable() && self.done < self.policy.num_retries;
        let on = self.policy.retry_on;
        Shy { of_failures: !(resend && on.covers_reset()), of_malformed: !(resend && on.covers_status(502, &[])) }
    }

    /// Whether a connect failure of the next try would be retried (retries left, and the
    /// policy retries connect failures), budget permitting.
    pub fn connect_retry_possible(&self) -> bool {
        self.done < self.policy.num_retries && self.policy.retry_on.covers_connect_failure()
    }

    /// The deadline of the next try, which starts `now`, within the request's (`deadline`): the
    /// route's `per_try_timeout` from now; without one, the adaptive per-try timeout from `latency`
    /// (the cluster's, on a route with timeout `route_timeout`; `None` when no other endpoint
    /// could take a retry) when a timeout of this try could be retried (see
    /// `upstream::trytime`), the cut's length returned with it; otherwise the request's
    /// deadline. The last try a request may make is never cut adaptively.
    pub fn try_deadline(
        &self,
        now: Instant,
        deadline: Instant,
        latency: Option<&HeadLatency>,
        route_timeout: Duration,
    ) -> (Instant, Option<Duration>) {
        if let Some(t) = self.policy.per_try_timeout {
            return (deadline.min(now + t), None);
        }
        // Not while a body may still be streaming from the client (a replay): the upstream cannot
        // answer before it ends.
        let cut_possible =
            self.policy.adaptive() && self.idempotent && self.resendable && self.done < self.policy.num_retries;
        match latency.filter(|_| cut_possible).and_then(|l| l.per_try(route_timeout)) {
            Some(cut) => {
                let at = now + cut;
                if at < deadline {
                    (at, Some(cut))
                } else {
                    (deadline, None)
                }
            }
            None => (deadline, None),
        }
    }

    /// Decides whether a try that failed with `failure` is retried, taking a slot in the
    /// cluster's retry budget when it is (`ejected`: outlier detection has ejected the try's
    /// endpoint, see [`ClusterState::retry_slot_after_ejection`]).
    pub fn allow(
        &mut self,
        worker: &Worker,
        cluster: &ClusterState,
        failure: Failure,
        deadline: Instant,
        ejected: bool,
    ) -> bool {
        let on = self.policy.retry_on;
        // The upstream never saw the request (no connection, or a stream it did not process,
        // RFC 9113 §8.7): sent again whatever its method, as nginx, HAProxy and Envoy do.
        // Anything else may have been acted on: only idempotent methods are sent again.
        let unseen = matches!(failure, Failure::ConnectFailure | Failure::RefusedStream);
        let covered = match failure {
            Failure::ConnectFailure => on.covers_connect_failure(),
            // Not processed, but a body streamed into the refused stream is gone unless kept.
            Failure::RefusedStream => on.covers_refused_stream() && self.resendable(),
            Failure::Reset => on.covers_reset() && self.resendable(),
            Failure::Protocol => self.resendable() && on.covers_status(502, &[]),
            Failure::Status { shed: true, .. } => false,
            Failure::Status { status, shed: false } => {
                self.resendable() && on.covers_status(status, &self.policy.retriable_status_codes)
            }
        };
        if !covered || !(self.idempotent || unseen) || self.done >= self.policy.num_retries {
            return false;
        }
        if deadline.saturating_duration_since(Instant::now()) < MIN_TRY {
            return false;
        }
        // The previous retry (if any) has ended: its slot goes back before a new one is taken.
        self.slot = None;
        let slot = if ejected { cluster.retry_slot_after_ejection() } else { cluster.retry_slot() };
        match slot {
            Some(slot) => {
                self.slot = Some(slot);
                self.done += 1;
                worker.stats.upstream_retries.inc();
                true
            }
            None => {
                worker.stats.upstream_retries_budget_exhausted.inc();
                false
            }
        }
    }

    /// Sleeps the full-jitter backoff before the current retry: uniform in
    /// `0..min(max, base * 2^k)`, never past the deadline. False when no time is left to try.
    pub async fn backoff(&self, worker: &Worker, deadline: Instant) -> bool {
        let cap = self.policy.backoff_cap(self.done.saturating_sub(1));
        let cap_us = u64::try_from(cap.as_micros()).unwrap_or(u64::MAX).max(1);
        let pause = Duration::from_micros(worker.rng.next_u64() % cap_us);
        let left = deadline.saturating_duration_since(Instant::now());
        if pause >= left {
            return false;
        }
        crate::runtime::sleep(pause).await;
        deadline.saturating_duration_since(Instant::now()) >= MIN_TRY
    }
}

/// Whether an upstream response head marks a 503 as load shedding: `x-gateway-reason: shed`
/// (this gateway upstream of another) or Envoy's `x-envoy-overloaded`.
pub(crate) fn is_shed(status: u16, headers: impl IntoIterator<Item = (impl AsRef<[u8]>, impl AsRef<[u8]>)>) -> bool {
    status == 503
        && headers.into_iter().any(|(n, v)| {
            let (n, v) = (n.as_ref(), v.as_ref());
            (n.eq_ignore_ascii_case(b"x-gateway-reason") && v.trim_ascii().eq_ignore_ascii_case(b"shed"))
                || n.eq_ignore_ascii_case(b"x-envoy-overloaded")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shed_marks() {
        assert!(is_shed(503, [("X-Gateway-Reason", " shed ")]));
        assert!(is_shed(503, [("x-envoy-overloaded", "true")]));
        assert!(!is_shed(502, [("x-gateway-reason", "shed")]));
        assert!(!is_shed(503, [("x-gateway-reason", "overflow")]));
        assert!(!is_shed(503, Vec::<(&str, &str)>::new()));
    }

    /// The default policy of a route.
    fn default_policy() -> RetryPolicy {
        let text = "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\n\
                    endpoints = [\"127.0.0.1:9\"]\n[[routes]]\nname = \"r\"\ncluster = \"c\"\n";
        let config = gateway_config::parse(text, "<t>").expect("config");
        match &config.routes.first().expect("a route").action {
            gateway_config::Action::Proxy(p) => p.retry.clone(),
            _ => panic!("a proxy route"),
        }
    }

    #[test]
    fn a_kept_body_is_sent_again_but_never_cut_adaptively() {
        let policy = default_policy();
        let latency = crate::upstream::trytime::HeadLatency::default();
        let now = Instant::now();
        let deadline = now + Duration::from_secs(15);
        // A PUT whose body streams: no retry after a reset, no adaptive cut.
        let mut r = Retries::new(&policy, true, false);
        assert!(!r.resendable());
        assert_eq!(r.try_deadline(now, deadline, Some(&latency), Duration::from_secs(15)), (deadline, None));
        // Its first try failed with all it sent kept: it can be sent again, still uncut (the
        // client may still be sending), until a try fails without a copy.
        r.set_replayable(true);
        assert!(r.resendable());
        assert_eq!(r.try_deadline(now, deadline, Some(&latency), Duration::from_secs(15)), (deadline, None));
        r.set_replayable(false);
        assert!(!r.resendable());
        // Held whole: cut adaptively (half the route timeout while the cluster warms up).
        let mut r = Retries::new(&policy, true, false);
        r.set_resendable();
        assert!(r.try_deadline(now, deadline, Some(&latency), Duration::from_secs(15)).1.is_some());
    }
}

#[cfg(test)]
mod budget_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::rc::Rc;

    use crate::admission::limiter::{Admission, Permit};
    use crate::upstream::ClusterState;

    fn cluster(extra: &str) -> Rc<ClusterState> {
        let text = format!(
            "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\n\
             endpoints = [\"127.0.0.1:9\"]\n{extra}"
        );
        let config = gateway_config::parse(&text, "<t>").unwrap();
        let policy = crate::admission::policy(&config);
        let registry = crate::upstream::health::HealthRegistry::default();
        Rc::new(ClusterState::new(&config.clusters[0], policy, &registry, std::sync::Arc::default()))
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap().block_on(f)
    }

    /// `n` requests in flight to the cluster (admitted by its limiter).
    async fn in_flight(c: &ClusterState, n: usize) -> Vec<Permit> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut permits = Vec::new();
        for _ in 0..n {
            match c.limiter.admit(0, deadline).await.0 {
                Admission::Admitted(p) => permits.push(p),
                _ => panic!("not admitted"),
            }
        }
        permits
    }

    #[test]
    fn the_floor_always_allows_min_concurrent_retries() {
        let c = cluster("retry_budget = { min_concurrent = 2 }");
        let a = c.retry_slot().expect("first");
        let b = c.retry_slot().expect("second");
        assert!(c.retry_slot().is_none(), "nothing in flight: no share above the floor");
        drop(a);
        assert!(c.retry_slot().is_some(), "a slot came back");
        drop(b);
        assert_eq!(c.retries_in_flight(), 0);
        // caps.max_retries bounds everything.
        let c = cluster("caps = { max_retries = 1 }");
        let _one = c.retry_slot().expect("one");
        assert!(c.retry_slot().is_none());
    }

    #[test]
    fn retries_away_from_an_ejected_endpoint_are_bounded_by_the_cap_only() {
        let c = cluster("retry_budget = { min_concurrent = 1 }\ncaps = { max_retries = 3 }");
        let first = c.retry_slot().expect("the floor");
        assert!(c.retry_slot().is_none(), "above the floor, nothing in flight or earned");
        let after: Vec<_> = std::iter::from_fn(|| c.retry_slot_after_ejection()).take(10).collect();
        assert_eq!(after.len(), 2, "caps.max_retries bounds them");
        drop(first);
        assert!(c.retry_slot_after_ejection().is_some());
    }

    #[test]
    fn above_the_floor_retries_need_a_share_of_requests_in_flight_and_made() {
        run(async {
            let c = cluster("retry_budget = { percent = 20, min_concurrent = 0 }");
            let _permits = in_flight(&c, 20).await;
            // 20 in flight: up to 4 retries in flight, but none earned yet.
            assert!(c.retry_slot().is_none());
            for _ in 0..10 {
                c.note_request();
            }
            // 10 requests earned 2 retries.
            let slots: Vec<_> = std::iter::from_fn(|| c.retry_slot()).take(10).collect();
            assert_eq!(slots.len(), 2);
            for _ in 0..1000 {
                c.note_request();
            }
            // Plenty earned (banked up to 10), but at most 20% of 20 in flight at once.
            let more: Vec<_> = std::iter::from_fn(|| c.retry_slot()).take(10).collect();
            assert_eq!(slots.len() + more.len(), 4);
        });
    }
}
