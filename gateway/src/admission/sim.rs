//! Open-loop simulations of the adaptive limit in front of model upstreams (tests only): one
//! controller alone, and several workers sharing one upstream, each with its own controller (as
//! before the shared limit) or with their parts of one [`Controller`] (as the gateway runs).
//! Deterministic (a seeded random source, explicit instants).

use std::time::{Duration, Instant};

use gateway_config::AdaptiveConcurrency;

use super::controller::Controller;
use super::gradient::Gradient;

/// A small deterministic random source (splitmix64) for the simulations below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }

    fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Upstreams for the open-loop simulations.
enum Upstream {
    /// `capacity` workers of `service` each, FIFO without bound behind them.
    Pool { capacity: usize, service: f64, free_at: Vec<f64> },
    /// No concurrency limit; latency `base + per_request` x requests in flight.
    LoadDependent { base: f64, per_request: f64 },
    /// No concurrency limit; log-normal latency with this median and p99 / p50.
    Noisy { median: f64, p99_over_p50: f64 },
    /// No concurrency limit; `slow_share` of the requests take `slow`, the others `fast` (a
    /// cluster serving long and short requests alike); "halving" it multiplies `slow_share` by
    /// `shift` (the mix changes).
    /// `kinds`: the slow and the fast requests come by routes of their own.
    Mixed { fast: f64, slow: f64, slow_share: f64, shift: f64, kinds: bool },
    /// `fast_share` of the requests answered in `fast` without queueing (a cache in front, or
    /// cheap requests); the others go to a `Pool` (FIFO without bound).
    FastPath { fast: f64, fast_share: f64, pool: Box<Upstream> },
}

impl Upstream {
    /// When a request sent at `t` with `in_flight` requests in flight (itself included)
    /// completes, and its kind (the route it came by: the mixed upstream's slow requests are
    /// kind 1 when `kinds`, as routes of their own; a fast path shares its route with the pool's
    /// requests, as a cache in front of an application does).
    fn serve(&mut self, t: f64, in_flight: usize, rng: &mut Rng) -> (f64, u64) {
        match self {
            Upstream::Mixed { fast, slow, slow_share, kinds, .. } => {
                if rng.unit() < *slow_share {
                    (t + *slow, u64::from(*kinds))
                } else {
                    (t + *fast, 0)
                }
            }
            other => (other.serve_one(t, in_flight, rng), 0),
        }
    }

    fn serve_one(&mut self, t: f64, in_flight: usize, rng: &mut Rng) -> f64 {
        match self {
            Upstream::Pool { service, free_at, .. } => {
                let (i, start) =
                    free_at.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1)).expect("a worker");
                let done = start.max(t) + *service;
                free_at[i] = done;
                done
            }
            Upstream::LoadDependent { base, per_request } => t + *base + *per_request * in_flight as f64,
            Upstream::Noisy { median, p99_over_p50 } => {
                let sigma = p99_over_p50.ln() / 2.326;
                t + *median * (sigma * rng.normal()).exp()
            }
            Upstream::Mixed { .. } => self.serve(t, in_flight, rng).0,
            Upstream::FastPath { fast, fast_share, pool } => {
                if rng.unit() < *fast_share {
                    t + *fast
                } else {
                    pool.serve_one(t, in_flight, rng)
                }
            }
        }
    }

    fn halve(&mut self) {
        match self {
            Upstream::Pool { capacity, free_at, .. } => {
                *capacity = (*capacity / 2).max(1);
                free_at.truncate(*capacity);
            }
            Upstream::Mixed { slow_share, shift, .. } => *slow_share = (*slow_share * *shift).min(1.0),
            Upstream::FastPath { pool, .. } => pool.halve(),
            _ => {}
        }
    }
}

/// What one phase of a simulation saw.
#[derive(Debug, Default)]
struct Phase {
    arrived: usize,
    refused: usize,
    /// Latencies of the admitted requests of the phase, seconds.
    latencies: Vec<f64>,
    /// The most in flight at the upstream.
    peak: usize,
}

impl Phase {
    fn refused_share(&self) -> f64 {
        self.refused as f64 / self.arrived.max(1) as f64
    }

    fn p99(&mut self) -> f64 {
        self.latencies.sort_by(f64::total_cmp);
        self.latencies.get(self.latencies.len() * 99 / 100).copied().unwrap_or(0.0)
    }
}

