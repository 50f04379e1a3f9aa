//! Picking an endpoint of a cluster on one worker, and what a try's outcome feeds back.
//!
//! Every balancer chooses among eligible endpoints only (healthy and not ejected, see the
//! parent module), away from `PickHints::avoid` when another eligible endpoint exists, and
//! away from a suspect endpoint (`outlier`) whose last failure the request would not be
//! retried after (`PickHints::shy`), when one that is not suspect is eligible. With no
//! eligible endpoint, `all_unhealthy = "panic"` picks again with every endpoint counting as
//! eligible; `"fail"` returns `None` and the forwarders answer a fast 503.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

use gateway_config::{AllUnhealthy, Balancer};

use super::balancer::{self, XorShift};
use super::{ewma, outlier, ClusterState, InFlight, Outcome, PickHints};

impl ClusterState {
    /// [`Self::pick`] with hints: a request hash for consistent hashing, and an endpoint to
    /// avoid (the one a retry just failed on) whenever another one is available.
    /// Only eligible endpoints are picked (see the module docs for `all_unhealthy`).
    pub fn pick_with(self: &Rc<Self>, rng: &XorShift, hints: PickHints) -> Option<InFlight> {
        outlier::expire(&self.endpoints, &self.ejected, |i| {
            if let Some(e) = self.endpoints.get(i) {
                e.gauge.ejected_until_ms.store(0, Relaxed);
                self.metrics.returned();
            }
        });
        let index = match self.choose(rng, hints) {
            Some(i) => i,
            None if self.settings.all_unhealthy == AllUnhealthy::Panic && !self.endpoints.is_empty() => {
                self.panic.set(true);
                let i = self.choose(rng, hints);
                self.panic.set(false);
                self.metrics.panic_pick();
                i?
            }
            None => return None,
        };
        let ep = self.endpoints.get(index)?;
        ep.outstanding.set(ep.outstanding.get() + 1);
        ep.gauge.in_flight.inc();
        let started = (self.settings.balancer == Balancer::PeakEwma).then(std::time::Instant::now);
        Some(InFlight { cluster: Rc::clone(self), index, started })
    }

    /// The balancer's choice among eligible endpoints, away from `hints.avoid` when possible;
    /// away from a suspect endpoint the request is shy of (`hints.shy`) when one that is not
    /// suspect is eligible (the least loaded of those).
    fn choose(&self, rng: &XorShift, hints: PickHints) -> Option<usize> {
        let chosen = self.choose_by_balancer(rng, hints)?;
        // No clock read unless the chosen endpoint's last try failed.
        if !hints.shy.any() || !self.endpoints.get(chosen).is_some_and(|e| e.outlier.in_error_streak()) {
            return Some(chosen);
        }
        let now = std::time::Instant::now();
        let window = self.settings.outlier_detection.base_ejection_time;
        let suspicion =
            |i: usize| self.endpoints.get(i).map_or(outlier::Suspicion::None, |e| e.outlier.suspicion(now, window));
        if !hints.shy.avoids(suspicion(chosen)) {
            return Some(chosen);
        }
        // Another endpoint that is not suspect at all (one suspect of another failure would
        // only trade one risk for another).
        let sound = balancer::least_loaded_where(&self.endpoints, rng.below(self.endpoints.len()), |i| {
            i != chosen && Some(i) != hints.avoid && suspicion(i) == outlier::Suspicion::None
        });
        if sound.is_some() {
            self.metrics.suspect_passed_over();
        }
        Some(sound.unwrap_or(chosen))
    }

    fn choose_by_balancer(&self, rng: &XorShift, hints: PickHints) -> Option<usize> {
        if let Some(avoid) = hints.avoid.filter(|_| self.endpoints.len() > 1) {
            let other = balancer::least_loaded_except(&self.endpoints, rng.below(self.endpoints.len()), avoid);
            if other.is_some() {
                return other;
            }
        }
        match self.settings.balancer {
            Balancer::P2c => balancer::p2c(&self.endpoints, rng),
            Balancer::RoundRobin => self.rr.pick(&self.endpoints),
            Balancer::PeakEwma => {
                ewma::pick(&self.endpoints, rng, std::time::Instant::now(), gateway_config::defaults::PEAK_EWMA_DECAY)
            }
            // A request without the key, or whose probe found nothing eligible: p2c.
            Balancer::Maglev => hints
                .hash
                .and_then(|h| self.maglev.as_ref()?.pick(&self.endpoints, h))
                .or_else(|| balancer::p2c(&self.endpoints, rng)),
        }
    }
}

