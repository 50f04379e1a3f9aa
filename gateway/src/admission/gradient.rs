//! The adaptive concurrency limit of one cluster, per worker: a delay-based controller on the
//! upstream's latency (TCP Vegas's idea, applied to requests in flight).
//!
//! Every window (at least 5 samples and at least one baseline latency long, or as soon as the
//! mean latency has doubled) the mean upstream latency of the window is compared with the
//! no-load baseline. By Little's law, of the requests in flight the share `baseline / mean` is
//! being served and the rest queues at the upstream; the controller keeps that queue near zero:
//!
//! - latency above `baseline * (1 + tolerance)` and at least half a request queued on average:
//!   the limit becomes what the upstream serves at
//!   once, `in flight * baseline / mean` (in flight averaged over the window's admissions; it
//!   may exceed the limit when the first class went above it); a window closes early when
//!   latency doubled, so an overload starting or the upstream's capacity falling is met within
//!   one no-load latency;
//! - latency near the baseline and the window filled the limit: the limit grows, by half in slow
//!   start (until the first cut) and by one request after that; after a probe upwards that
//!   failed at once it holds for a few windows first, longer each time in a row (4, 8, then 16
//!   windows), so that a limit sitting at the upstream's capacity spends little time above it
//!   (after other cuts, one window);
//! - a window that used less than half the limit is no evidence for it: the limit decays towards
//!   twice what was used (a limit the traffic never validated is not kept for the next burst),
//!   and slow start resumes.
//!
//! After the limit moves, the next window only waits (its requests were admitted before the
//! move), unless latency doubled. The limit stays within `min_limit..=max_limit`. At equilibrium the upstream runs at its
//! capacity, and one above it for one window out of every few.
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
/// Requests queued upstream (on average over a window) that count as queueing: less is noise
/// in a mean of a few samples.
const MIN_QUEUE: f64 = 0.5;
/// Windows without growth after a probe upwards that failed at once (doubled for each such
/// probe in a row, up to 4x); one window after any other cut.
const HOLD_WINDOWS: u32 = 4;
const MAX_HOLD_SHIFT: u32 = 2;

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
    /// Sum and count of the in-flight numbers seen at admissions in this window (the average
    /// in flight when nobody reports every change).
    in_flight_sum: u64,
    in_flight_count: u32,
    /// Time-weighted in flight, from [`Gradient::set_in_flight`]: the current number, since
    /// when, and the integral over this window (requests x nanoseconds).
    current: usize,
    changed: Instant,
    area: u128,
    tracked: bool,
    probing: bool,
    next_probe: Instant,
    slow_start: bool,
    /// Windows left without growth.
    hold: u32,
    /// Windows since the limit last grew (saturating).
    since_growth: u32,
    /// Probes upwards in a row that were cut at once.
    failed_probes: u32,
    /// The limit just moved: the next window's samples were admitted before, so it only waits.
    settling: bool,
    /// The last window's latency was above the baseline's tolerance: requests queue upstream.
    queueing: bool,
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
            in_flight_sum: 0,
            in_flight_count: 0,
            current: 0,
            changed: now,
            area: 0,
            tracked: false,
            probing: false,
            next_probe: now + settings.probe_interval,
            slow_start: true,
            hold: 0,
            since_growth: u32::MAX,
            failed_probes: 0,
            settling: false,
            queueing: false,
        }
    }

    /// The current limit (whole requests, at least `min_limit`).
    pub fn limit(&self) -> usize {
        let limit = if self.probing { (self.limit / 2.0).max(self.settings.min_limit as f64) } else { self.limit };
        limit.floor().max(1.0) as usize
    }

    /// Whether the last window showed requests queueing at the upstream (latency above the
    /// baseline's tolerance): a request sent above the limit now would only queue there too.
    pub fn queueing(&self) -> bool {
        self.queueing
    }

    /// The measured no-load latency, once known.
    pub fn baseline(&self) -> Option<Duration> {
        self.baseline
    }

    /// Notes the concurrency reached (called when a request is admitted).
    pub fn observe_in_flight(&mut self, in_flight: usize) {
        self.max_in_flight = self.max_in_flight.max(in_flight);
        self.in_flight_sum += in_flight as u64;
        self.in_flight_count += 1;
    }

    /// Reports every change of the requests in flight, for a time-weighted average.
    pub fn set_in_flight(&mut self, in_flight: usize, now: Instant) {
        let since = self.changed.max(self.window_start);
        self.area += self.current as u128 * now.saturating_duration_since(since).as_nanos();
        self.current = in_flight;
        self.changed = now;
        self.tracked = true;
    }

    /// The window's average in flight: time-weighted when every change is reported, else the
    /// average seen at admissions, else the limit.
    fn average_in_flight(&self, now: Instant) -> f64 {
        let span = now.saturating_duration_since(self.window_start).as_nanos();
        if self.tracked && span > 0 {
            let since = self.changed.max(self.window_start);
            let area = self.area + self.current as u128 * now.saturating_duration_since(since).as_nanos();
            return area as f64 / span as f64;
        }
        if self.in_flight_count > 0 {
            return self.in_flight_sum as f64 / f64::from(self.in_flight_count);
        }
        self.limit
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
            let baseline = baseline.min(mean);
            self.baseline = Some(baseline);
            let doubled = mean > baseline * 2;
            let ratio = mean.as_secs_f64().max(1e-9) / baseline.as_secs_f64().max(1e-9);
            let in_flight = self.average_in_flight(now);
            // Requests queued at the upstream, on average, by Little's law.
            let queued = in_flight * (1.0 - 1.0 / ratio);
            self.queueing = ratio > 1.0 + self.settings.tolerance && queued >= MIN_QUEUE;
            if self.settling && !doubled {
                self.settling = false;
            } else {
                let before = self.limit;
                self.adjust(ratio, in_flight, queued);
                self.settling = self.limit != before;
            }
            if now >= self.next_probe {
                self.probing = true;
            }
        }
        self.window_start = now;
        self.samples = 0;
        self.sum_nanos = 0;
        self.max_in_flight = 0;
        self.in_flight_sum = 0;
        self.in_flight_count = 0;
        self.area = 0;
    }

    /// Moves the limit after one window whose mean latency was `ratio` times the baseline, with
    /// `in_flight` requests in flight on average, `queued` of them queued upstream.
    fn adjust(&mut self, ratio: f64, in_flight: f64, queued: f64) {
        let min = self.settings.min_limit as f64;
        self.since_growth = self.since_growth.saturating_add(1);
        if self.since_growth == 3 {
            // The last growth held for two windows: probing upwards works again.
            self.failed_probes = 0;
        }
        let next = if ratio > 1.0 + self.settings.tolerance && (queued >= MIN_QUEUE || ratio > 2.0) {
            // Queueing at the upstream. By Little's law, of the requests in flight, the share
            // `baseline / mean` is being served: that is the upstream's concurrency. A small
            // queue takes at most one off (a window's mean of a few samples is noisy).
            self.cut();
            let served = in_flight / ratio;
            if ratio > 2.0 || served > self.limit {
                served
            } else {
                served.max(self.limit - 1.0)
            }
        } else if (self.max_in_flight as f64) < self.limit / 2.0 {
            // Unused: decay towards twice what was used; slow start again from there.
            self.slow_start = true;
            (self.limit * 0.9).max(2.0 * self.max_in_flight as f64)
        } else if self.max_in_flight as f64 >= self.limit.floor() {
            if self.hold > 0 {
                self.hold -= 1;
                self.limit
            } else {
                self.since_growth = 0;
                self.limit + if self.slow_start { (self.limit / 2.0).max(1.0) } else { 1.0 }
            }
        } else {
            self.limit
        };
        self.limit = next.clamp(min, self.max_limit);
    }

    /// Holds growth after a cut: briefly after a disturbance, longer after a probe upwards that
    /// failed at once (the limit was at the upstream's capacity), longer each time in a row.
    fn cut(&mut self) {
        if self.since_growth <= 2 {
            self.failed_probes = (self.failed_probes + 1).min(MAX_HOLD_SHIFT + 1);
            self.hold = HOLD_WINDOWS << (self.failed_probes - 1);
        } else {
            self.hold = 1;
        }
        // Not a growth that held: the probe counter is not reset by the windows that follow.
        self.since_growth = u32::MAX;
        self.slow_start = false;
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
    fn converges_at_the_upstream_capacity_and_follows_it_down() {
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
        assert!((8..=9).contains(&limit), "limit {limit} for capacity 8");
        // Capacity halves: the limit follows.
        run(&mut g, &mut now, 4, Duration::from_millis(40), 200);
        let limit = g.limit();
        assert!((4..=5).contains(&limit), "limit {limit} for capacity 4");
        assert!(g.baseline().is_some_and(|b| b <= Duration::from_millis(45)), "{:?}", g.baseline());
    }

    #[test]
    fn an_idle_cluster_does_not_inflate_the_limit_and_an_unused_limit_decays() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        for _ in 0..1000 {
            now += Duration::from_millis(10);
            g.observe_in_flight(3);
            g.sample(Duration::from_millis(5), now);
        }
        assert_eq!(g.limit(), 6, "twice what was used, never more than the start");
    }

    #[test]
    fn at_capacity_most_of_the_time_and_a_burst_after_idle_overshoots_little() {
        let mut now = Instant::now();
        let no_probe = AdaptiveConcurrency { probe_interval: Duration::from_secs(3600), ..settings() };
        let mut g = Gradient::new(&no_probe, 1024, now);
        // Light load first: the limit decays to about twice the use.
        for _ in 0..200 {
            now += Duration::from_millis(40);
            g.observe_in_flight(1);
            g.sample(Duration::from_millis(40), now);
        }
        assert!(g.limit() <= 4, "{}", g.limit());
        // Then an upstream of capacity 8 kept saturated: slow start, then at capacity.
        let (mut peak, mut above, mut below, mut total) = (0, 0, 0, 0);
        for i in 0..4000 {
            let c = g.limit();
            g.observe_in_flight(c);
            let rtt = latency(c, 8, Duration::from_millis(40));
            now += rtt / 8;
            g.sample(rtt, now);
            peak = peak.max(c);
            if i >= 400 {
                total += 1;
                above += usize::from(c > 8);
                below += usize::from(c < 8);
            }
        }
        assert!(peak <= 13, "slow start overshoot: peak {peak}");
        assert!(above * 4 < total, "above capacity {above} of {total} samples");
        assert!(below * 10 < total, "below capacity {below} of {total} samples");
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
