//! The adaptive concurrency limit of one cluster, per worker: a gradient controller on the
//! upstream's latency.
//!
//! Every window (at least 5 samples and at least one baseline latency long, or as soon as the
//! mean latency has doubled) the mean upstream
//! latency of the window is compared with the no-load baseline: `gradient = baseline * (1 +
//! tolerance) / mean`, clamped to 0.5..=1.5 (and to at most 1 when the window never used half of
//! the limit: an idle cluster gives no evidence that more would be fine). The new limit is
//! `gradient * limit + 1`, within `min_limit..=max_limit`. At equilibrium the upstream runs just
//! above the concurrency where its latency starts to rise, i.e. at its capacity plus about one.
//!
//! The baseline is the lowest window mean seen; because a loaded upstream never shows its no-load
//! latency again, it is re-measured every `probe_interval` by halving the limit for one window
//! (taking that window's mean as the new baseline, so it can also rise when the upstream got
//! slower). Pure arithmetic on explicit instants: deterministic and unit-tested.

use std::time::{Duration, Instant};

use gateway_config::AdaptiveConcurrency;

/// Minimum samples per window.
const MIN_SAMPLES: u32 = 5;
/// Minimum window length when no baseline is known yet.
const MIN_WINDOW: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
pub struct Gradient {
    settings: AdaptiveConcurrency,
    max_limit: f64,
    limit: f64,
    baseline: Option<Duration>,
    window_start: Instant,
    samples: u32,
    sum_nanos: u128,
    max_in_flight: usize,
    probing: bool,
    next_probe: Instant,
}

impl Gradient {
    pub fn new(settings: &AdaptiveConcurrency, max_limit: usize, now: Instant) -> Self {
        let max_limit = max_limit.max(1) as f64;
        Self {
            limit: (settings.initial_limit as f64).clamp(1.0, max_limit),
            settings: settings.clone(),
            max_limit,
            baseline: None,
            window_start: now,
            samples: 0,
            sum_nanos: 0,
            max_in_flight: 0,
            probing: false,
            next_probe: now + settings.probe_interval,
        }
    }

    /// The current limit (whole requests, at least `min_limit`).
    pub fn limit(&self) -> usize {
        let limit = if self.probing { (self.limit / 2.0).max(self.settings.min_limit as f64) } else { self.limit };
        limit.floor().max(1.0) as usize
    }

    /// The measured no-load latency, once known.
    pub fn baseline(&self) -> Option<Duration> {
        self.baseline
    }

    /// Notes the concurrency reached (called when a request is admitted).
    pub fn observe_in_flight(&mut self, in_flight: usize) {
        self.max_in_flight = self.max_in_flight.max(in_flight);
    }

    /// Adds one successful upstream latency sample; may close the window and move the limit.
    pub fn sample(&mut self, rtt: Duration, now: Instant) {
        self.samples += 1;
        self.sum_nanos += rtt.as_nanos();
        if self.samples < MIN_SAMPLES {
            return;
        }
        let mean = Duration::from_nanos(u64::try_from(self.sum_nanos / u128::from(self.samples)).unwrap_or(u64::MAX));
        let window = self.baseline.unwrap_or(MIN_WINDOW).max(MIN_WINDOW);
        // A window closes after one baseline latency, or at once when latency has already
        // doubled (an overload starting: shrink now rather than a window later).
        let doubled = self.baseline.is_some_and(|b| mean > b * 2) && !self.probing;
        if now.saturating_duration_since(self.window_start) < window && !doubled {
            return;
        }
        self.close_window(mean, now);
    }