/// Open-loop Poisson arrivals through the controller to `upstream`: each phase is
/// `(requests per second, seconds, halve the pool at its start)`. A request that finds no
/// slot under the limit is refused (what the last class sees: the bound on false shedding
/// for every class). Returns each phase's counts.
fn simulate(upstream: &mut Upstream, phases: &[(f64, f64, bool)], seed: u64) -> Vec<Phase> {
    simulate_workers(upstream, phases, &[1.0], true, seed).into_iter().map(|mut p| p.workers.remove(0)).collect()
}

/// [`simulate`] with requests evenly spaced (the benchmark's load generator schedules them at a
/// constant rate): the requests in flight barely move while the load is steady.
fn simulate_paced(upstream: &mut Upstream, phases: &[(f64, f64, bool)], seed: u64) -> Vec<Phase> {
    simulate_arrivals(upstream, phases, &[1.0], true, true, seed).into_iter().map(|mut p| p.workers.remove(0)).collect()
}

/// What one phase of a simulation with several workers saw.
#[derive(Debug, Default)]
struct WorkersPhase {
    /// Each worker's counts.
    workers: Vec<Phase>,
    /// The sum of the workers' limits, sampled every 10 ms of the phase's second half.
    limit_sums: Vec<usize>,
}

/// How the workers of a simulation limit their requests.
enum Limits {
    /// A controller per worker, each seeing only its own requests.
    Own(Vec<Gradient>),
    /// One controller for all, each worker admitting under its part of the limit.
    Shared(Box<Controller>),
}

impl Limits {
    fn limit(&self, w: usize) -> usize {
        match self {
            Limits::Own(gs) => {
                gs.get(w).map_or(
                    1,
                    |g| {
                        if g.measured() {
                            g.limit()
                        } else {
                            g.limit() * super::limiter::UNVALIDATED_ROOM
                        }
                    },
                )
            }
            Limits::Shared(c) => c.worker_limit(w),
        }
    }

    fn sum(&self, workers: usize) -> usize {
        (0..workers).map(|w| self.limit(w)).sum()
    }
}

/// [`simulate`] with several workers in front of the same upstream: each arrival goes to worker
/// `i` with probability `shares[i]` (connections spread unevenly over the workers). `shared`:
/// the workers share one controller (the gateway); else each has its own.
fn simulate_workers(
    upstream: &mut Upstream,
    phases: &[(f64, f64, bool)],
    shares: &[f64],
    shared: bool,
    seed: u64,
) -> Vec<WorkersPhase> {
    simulate_arrivals(upstream, phases, shares, shared, false, seed)
}

