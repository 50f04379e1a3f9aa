//! How long the origin serves one request, and whether it limits how many it serves at once.
//!
//! Three models, chosen with `capacity-origin --mode`:
//! - [`Mode::Pool`]: a fixed worker pool; every request takes the base service time, and at most
//!   `capacity` are in service at once (the rest queue, see `gate`).
//! - [`Mode::LoadDependent`]: no limit; a request takes the base time plus `per_inflight` for
//!   every other request in service when it starts, so latency grows with load but nothing
//!   queues.
//! - [`Mode::Noisy`]: no limit; service times are log-normal with the base time as median and a
//!   given p99/p50 ratio, independent of load (drawn from a seeded generator).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::overload::Rng;

/// The standard normal's 99th percentile: a log-normal's p99/p50 is `exp(sigma * Z99)`.
const Z99: f64 = 2.326_347_874_040_841;

/// The longest service time any model hands out (a guard against absurd parameters).
const MAX_SERVICE: Duration = Duration::from_secs(60);

/// How the origin serves; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Pool,
    LoadDependent {
        /// Added to the base service time for every other request in service at the start.
        per_inflight: Duration,
    },
    Noisy {
        /// p99 / p50 of the service time (at least 1; 1 means no noise).
        p99_ratio: f64,
        seed: u64,
    },
}

impl Mode {
    /// The name `capacity-origin --mode` takes and `/__stats` reports.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Pool => "pool",
            Mode::LoadDependent { .. } => "load-dependent",
            Mode::Noisy { .. } => "noisy",
        }
    }

    /// Whether at most `capacity` requests are in service at once.
    pub fn limits_concurrency(&self) -> bool {
        matches!(self, Mode::Pool)
    }
}

/// Draws service times for one origin; shared by its connection threads.
pub(crate) struct ServiceModel {
    base: Duration,
    kind: Kind,
}

enum Kind {
    Fixed,
    PerInflight(Duration),
    LogNormal { sigma: f64, rng: Mutex<Rng> },
}

impl ServiceModel {
    pub(crate) fn new(base: Duration, mode: &Mode) -> ServiceModel {
        let kind = match *mode {
            Mode::Pool => Kind::Fixed,
            Mode::LoadDependent { per_inflight } => Kind::PerInflight(per_inflight),
            Mode::Noisy { p99_ratio, seed } => {
                Kind::LogNormal { sigma: sigma_for(p99_ratio), rng: Mutex::new(Rng::new(seed)) }
            }
        };
        ServiceModel { base, kind }
    }

    /// The service time of a request that found `others` requests already in service.
    pub(crate) fn service_time(&self, others: usize) -> Duration {
        let time = match &self.kind {
            Kind::Fixed => self.base,
            Kind::PerInflight(step) => {
                let extra = step.saturating_mul(u32::try_from(others).unwrap_or(u32::MAX));
                self.base.saturating_add(extra)
            }
            Kind::LogNormal { sigma, rng } => {
                let z = standard_normal(&mut rng.lock().unwrap_or_else(PoisonError::into_inner));
                Duration::try_from_secs_f64(self.base.as_secs_f64() * (sigma * z).exp()).unwrap_or(MAX_SERVICE)
            }
        };
        time.min(MAX_SERVICE)
    }
}

/// The log-normal shape parameter giving this p99/p50 (a ratio below 1, or not a number, is 1).
fn sigma_for(p99_ratio: f64) -> f64 {
    if p99_ratio.is_finite() && p99_ratio > 1.0 {
        p99_ratio.ln() / Z99
    } else {
        0.0
    }
}

/// One standard normal draw (Box-Muller; the second value of the pair is dropped).
fn standard_normal(rng: &mut Rng) -> f64 {
    // 1 - [0, 1) is in (0, 1]: the logarithm is finite.
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantile(sorted: &[Duration], q: f64) -> f64 {
        let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted[i].as_secs_f64() * 1000.0
    }

    #[test]
    fn pool_serves_every_request_in_the_base_time() {
        let model = ServiceModel::new(Duration::from_millis(40), &Mode::Pool);
        assert_eq!(model.service_time(0), Duration::from_millis(40));
        assert_eq!(model.service_time(100), Duration::from_millis(40));
        assert!(Mode::Pool.limits_concurrency());
    }

    #[test]
    fn load_dependent_adds_a_step_per_request_in_flight() {
        let mode = Mode::LoadDependent { per_inflight: Duration::from_micros(200) };
        let model = ServiceModel::new(Duration::from_millis(20), &mode);
        assert_eq!(model.service_time(0), Duration::from_millis(20));
        assert_eq!(model.service_time(1), Duration::from_micros(20_200));
        assert_eq!(model.service_time(50), Duration::from_millis(30));
        // Absurd loads are capped, not overflowed.
        assert_eq!(model.service_time(usize::MAX), MAX_SERVICE);
        assert!(!mode.limits_concurrency());
        assert_eq!(mode.name(), "load-dependent");
    }

    #[test]
    fn noisy_has_the_requested_median_and_p99_over_p50() {
        let mode = Mode::Noisy { p99_ratio: 3.0, seed: 1 };
        let model = ServiceModel::new(Duration::from_millis(20), &mode);
        let mut times: Vec<Duration> = (0..200_000).map(|_| model.service_time(0)).collect();
        times.sort();
        let (p50, p99) = (quantile(&times, 0.5), quantile(&times, 0.99));
        assert!((p50 - 20.0).abs() < 0.4, "p50 {p50} ms");
        assert!((p99 / p50 - 3.0).abs() < 0.1, "p99/p50 {}", p99 / p50);
        // Independent of load.
        let mut loaded: Vec<Duration> = (0..200_000).map(|_| model.service_time(1000)).collect();
        loaded.sort();
        assert!((quantile(&loaded, 0.5) - 20.0).abs() < 0.4);
    }

    #[test]
    fn noisy_is_the_same_for_the_same_seed_and_plain_without_noise() {
        let draw = |seed| {
            let model = ServiceModel::new(Duration::from_millis(10), &Mode::Noisy { p99_ratio: 3.0, seed });
            (0..5).map(|_| model.service_time(0)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        for ratio in [1.0, 0.5, f64::NAN] {
            let model = ServiceModel::new(Duration::from_millis(10), &Mode::Noisy { p99_ratio: ratio, seed: 1 });
            assert_eq!(model.service_time(0), Duration::from_millis(10), "ratio {ratio}");
        }
    }
}