    fn close_window(&mut self, mean: Duration, now: Instant) {
        if self.probing {
            // The probe window ran at half the limit: its latency is the new baseline.
            self.baseline = Some(mean);
            self.probing = false;
            self.next_probe = now + self.settings.probe_interval;
        } else {
            let baseline = *self.baseline.get_or_insert(mean);
            if mean < baseline {
                self.baseline = Some(mean);
            }
            let baseline = self.baseline.unwrap_or(baseline).as_secs_f64();
            let mean_s = mean.as_secs_f64().max(1e-9);
            let mut gradient = (baseline * (1.0 + self.settings.tolerance) / mean_s).clamp(0.5, 1.5);
            // A window that never used half the limit is no evidence that more would be fine.
            let app_limited = (self.max_in_flight as f64) < self.limit / 2.0;
            if app_limited {
                gradient = gradient.min(1.0);
            }
            let growth = if gradient >= 1.0 && !app_limited { 1.0 } else { 0.0 };
            let target = gradient * self.limit + growth;
            // Smoothed, so one noisy window moves the limit half way; a doubled latency (gradient
            // at its floor) still cuts it at once.
            let next = if gradient <= 0.5 { target } else { (self.limit + target) / 2.0 };
            self.limit = next.clamp(self.settings.min_limit as f64, self.max_limit);
            if now >= self.next_probe {
                self.probing = true;
            }
        }
        self.window_start = now;
        self.samples = 0;
        self.sum_nanos = 0;
        self.max_in_flight = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AdaptiveConcurrency {
        AdaptiveConcurrency {
            enabled: true,
            initial_limit: 16,
            min_limit: 2,
            tolerance: 0.05,
            probe_interval: Duration::from_secs(10),
        }
    }

    /// An upstream with `capacity` workers of `service` each, FIFO beyond: latency at
    /// concurrency c is `service * max(1, c / capacity)`.
    fn latency(c: usize, capacity: usize, service: Duration) -> Duration {
        service.mul_f64((c as f64 / capacity as f64).max(1.0))
    }

    /// Drives the controller with an upstream kept saturated at its limit.
    fn run(g: &mut Gradient, now: &mut Instant, capacity: usize, service: Duration, windows: usize) {
        for _ in 0..windows * 10 {
            let c = g.limit();
            g.observe_in_flight(c);
            let rtt = latency(c, capacity, service);
            *now += rtt / 5;
            g.sample(rtt, *now);
        }
    }

    #[test]
    fn converges_just_above_the_upstream_capacity_and_follows_it_down() {
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        // A no-load baseline first (as the unloaded phase of a real run gives).
        for _ in 0..10 {
            now += Duration::from_millis(10);
            g.observe_in_flight(1);
            g.sample(Duration::from_millis(40), now);
        }
        run(&mut g, &mut now, 8, Duration::from_millis(40), 200);
        let limit = g.limit();
        assert!((8..=11).contains(&limit), "limit {limit} for capacity 8");
        // Capacity halves: the limit follows.
        run(&mut g, &mut now, 4, Duration::from_millis(40), 200);
        let limit = g.limit();
        assert!((4..=7).contains(&limit), "limit {limit} for capacity 4");
        assert!(g.baseline().is_some_and(|b| b <= Duration::from_millis(45)), "{:?}", g.baseline());
    }

    #[test]
    fn an_idle_cluster_does_not_inflate_the_limit() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        for _ in 0..1000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(1);
            g.sample(Duration::from_millis(5), now);
        }
        assert_eq!(g.limit(), 16);
    }

    #[test]
    fn stays_within_min_and_max() {
        let mut now = Instant::now();
        // No probing here: a probe would (rightly) accept a uniformly slow upstream as the new baseline.
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 20, now);
        for _ in 0..2000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(g.limit());
            g.sample(Duration::from_millis(1), now);
        }
        assert!(g.limit() <= 20);
        for _ in 0..2000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(g.limit());
            g.sample(Duration::from_secs(5), now);
        }
        assert!(g.limit() >= 1 && g.limit() <= 2, "{}", g.limit());
    }

    #[test]
    fn probing_halves_the_limit_for_one_window_and_remeasures_the_baseline() {
        let mut now = Instant::now();
        let mut g = Gradient::new(&settings(), 1024, now);
        for _ in 0..10 {
            now += Duration::from_millis(10);
            g.observe_in_flight(16);
            g.sample(Duration::from_millis(10), now);
        }
        assert_eq!(g.baseline(), Some(Duration::from_millis(10)));
        // Eleven seconds later the upstream got slower for good.
        now += Duration::from_secs(11);
        let before = g.limit();
        for _ in 0..5 {
            g.observe_in_flight(before);
            g.sample(Duration::from_millis(20), now);
        }
        assert!(g.limit() < before, "probe halves the limit");
        for _ in 0..10 {
            now += Duration::from_millis(30);
            g.sample(Duration::from_millis(20), now);
        }
        assert_eq!(g.baseline(), Some(Duration::from_millis(20)), "baseline re-measured upwards");
    }
}