/// [`simulate_workers`] with Poisson arrivals, or evenly spaced ones (`paced`).
fn simulate_arrivals(
    upstream: &mut Upstream,
    phases: &[(f64, f64, bool)],
    shares: &[f64],
    shared: bool,
    paced: bool,
    seed: u64,
) -> Vec<WorkersPhase> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let start = Instant::now();
    let at = |t: f64| start + Duration::from_secs_f64(t);
    let defaults = AdaptiveConcurrency {
        enabled: true,
        initial_limit: gateway_config::defaults::ADAPTIVE_INITIAL_LIMIT,
        min_limit: gateway_config::defaults::ADAPTIVE_MIN_LIMIT,
        tolerance: gateway_config::defaults::ADAPTIVE_TOLERANCE,
        probe_interval: gateway_config::defaults::ADAPTIVE_PROBE_INTERVAL,
    };
    let mut limits = if shared {
        Limits::Shared(Box::new(Controller::new(&defaults, 1024, shares.len(), start)))
    } else {
        Limits::Own(shares.iter().map(|_| Gradient::new(&defaults, 1024, start)).collect())
    };
    let mut in_flight = vec![0usize; shares.len()];
    let mut rng = Rng(seed);
    // Completions: (time in ns, sent at in ns, worker, kind).
    let mut flying: BinaryHeap<Reverse<(u64, u64, usize, u64)>> = BinaryHeap::new();
    let ns = |t: f64| (t * 1e9) as u64;
    let mut t = 0.0;
    let mut out = Vec::new();
    for &(rate, secs, halve) in phases {
        if halve {
            upstream.halve();
        }
        let end = t + secs;
        let (mut phase, mut next_sample) = (WorkersPhase::default(), t + secs / 2.0);
        phase.workers.resize_with(shares.len(), Phase::default);
        loop {
            t += if paced { 1.0 / rate } else { rng.exponential(1.0 / rate) };
            if t >= end {
                t = end;
                break;
            }
            while let Some(&Reverse((done, sent, w, kind))) = flying.peek() {
                if done > ns(t) {
                    break;
                }
                flying.pop();
                let (now, rtt) = (at(done as f64 / 1e9), Duration::from_nanos(done - sent));
                in_flight[w] -= 1;
                match &mut limits {
                    Limits::Own(gs) => {
                        gs[w].set_in_flight(in_flight[w], now);
                        gs[w].sample_kind(rtt, kind, now);
                    }
                    Limits::Shared(c) => {
                        c.released(now);
                        c.sample_kind(rtt, kind, now);
                    }
                }
            }
            while next_sample <= t {
                phase.limit_sums.push(limits.sum(shares.len()));
                next_sample += 0.010;
            }
            let pick = rng.unit();
            let mut w = 0;
            let mut acc = 0.0;
            for (i, share) in shares.iter().enumerate() {
                acc += share;
                w = i;
                if pick <= acc {
                    break;
                }
            }
            let p = &mut phase.workers[w];
            p.arrived += 1;
            if let Limits::Shared(c) = &limits {
                c.arrival(w, 0);
            }
            // A worker whose part is full may take a slot the others leave unused (as the
            // limiter's later classes do: two free at least).
            let borrow = matches!(&limits, Limits::Shared(c) if shares.len() > 1 && c.has_room_for_later_classes());
            if in_flight[w] >= limits.limit(w) && !borrow {
                match &mut limits {
                    Limits::Own(gs) => gs[w].note_bound(),
                    Limits::Shared(c) => c.note_bound(),
                }
                p.refused += 1;
                continue;
            }
            in_flight[w] += 1;
            let n = in_flight[w];
            match &mut limits {
                Limits::Own(gs) => {
                    gs[w].observe_in_flight(n);
                    gs[w].set_in_flight(n, at(t));
                }
                Limits::Shared(c) => c.taken(at(t)),
            }
            let (done, kind) = upstream.serve(t, flying.len() + 1, &mut rng);
            p.latencies.push(done - t);
            p.peak = p.peak.max(n);
            flying.push(Reverse((ns(done), ns(t), w, kind)));
        }
        out.push(phase);
    }
    out
}

#[test]
fn an_upstream_whose_latency_grows_with_load_is_not_shed_at_twice_its_usual_load() {
    // 20 ms + 0.2 ms per request in flight, no limit: at 1000 req/s about 25 in flight at
    // 25 ms; at 2000 req/s about 67 at 33 ms (1.6x the no-load latency), and still more in
    // flight would bring more throughput.
    for seed in 1..=3 {
        let mut up = Upstream::LoadDependent { base: 0.020, per_request: 0.0002 };
        let phases = simulate(&mut up, &[(1000.0, 1.0, false), (1000.0, 9.0, false), (2000.0, 30.0, false)], seed);
        // The first second finds the load (the limit starts at `initial_limit`).
        for (i, p) in phases.iter().enumerate() {
            eprintln!("load-dependent seed {seed} phase {i}: refused {} of {}", p.refused, p.arrived);
        }
        for (i, p) in phases.iter().enumerate().skip(1) {
            assert!(p.refused_share() < 0.005, "seed {seed} phase {i}: refused {} of {}", p.refused, p.arrived);
        }
    }
}

#[test]
fn a_noisy_upstream_without_queueing_is_never_shed() {
    // Log-normal latency, median 20 ms, p99 three times p50, independent of the load.
    for seed in 1..=3 {
        let mut up = Upstream::Noisy { median: 0.020, p99_over_p50: 3.0 };
        let phases = simulate(&mut up, &[(1000.0, 1.0, false), (1000.0, 9.0, false), (2000.0, 30.0, false)], seed);
        // The first second finds the load (the limit starts at `initial_limit`).
        // The aim (issue 18) is none: after the first second, none of three seeds sees a
        // refusal (before the limit at rest grew to twice the recent peak: one in a thousand
        // at twice the usual load, and 4% for one seed in the seconds after start).
        for (i, p) in phases.iter().enumerate() {
            eprintln!("noisy seed {seed} phase {i}: refused {} of {}", p.refused, p.arrived);
        }
        let step = &phases[2];
        assert!(step.refused_share() < 0.0005, "seed {seed}: refused {} of {}", step.refused, step.arrived);
        assert!(
            phases[1].refused_share() < 0.0005,
            "seed {seed}: refused {} of {}",
            phases[1].refused,
            phases[1].arrived
        );
    }
}

