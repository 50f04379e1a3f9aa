//! Load balancers over a cluster's endpoints, per worker.
//!
//! Both balancers choose among the endpoints the caller marks as eligible (later: healthy and
//! not ejected). They hold only worker-local state and never allocate when picking.

use std::cell::Cell;

/// What a balancer needs to know about one endpoint.
pub trait Candidate {
    fn weight(&self) -> u32;
    /// Requests this worker has in flight to the endpoint.
    fn outstanding(&self) -> u32;
    fn eligible(&self) -> bool;
}

/// A cluster's endpoints are shared (`Rc`) between the states of one cluster while its
/// endpoint set changes (DNS), so a shared endpoint is a candidate too.
impl<T: Candidate> Candidate for std::rc::Rc<T> {
    #[inline]
    fn weight(&self) -> u32 {
        (**self).weight()
    }
    #[inline]
    fn outstanding(&self) -> u32 {
        (**self).outstanding()
    }
    #[inline]
    fn eligible(&self) -> bool {
        (**self).eligible()
    }
}

/// A small, fast, worker-local PRNG (xorshift64*). Not for cryptography.
#[derive(Debug)]
pub struct XorShift(Cell<u64>);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        Self(Cell::new(seed | 1))
    }

    #[inline]
    pub fn next_u64(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    #[inline]
    pub fn below(&self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

/// Power of two random choices on least outstanding requests, normalised by weight:
/// picks two distinct eligible endpoints at random and takes the one with the lower
/// `outstanding / weight`. Returns `None` when no endpoint is eligible.
pub fn p2c<C: Candidate>(endpoints: &[C], rng: &XorShift) -> Option<usize> {
    let n = endpoints.len();
    let eligible = |i: usize| endpoints.get(i).is_some_and(|e| e.eligible());
    match n {
        0 => return None,
        1 => return eligible(0).then_some(0),
        _ => {}
    }
    let a = rng.below(n);
    let mut b = rng.below(n - 1);
    if b >= a {
        b += 1;
    }
    match (eligible(a), eligible(b)) {
        (true, true) => Some(if load_cmp(endpoints, a, b) { a } else { b }),
        (true, false) => Some(a),
        (false, true) => Some(b),
        // Both random picks ineligible: fall back to a scan so an eligible endpoint is never missed.
        (false, false) => least_loaded(endpoints, rng.below(n)),
    }
}

/// True when `a` is at most as loaded as `b` (outstanding per unit of weight).
fn load_cmp<C: Candidate>(endpoints: &[C], a: usize, b: usize) -> bool {
    let (Some(ea), Some(eb)) = (endpoints.get(a), endpoints.get(b)) else { return true };
    // outstanding_a / weight_a <= outstanding_b / weight_b, without division.
    u64::from(ea.outstanding()) * u64::from(eb.weight().max(1))
        <= u64::from(eb.outstanding()) * u64::from(ea.weight().max(1))
}

fn least_loaded<C: Candidate>(endpoints: &[C], start: usize) -> Option<usize> {
    let n = endpoints.len();
    let mut best: Option<usize> = None;
    for k in 0..n {
        let i = (start + k) % n;
        if !endpoints.get(i).is_some_and(|e| e.eligible()) {
            continue;
        }
        best = match best {
            Some(j) if load_cmp(endpoints, j, i) => Some(j),
            _ => Some(i),
        };
    }
    best
}

/// The least loaded eligible endpoint other than `avoid`, scanning from `start`.
pub fn least_loaded_except<C: Candidate>(endpoints: &[C], start: usize, avoid: usize) -> Option<usize> {
    least_loaded_where(endpoints, start, |i| i != avoid)
}

/// The least loaded eligible endpoint whose index passes `keep`, scanning from `start`.
pub fn least_loaded_where<C: Candidate>(endpoints: &[C], start: usize, keep: impl Fn(usize) -> bool) -> Option<usize> {
    let n = endpoints.len();
    let mut best: Option<usize> = None;
    for k in 0..n {
        let i = (start + k) % n;
        if !keep(i) || !endpoints.get(i).is_some_and(|e| e.eligible()) {
            continue;
        }
        best = match best {
            Some(j) if load_cmp(endpoints, j, i) => Some(j),
            _ => Some(i),
        };
    }
    best
}

/// Smooth weighted round robin (as in nginx): over any window of `sum(weights)` picks, each
/// eligible endpoint is chosen exactly `weight` times, spread out rather than in bursts.
#[derive(Debug, Default)]
pub struct RoundRobin {
    current: Vec<Cell<i64>>,
}

impl RoundRobin {
    pub fn new(n: usize) -> Self {
        Self { current: (0..n).map(|_| Cell::new(0)).collect() }
    }

    pub fn pick<C: Candidate>(&self, endpoints: &[C]) -> Option<usize> {
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        let mut best_value = i64::MIN;
        for (i, (e, cur)) in endpoints.iter().zip(&self.current).enumerate() {
            if !e.eligible() {
                continue;
            }
            let w = i64::from(e.weight().max(1));
            let v = cur.get() + w;
            cur.set(v);
            total += w;
            if v > best_value {
                best_value = v;
                best = Some(i);
            }
        }
        let chosen = self.current.get(best?)?;
        chosen.set(chosen.get() - total);
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    struct Ep {
        weight: u32,
        outstanding: u32,
        eligible: bool,
    }
    impl Candidate for Ep {
        fn weight(&self) -> u32 {
            self.weight
        }
        fn outstanding(&self) -> u32 {
            self.outstanding
        }
        fn eligible(&self) -> bool {
            self.eligible
        }
    }
    fn ep(weight: u32, outstanding: u32) -> Ep {
        Ep { weight, outstanding, eligible: true }
    }

    #[test]
    fn round_robin_is_smooth_and_weighted() {
        let eps = vec![ep(5, 0), ep(1, 0), ep(1, 0)];
        let rr = RoundRobin::new(eps.len());
        let picks: Vec<usize> = (0..7).filter_map(|_| rr.pick(&eps)).collect();
        // nginx's documented sequence for weights 5,1,1: a a b a c a a
        assert_eq!(picks, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn round_robin_skips_ineligible_and_handles_none() {
        let mut eps = vec![ep(1, 0), ep(1, 0)];
        eps[0].eligible = false;
        let rr = RoundRobin::new(2);
        assert!((0..10).all(|_| rr.pick(&eps) == Some(1)));
        eps[1].eligible = false;
        assert_eq!(rr.pick(&eps), None);
    }

    #[test]
    fn p2c_prefers_the_less_loaded() {
        let eps = vec![ep(1, 10), ep(1, 0)];
        let rng = XorShift::new(7);
        assert!((0..100).all(|_| p2c(&eps, &rng) == Some(1)));
    }

    #[test]
    fn p2c_weights_the_load() {
        // 4 in flight on weight 4 is lighter than 2 in flight on weight 1.
        let eps = vec![ep(4, 4), ep(1, 2)];
        let rng = XorShift::new(3);
        assert!((0..100).all(|_| p2c(&eps, &rng) == Some(0)));
    }

    #[test]
    fn p2c_spreads_evenly_when_idle() {
        let eps = vec![ep(1, 0), ep(1, 0), ep(1, 0), ep(1, 0)];
        let rng = XorShift::new(99);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            if let Some(i) = p2c(&eps, &rng) {
                counts[i] += 1;
            }
        }
        for c in counts {
            assert!((8_000..12_000).contains(&c), "{counts:?}");
        }
    }

    proptest! {
        #[test]
        fn p2c_never_picks_an_ineligible_endpoint(
            spec in prop::collection::vec((1u32..10, 0u32..50, any::<bool>()), 0..12),
            seed in any::<u64>(),
        ) {
            let eps: Vec<Ep> = spec.iter().map(|&(w, o, e)| Ep { weight: w, outstanding: o, eligible: e }).collect();
            let rng = XorShift::new(seed);
            let any_eligible = eps.iter().any(|e| e.eligible);
            for _ in 0..20 {
                match p2c(&eps, &rng) {
                    Some(i) => prop_assert!(eps[i].eligible),
                    None => prop_assert!(!any_eligible),
                }
            }
        }

        #[test]
        fn round_robin_gives_each_its_weight_per_cycle(
            weights in prop::collection::vec(1u32..8, 1..8),
        ) {
            let eps: Vec<Ep> = weights.iter().map(|&w| ep(w, 0)).collect();
            let rr = RoundRobin::new(eps.len());
            let total: u32 = weights.iter().sum();
            let mut counts = vec![0u32; eps.len()];
            for _ in 0..total {
                counts[rr.pick(&eps).unwrap_or(usize::MAX)] += 1;
            }
            prop_assert_eq!(counts, weights);
        }

        #[test]
        fn rng_below_stays_in_range(seed in any::<u64>(), n in 1usize..1000) {
            let rng = XorShift::new(seed);
            for _ in 0..50 {
                prop_assert!(rng.below(n) < n);
            }
        }
    }
}