impl ClusterState {
    /// Takes over this worker's outlier state and latency estimates (the endpoints' and the
    /// adaptive per-try timeout's) of `old`, the state of the
    /// same cluster before a reload changed its settings, for the endpoints (by address) both
    /// have: an ejected endpoint stays ejected until its time is up, whatever else changed.
    /// Ejections beyond a lowered `max_ejection_percent` run out on their own.
    pub fn take_over(&self, old: &ClusterState) {
        let keep_ejections = self.settings.outlier_detection.enabled;
        self.head_latency.take_over(&old.head_latency);
        for e in &self.endpoints {
            let Some(o) = old.endpoints.iter().find(|o| o.address == e.address) else { continue };
            e.ewma.take_over(&o.ewma);
            if !keep_ejections {
                continue;
            }
            e.outlier.take_over(&o.outlier);
            if e.outlier.is_ejected() {
                self.ejected.set(self.ejected.get() + 1);
                self.metrics.still_ejected();
                e.gauge.ejected_until_ms.store(o.gauge.ejected_until_ms.load(Relaxed), Relaxed);
            }
            e.gauge.times_ejected.store(o.gauge.times_ejected.load(Relaxed), Relaxed);
            e.gauge.suspect_until_ms.store(o.gauge.suspect_until_ms.load(Relaxed), Relaxed);
        }
    }
}

impl Drop for ClusterState {
    /// A state replaced by a reload takes its ejections out of the (name-keyed) gauge; one
    /// that shared its count with a successor (DNS) leaves it to the successor.
    fn drop(&mut self) {
        if Rc::strong_count(&self.ejected) > 1 {
            return;
        }
        for _ in 0..self.ejected.get() {
            self.metrics.returned();
        }
    }
}

impl InFlight {
    /// Records how the try ended: feeds this worker's outlier detection (which may eject the
    /// endpoint) and, with `balancer = "peak_ewma"`, the endpoint's latency estimate (a gateway
    /// error counts as at least [`ewma::ERROR_PENALTY`]). Call once per try.
    pub fn record(&self, outcome: Outcome) {
        let c = &*self.cluster;
        let Some(ep) = c.endpoints.get(self.index) else { return };
        if let Some(started) = self.started {
            let now = std::time::Instant::now();
            let mut rtt = now.saturating_duration_since(started);
            if outcome.is_gateway_error() {
                rtt = rtt.max(ewma::ERROR_PENALTY);
            }
            ep.ewma.observe(rtt, now, gateway_config::defaults::PEAK_EWMA_DECAY);
        }
        let settings = &c.settings.outlier_detection;
        if ep.retired.get() {
            return;
        }
        let ejection = outlier::record(&c.endpoints, self.index, outcome, settings, &c.ejected);
        // What the admin port shows of the suspicion (`outlier`): set on an error that leaves
        // the endpoint in, cleared by an answer or an ejection; one relaxed load otherwise.
        if ep.outlier.in_error_streak() {
            let until = unix_ms_after(settings.base_ejection_time);
            ep.gauge.suspect_until_ms.store(until, Relaxed);
        } else if ep.gauge.suspect_until_ms.load(Relaxed) != 0 {
            ep.gauge.suspect_until_ms.store(0, Relaxed);
        }
        if let Some(ejection) = ejection {
            ep.gauge.ejected_until_ms.store(unix_ms_after(ejection.duration), Relaxed);
            ep.gauge.times_ejected.store(u64::from(ejection.times), Relaxed);
            c.metrics.ejection(ejection.reason);
            tracing::warn!(
                cluster = %c.settings.name,
                endpoint = %ep.address,
                reason = ejection.reason.label(),
                seconds = ejection.duration.as_secs_f64(),
                times = ejection.times,
                "endpoint ejected by outlier detection on this worker"
            );
        }
    }
}

/// Unix milliseconds `d` from now.
fn unix_ms_after(d: std::time::Duration) -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |now| (now + d).as_millis() as u64)
}