#[test]
fn a_pool_at_three_times_its_capacity_is_held_near_its_capacity_and_followed_when_it_halves() {
    // 8 workers of 40 ms (200 req/s), offered 600 req/s; the pool halves midway.
    for seed in 1..=3 {
        let mut up = Upstream::Pool { capacity: 8, service: 0.040, free_at: vec![0.0; 8] };
        let mut phases = simulate(&mut up, &[(20.0, 5.0, false), (600.0, 15.0, false), (600.0, 15.0, true)], seed);
        let goodput = (phases[1].arrived - phases[1].refused) as f64 / 15.0;
        assert!(goodput > 0.9 * 200.0 && goodput < 1.1 * 200.0, "seed {seed}: goodput {goodput}/s of 200");
        // p99 over the whole phase, the onset of the overload included (the target of
        // issue 18 for the first class is 1.5x; the controller before the elasticity held
        // 1.6x here, this one up to 1.85x).
        let p99 = phases[1].p99();
        eprintln!("pool seed {seed} capacity 8: goodput {goodput:.0}/s, p99 {:.1} ms", p99 * 1e3);
        assert!(p99 < 0.040 * 1.9, "seed {seed}: p99 {p99} s at capacity 8");
        let goodput = (phases[2].arrived - phases[2].refused) as f64 / 15.0;
        assert!(goodput > 0.85 * 100.0 && goodput < 1.1 * 100.0, "seed {seed}: goodput {goodput}/s of 100");
        let p99 = phases[2].p99();
        eprintln!("pool seed {seed} capacity 4: goodput {goodput:.0}/s, p99 {:.1} ms", p99 * 1e3);
        // The halving's transient: up to 3x (the controller before the elasticity: 2x).
        assert!(p99 < 0.040 * 3.2, "seed {seed}: p99 {p99} s at capacity 4 (the halving included)");
    }
}

/// The pool scenario split over 2 and 4 workers, connections spread unevenly (issue 18): each
/// phase's goodput, median sum of the workers' limits, p99 and each worker's goodput.
fn pool_over_workers(shares: &[f64], shared: bool, seed: u64) -> Vec<(f64, usize, f64, Vec<f64>)> {
    let mut up = Upstream::Pool { capacity: 8, service: 0.040, free_at: vec![0.0; 8] };
    let mut phases = simulate_workers(
        &mut up,
        &[(20.0, 5.0, false), (600.0, 15.0, false), (600.0, 15.0, true)],
        shares,
        shared,
        seed,
    );
    phases
        .iter_mut()
        .skip(1)
        .map(|phase| {
            let served: usize = phase.workers.iter().map(|p| p.arrived - p.refused).sum();
            phase.limit_sums.sort_unstable();
            let sum = phase.limit_sums.get(phase.limit_sums.len() / 2).copied().unwrap_or(0);
            let mut all: Vec<f64> = phase.workers.iter_mut().flat_map(|p| p.latencies.drain(..)).collect();
            all.sort_by(f64::total_cmp);
            let p99 = all.get(all.len() * 99 / 100).copied().unwrap_or(0.0);
            let per = phase.workers.iter().map(|p| (p.arrived - p.refused) as f64 / 15.0).collect();
            (served as f64 / 15.0, sum, p99, per)
        })
        .collect()
}

