//! Peak-EWMA latency estimates for the `peak_ewma` balancer (after Finagle and linkerd2-proxy).
//!
//! Each worker keeps, per endpoint, an exponentially weighted moving average of response times
//! that is peak-sensitive: a sample above the average replaces it at once, a lower one pulls it
//! down with time constant `tau` (default 10s). Read, the estimate keeps decaying while no
//! sample arrives, so an endpoint that was slow once is tried again later. The balancer is p2c
//! on `cost = estimate x (outstanding + 1)`; an endpoint not measured yet gets the average of
//! the measured ones (a neutral cost), so it gets traffic and is measured.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::balancer::{Candidate, XorShift};

/// What a try that ended in a gateway error (connect failure, reset, timeout) counts as: a
/// failing endpoint often fails fast and must not look fast.
pub const ERROR_PENALTY: Duration = Duration::from_secs(1);

/// One endpoint's estimate, worker-local.
#[derive(Debug)]
pub struct PeakEwma {
    /// Nanoseconds; NaN until the first sample.
    estimate: Cell<f64>,
    stamp: Cell<Instant>,
}

/// What the `peak_ewma` balancer needs beyond [`Candidate`].
pub trait Measured: Candidate {
    fn ewma(&self) -> &PeakEwma;
}

impl<T: Measured> Measured for std::rc::Rc<T> {
    fn ewma(&self) -> &PeakEwma {
        (**self).ewma()
    }
}

impl Default for PeakEwma {
    fn default() -> Self {
        Self { estimate: Cell::new(f64::NAN), stamp: Cell::new(Instant::now()) }
    }
}

impl PeakEwma {
    /// Adds a response time observed at `now`.
    pub fn observe(&self, rtt: Duration, now: Instant, tau: Duration) {
        let sample = rtt.as_nanos() as f64;
        let current = self.decayed(now, tau);
        let next = match current {
            Some(c) if sample <= c => {
                let dt = now.saturating_duration_since(self.stamp.get()).as_secs_f64();
                let w = (-dt / tau.as_secs_f64().max(1e-9)).exp();
                c * w + sample * (1.0 - w)
            }
            // First sample, or a peak: taken at once.
            _ => sample,
        };
        self.estimate.set(next);
        self.stamp.set(now);
    }

    /// Takes over `old`'s estimate (the same endpoint in a cluster state rebuilt by a reload).
    pub fn take_over(&self, old: &PeakEwma) {
        self.estimate.set(old.estimate.get());
        self.stamp.set(old.stamp.get());
    }

    /// The estimate at `now` in nanoseconds (decayed since the last sample), `None` if never
    /// measured.
    pub fn decayed(&self, now: Instant, tau: Duration) -> Option<f64> {
        let e = self.estimate.get();
        if e.is_nan() {
            return None;
        }
        let dt = now.saturating_duration_since(self.stamp.get()).as_secs_f64();
        Some(e * (-dt / tau.as_secs_f64().max(1e-9)).exp())
    }
}

/// P2C on peak-EWMA cost among eligible endpoints. `None` when none is eligible.
pub fn pick<C: Measured>(endpoints: &[C], rng: &XorShift, now: Instant, tau: Duration) -> Option<usize> {
    let n = endpoints.len();
    let eligible = |i: usize| endpoints.get(i).is_some_and(|e| e.eligible());
    if n < 2 {
        return (n == 1 && eligible(0)).then_some(0);
    }
    let a = rng.below(n);
    let mut b = rng.below(n - 1);
    if b >= a {
        b += 1;
    }
    match (eligible(a), eligible(b)) {
        (true, true) => {}
        (true, false) => return Some(a),
        (false, true) => return Some(b),
        (false, false) => {
            // Scan for the cheapest eligible endpoint so none is ever missed.
            let neutral = neutral(endpoints, now, tau);
            return (0..n).filter(|&i| eligible(i)).min_by(|&x, &y| {
                cost(endpoints, x, neutral, now, tau).total_cmp(&cost(endpoints, y, neutral, now, tau))
            });
        }
    }
    let unmeasured = |i: usize| endpoints.get(i).is_some_and(|e| e.ewma().estimate.get().is_nan());
    let neutral = if unmeasured(a) || unmeasured(b) { neutral(endpoints, now, tau) } else { 0.0 };
    Some(if cost(endpoints, a, neutral, now, tau) <= cost(endpoints, b, neutral, now, tau) { a } else { b })
}