#[test]
fn workers_sharing_one_limit_hold_the_upstream_at_its_capacity_and_none_starves() {
    // Each worker with its own controller (before): goodput at capacity, but a rise in latency
    // that another worker's requests caused looks to each controller like latency that does not
    // follow its own requests in flight, so their limits sum to 11-59 for a capacity of 8 or 4
    // and p99 grows to 115-835 ms (one worker: under 76 ms at capacity 8). With the limit
    // shared (`--nocapture` prints both), the workers' limits sum to the capacity (8-10 for 8,
    // 5-6 for 4) and p99 is 70-84 ms at capacity 8 (104-144 ms after the halving; 65-89 and
    // 93-155 ms before later classes could take a slot another worker leaves unused); each
    // worker is served in proportion to its share.
    for shares in [&[0.7, 0.3][..], &[0.4, 0.3, 0.2, 0.1][..]] {
        for seed in 1..=3 {
            let own = pool_over_workers(shares, false, seed);
            let shared = pool_over_workers(shares, true, seed);
            for ((capacity, own), (goodput, sum, p99, per)) in [8.0, 4.0].iter().zip(&own).zip(&shared) {
                let rps = capacity / 0.040;
                eprintln!(
                    "{shares:?} seed {seed} capacity {capacity}: shared: goodput {goodput:.0}/s, limits sum {sum}, \
                     p99 {:.0} ms, per worker {per:.0?}/s; own: goodput {:.0}/s, limits sum {}, p99 {:.0} ms",
                    p99 * 1000.0,
                    own.0,
                    own.1,
                    own.2 * 1000.0
                );
                assert!(*goodput > 0.85 * rps, "{shares:?} seed {seed}: goodput {goodput}/s of {rps}");
                assert!(
                    (*sum as f64) <= capacity + shares.len() as f64,
                    "{shares:?} seed {seed}: limits sum {sum} for capacity {capacity}"
                );
                for (i, (got, share)) in per.iter().zip(shares).enumerate() {
                    assert!(
                        *got > 0.7 * share * rps,
                        "{shares:?} seed {seed}: worker {i} (share {share}) served {got}/s of {rps}"
                    );
                }
            }
            // Capacity 8 (the halving's transient aside): p99 near what one controller gets
            // (under 1.9x the service time in the single-worker simulation above; here 1.6-2.2x,
            // against 2.2-4.4x with a controller per worker).
            assert!(shared[0].2 < 0.040 * 2.3, "{shares:?} seed {seed}: p99 {} s", shared[0].2);
        }
    }
}

#[test]
fn workers_sharing_one_limit_do_not_shed_an_upstream_that_does_not_queue() {
    // The no-false-shedding upstreams of the single-worker simulations above, with the load
    // spread unevenly over two and four workers sharing one limit. A worker's part of the limit
    // is a few slots at the usual load over four workers, and follows its demand only when a
    // window closes: until later classes could take a slot another worker left unused (while
    // the process is two or more under the limit), 0.04-0.2% were refused at twice the usual
    // load, up to 4.7% in the 9 s after the first second (20% for one seed, whose first
    // window's five lucky samples set the baseline far too low), and 9-46% in the first second.
    // Now: none at twice the usual load for the noisy upstream, up to 0.02% for the
    // load-dependent one; none in the 9 s after the first second but for one seed (0.5%); 2-21%
    // in the first second (the limit starts at 16 and finds the load).
    for shares in [&[0.7, 0.3][..], &[0.4, 0.3, 0.2, 0.1][..]] {
        for seed in 1..=3 {
            let mut up = Upstream::LoadDependent { base: 0.020, per_request: 0.0002 };
            let phases = simulate_workers(
                &mut up,
                &[(1000.0, 1.0, false), (1000.0, 9.0, false), (2000.0, 30.0, false)],
                shares,
                true,
                seed,
            );
            let mut noisy = Upstream::Noisy { median: 0.020, p99_over_p50: 3.0 };
            let noisy = simulate_workers(
                &mut noisy,
                &[(1000.0, 1.0, false), (1000.0, 9.0, false), (2000.0, 30.0, false)],
                shares,
                true,
                seed,
            );
            for (name, phases) in [("load-dependent", &phases), ("noisy", &noisy)] {
                let refused: Vec<(usize, usize)> = phases
                    .iter()
                    .map(|p| (p.workers.iter().map(|w| w.refused).sum(), p.workers.iter().map(|w| w.arrived).sum()))
                    .collect();
                eprintln!("{name} {shares:?} seed {seed}: refused per phase {refused:?}");
                let (refused, arrived) = refused.get(2).copied().unwrap_or_default();
                assert!(
                    (refused as f64) < 0.0005 * arrived as f64,
                    "{name} {shares:?} seed {seed}: refused {refused} of {arrived} at twice the usual load"
                );
            }
        }
    }
}

#[test]
fn a_step_from_the_usual_load_to_twice_it_finds_room() {
    // The real benchmark's no-false-shedding runs: 500 req/s, then 1000 (the load-dependent
    // upstream: 20 ms + 0.2 ms per request in flight). The limit at rest sat where slow start
    // left it (24, about 1.2 times the usual peak), and the step was refused for a second or
    // two: 200-400 requests of 30,000 for two seeds of five. It now grows to twice the recent
    // peak while nothing queues: 0-48.
    for seed in 1..=5 {
        let mut up = Upstream::LoadDependent { base: 0.020, per_request: 0.0002 };
        let phases = simulate(&mut up, &[(500.0, 10.0, false), (1000.0, 30.0, false)], seed);
        let step = &phases[1];
        eprintln!("500 -> 1000 req/s, seed {seed}: refused {} of {}", step.refused, step.arrived);
        assert!(step.refused_share() < 0.002, "seed {seed}: refused {} of {}", step.refused, step.arrived);
    }
}

#[test]
fn a_paced_step_from_the_usual_load_to_twice_it_is_not_taken_for_queueing() {
    // The same step with evenly spaced requests, as the benchmark's generator sends them: in
    // flight stays at about 11 during the usual load, at latency 1.07 times the no-load one
    // (the upstream's own rise with load), so no window moves in flight enough to teach the
    // controller that its latency barely follows in flight. At the step, the first windows at
    // the limit were taken for queueing by the elasticity's prior and the limit was cut one by
    // one for about a second (the real runs refused 0.1-1% of the step). The window before the
    // step and the first one at the limit are a move of in flight by more than twice, latency
    // up 6%: an elasticity of about 0.1, no queue.
    // (Nothing here is random: one run.) Before: 239 of 30,000 refused; now 45, all in the
    // first 0.2 s of the step, while the limit grows by a tenth per window.
    let mut up = Upstream::LoadDependent { base: 0.020, per_request: 0.0002 };
    let phases = simulate_paced(&mut up, &[(500.0, 10.0, false), (1000.0, 30.0, false)], 1);
    let step = &phases[1];
    eprintln!("paced 500 -> 1000 req/s: refused {} of {}", step.refused, step.arrived);
    assert!(step.refused_share() < 0.002, "refused {} of {}", step.refused, step.arrived);
}

#[test]
fn a_paced_step_of_a_noisy_upstream_is_not_shed() {
    // The benchmark's noisy scenario: evenly spaced requests, 500 req/s for 10 s, then twice
    // that, at an upstream whose latency is log-normal (median 20 ms, p99 three times p50)
    // whatever the load. None refused, before and after the baselines were re-measured from
    // windows the limit did not bind (the real runs refused 12 of 30,000 before: their
    // baseline had sunk to 0.7 times the mean latency, which this simulation's did not show
    // as refusals; see `gradient.rs`).
    for seed in 1..=3 {
        let mut up = Upstream::Noisy { median: 0.020, p99_over_p50: 3.0 };
        let phases = simulate_paced(&mut up, &[(500.0, 10.0, false), (1000.0, 30.0, false)], seed);
        for (i, p) in phases.iter().enumerate() {
            eprintln!("paced noisy seed {seed} phase {i}: refused {} of {}", p.refused, p.arrived);
            assert_eq!(p.refused, 0, "seed {seed} phase {i}: refused {} of {}", p.refused, p.arrived);
        }
    }
}

#[test]
fn a_shift_towards_slow_requests_is_shed_unless_they_come_by_routes_of_their_own() {
    // Why the adaptive limit is not on where no class is named: 1 ms requests and 700 ms ones,
    // the slow ones growing from 1% to 20% of 500 req/s. Nothing queues (no concurrency limit),
    // but the mean latency rises 20-fold with the requests in flight. Judged by the cluster's
    // mean (slow and fast requests by one route) that reads as queueing: 8-92% of the requests
    // after the shift refused. With the slow requests on a route of their own, each route's
    // latency is compared with its own no-load latency and stays there: 5.0-11.7% refused,
    // while the limit grows from about 13 to the 70 now needed (by half per window of the
    // mix's no-load latency, about 140 ms), behind a probe that was due when the limit first
    // bound, at the start of the shift (its window closes only when slow requests complete). A
    // characterization of a known limitation (docs/overload.md), not a target: should the
    // controller learn to tell the two apart within one route, this test says so.
    let mut one_route_shed_heavily = 0;
    for seed in 1..=3 {
        for kinds in [false, true] {
            let mut up = Upstream::Mixed { fast: 0.001, slow: 0.7, slow_share: 0.01, shift: 20.0, kinds };
            let phases = simulate(&mut up, &[(500.0, 10.0, false), (500.0, 20.0, true)], seed);
            let after = &phases[1];
            eprintln!(
                "1% -> 20% slow, {} route(s), seed {seed}: refused {} of {} after the shift, {} of {} before",
                if kinds { 2 } else { 1 },
                after.refused,
                after.arrived,
                phases[0].refused,
                phases[0].arrived
            );
            if kinds {
                assert!(after.refused_share() < 0.15, "seed {seed}: refused {} of {}", after.refused, after.arrived);
            } else if after.refused_share() > 0.5 {
                one_route_shed_heavily += 1;
            }
        }
    }
    assert!(one_route_shed_heavily >= 1, "one route's mix shift is no longer shed for: update docs/overload.md");
}