fn cost<C: Measured>(endpoints: &[C], i: usize, neutral: f64, now: Instant, tau: Duration) -> f64 {
    let Some(e) = endpoints.get(i) else { return f64::INFINITY };
    let estimate = e.ewma().decayed(now, tau).unwrap_or(neutral);
    // Never 0: an idle endpoint with a decayed estimate still counts its load.
    estimate.max(1.0) * f64::from(e.outstanding() + 1)
}

/// The mean estimate of the measured endpoints (1ms when none is measured).
fn neutral<C: Measured>(endpoints: &[C], now: Instant, tau: Duration) -> f64 {
    let (sum, count) =
        endpoints.iter().filter_map(|e| e.ewma().decayed(now, tau)).fold((0.0, 0u32), |(s, c), x| (s + x, c + 1));
    if count == 0 {
        1e6
    } else {
        sum / f64::from(count)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const TAU: Duration = Duration::from_secs(10);

    struct Ep {
        ewma: PeakEwma,
        outstanding: u32,
        eligible: bool,
    }
    impl Candidate for Ep {
        fn weight(&self) -> u32 {
            1
        }
        fn outstanding(&self) -> u32 {
            self.outstanding
        }
        fn eligible(&self) -> bool {
            self.eligible
        }
    }
    impl Measured for Ep {
        fn ewma(&self) -> &PeakEwma {
            &self.ewma
        }
    }
    fn ep() -> Ep {
        Ep { ewma: PeakEwma::default(), outstanding: 0, eligible: true }
    }

    #[test]
    fn peaks_are_taken_at_once_and_decay_slowly() {
        let e = PeakEwma::default();
        let t0 = Instant::now();
        assert_eq!(e.decayed(t0, TAU), None);
        e.observe(Duration::from_millis(10), t0, TAU);
        e.observe(Duration::from_millis(100), t0, TAU);
        assert_eq!(e.decayed(t0, TAU), Some(100e6));
        // A lower sample 1s later moves the estimate only part of the way.
        let t1 = t0 + Duration::from_secs(1);
        e.observe(Duration::from_millis(10), t1, TAU);
        let v = e.decayed(t1, TAU).unwrap();
        assert!(v > 50e6 && v < 100e6, "{v}");
        // Without samples the estimate keeps decaying.
        assert!(e.decayed(t1 + Duration::from_secs(30), TAU).unwrap() < v / 10.0);
    }

    #[test]
    fn prefers_the_fast_endpoint() {
        let eps = vec![ep(), ep(), ep()];
        let now = Instant::now();
        eps[0].ewma.observe(Duration::from_millis(50), now, TAU);
        eps[1].ewma.observe(Duration::from_millis(5), now, TAU);
        eps[2].ewma.observe(Duration::from_millis(50), now, TAU);
        let rng = XorShift::new(1234);
        let mut counts = [0u32; 3];
        for _ in 0..3000 {
            counts[pick(&eps, &rng, now, TAU).unwrap()] += 1;
        }
        // The fast one wins every pair it is in (2 of 3 pairs); the slow ones split the rest.
        assert!((1900..2100).contains(&counts[1]), "{counts:?}");
        assert!(counts[0] > 300 && counts[2] > 300, "{counts:?}");
    }

    #[test]
    fn load_and_unmeasured_endpoints() {
        let mut eps = vec![ep(), ep()];
        let now = Instant::now();
        eps[0].ewma.observe(Duration::from_millis(5), now, TAU);
        eps[1].ewma.observe(Duration::from_millis(20), now, TAU);
        // 5ms x 10 in flight costs more than 20ms idle.
        eps[0].outstanding = 9;
        let rng = XorShift::new(3);
        assert!((0..50).all(|_| pick(&eps, &rng, now, TAU) == Some(1)));
        // An unmeasured endpoint gets the mean (12.5ms): cheaper than the loaded one.
        eps.push(ep());
        let picks: Vec<usize> = (0..300).filter_map(|_| pick(&eps, &rng, now, TAU)).collect();
        assert!(picks.contains(&2), "the new endpoint gets traffic");
        // Ineligible endpoints are never picked.
        eps[1].eligible = false;
        eps[2].eligible = false;
        assert!((0..50).all(|_| pick(&eps, &rng, now, TAU) == Some(0)));
        eps[0].eligible = false;
        assert_eq!(pick(&eps, &rng, now, TAU), None);
    }
}