#[test]
fn a_pool_behind_a_fast_path_that_never_queues_is_still_protected() {
    // 30% of the requests answered in 1 ms without queueing (a cache in front of the
    // application), 70% going to 8 workers of 40 ms (about 286 req/s of this mix), offered
    // 600 req/s. The fastest requests never wait, so neither the lowest latencies of a window
    // nor its share of fast answers show the queue; only the mean and how it follows the requests
    // in flight do. A guard for any signal meant to tell a change of mix from queueing (the one
    // tried on 2 December 2026, a window's 25th percentile against the baseline's, served
    // 179/s here). This controller serves 201-244/s, 70-85% of capacity (the limit is on all
    // requests, and slots held by fast ones leave the pool short), with p99 84-97 ms: the
    // pool's queue stays bounded.
    for seed in 1..=3 {
        let pool = Upstream::Pool { capacity: 8, service: 0.040, free_at: vec![0.0; 8] };
        let mut up = Upstream::FastPath { fast: 0.001, fast_share: 0.3, pool: Box::new(pool) };
        let mut phases = simulate(&mut up, &[(20.0, 5.0, false), (600.0, 15.0, false)], seed);
        let loaded = &mut phases[1];
        let served = (loaded.arrived - loaded.refused) as f64 / 15.0;
        let p99 = loaded.p99();
        eprintln!(
            "fast path + pool seed {seed}: served {served:.0}/s, refused {} of {}, p99 {:.1} ms, peak in flight {}",
            loaded.refused,
            loaded.arrived,
            p99 * 1e3,
            loaded.peak
        );
        // Capacity: 200 pool answers per second come with about 86 fast ones.
        assert!(served > 0.65 * 286.0, "seed {seed}: served {served}/s");
        assert!(p99 < 0.040 * 3.0, "seed {seed}: p99 {p99} s: the pool's queue grew");
    }
}

#[test]
fn a_probe_that_falls_on_the_halving_measures_the_pool_not_its_queue() {
    // The pool's capacity halves as a probe is due (the probe's first window halves the limit
    // from 8 to 4; the requests sent before it queue behind the 4 workers left). A probe that
    // took their latency (80 ms) for the no-load latency kept the limit at 7-10, and the
    // origin's queue with it: p99 after the halving's first half second 79-118 ms in 15 of
    // 18 runs (halving 50 ms before, at, or 50 ms after the probe, six seeds each), goodput
    // 98-100/s. The probe now measures only the requests it admitted: 56-78 ms in all 18, for
    // goodput 94-98/s (the limit at the pool's capacity, not above it).
    for offset in [-0.05, 0.0, 0.05] {
        for seed in 1..=6 {
            let mut up = Upstream::Pool { capacity: 8, service: 0.040, free_at: vec![0.0; 8] };
            let mut phases = simulate(
                &mut up,
                &[(20.0, 5.0, false), (600.0, 15.0 + offset, false), (600.0, 0.5, true), (600.0, 14.5, false)],
                seed,
            );
            let rest = &mut phases[3];
            let goodput = (rest.arrived - rest.refused) as f64 / 14.5;
            let p99 = rest.p99();
            eprintln!(
                "halving {offset:+} s from the probe, seed {seed}: p99 {:.1} ms, goodput {goodput:.0}/s",
                p99 * 1e3
            );
            assert!(p99 < 0.040 * 2.1, "offset {offset}, seed {seed}: p99 {p99} s: the origin's queue stayed");
            assert!(goodput > 0.9 * 100.0, "offset {offset}, seed {seed}: goodput {goodput}/s of 100");
        }
    }
}
