//! Maglev consistent hashing (Eisenbud et al., NSDI 2016), weighted.
//!
//! The lookup table is built from the endpoints' names (as written in the config) and weights
//! only, so every worker of every process with the same config builds the same table and sends
//! one key to one endpoint. Keys whose endpoint is not eligible (unhealthy or ejected) probe
//! further along a deterministic sequence of table slots, so only that endpoint's keys move,
//! and each moves to the same endpoint everywhere; the caller falls back to p2c when the probe
//! finds nothing.

use super::balancer::Candidate;
use super::hashkey::{hash_bytes, mix64};

/// How many extra slots a key probes when its endpoint is not eligible.
const PROBES: u64 = 64;

/// A built lookup table: slot -> endpoint index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maglev {
    table: Vec<u32>,
}

impl Maglev {
    /// Builds the table for endpoints `(name, weight)`, in cluster order. The table size is the
    /// first prime of a fixed ladder (10 007, 65 537, ...) at least 211 times the endpoint
    /// count, so each endpoint of equal weight gets within about 1% of its share of slots, and
    /// adding or removing an endpoint keeps the size (and so most keys' endpoints) unless it
    /// crosses a step (47, 310, ... endpoints). 4 bytes per slot, per worker.
    pub fn new<'a>(endpoints: impl ExactSizeIterator<Item = (&'a str, u32)>) -> Self {
        let n = endpoints.len();
        if n == 0 {
            return Self { table: Vec::new() };
        }
        let size = SIZES.iter().copied().find(|&m| m >= 211 * n as u64).unwrap_or_else(|| next_prime(211 * n as u64));
        let mut perms: Vec<(u64, u64, f64)> = endpoints
            .map(|(name, weight)| {
                let h = hash_bytes(name.as_bytes());
                let offset = h % size;
                let skip = mix64(h ^ 0x5851_f42d_4c95_7f2d) % (size - 1) + 1;
                (offset, skip, f64::from(weight.max(1)))
            })
            .collect();
        let top = perms.iter().map(|p| p.2).fold(1.0, f64::max);
        for p in &mut perms {
            p.2 /= top;
        }
        let mut table = vec![u32::MAX; size as usize];
        let mut next = vec![0u64; n];
        let mut credit = vec![0f64; n];
        let mut filled = 0u64;
        // Each round every endpoint earns its normalised weight (the heaviest earns 1) and
        // claims one slot per whole unit earned: slots end up in proportion to weight.
        'rounds: loop {
            for (i, &(offset, skip, w)) in perms.iter().enumerate() {
                let (Some(c), Some(j)) = (credit.get_mut(i), next.get_mut(i)) else { continue };
                *c += w;
                while *c >= 1.0 {
                    *c -= 1.0;
                    // The endpoint's next preferred slot that is still free.
                    loop {
                        let slot = ((offset + *j * skip) % size) as usize;
                        *j += 1;
                        if let Some(s) = table.get_mut(slot).filter(|s| **s == u32::MAX) {
                            *s = i as u32;
                            break;
                        }
                    }
                    filled += 1;
                    if filled == size {
                        break 'rounds;
                    }
                }
            }
        }
        Self { table }
    }

    /// The table size (a prime), 0 without endpoints.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The endpoint for `hash`: its slot's endpoint when eligible, else the first eligible one
    /// along the key's probe sequence. `None`: nothing eligible found (use another balancer).
    pub fn pick<C: Candidate>(&self, endpoints: &[C], hash: u64) -> Option<usize> {
        let size = self.table.len() as u64;
        if size == 0 {
            return None;
        }
        let eligible = |slot: u64| {
            let i = *self.table.get(slot as usize)? as usize;
            endpoints.get(i).filter(|e| e.eligible()).map(|_| i)
        };
        let first = hash % size;
        if let Some(i) = eligible(first) {
            return Some(i);
        }
        let step = mix64(hash) % (size - 1).max(1) + 1;
        (1..=PROBES).find_map(|k| eligible((first + k * step) % size))
    }

    /// How many slots each of `n` endpoints owns (tests and the admin port).
    pub fn shares(&self, n: usize) -> Vec<usize> {
        let mut out = vec![0; n];
        for &i in &self.table {
            if let Some(c) = out.get_mut(i as usize) {
                *c += 1;
            }
        }
        out
    }
}

/// Table sizes (primes), smallest first.
const SIZES: [u64; 6] = [10_007, 65_537, 131_071, 262_147, 524_287, 1_048_573];

fn next_prime(mut n: u64) -> u64 {
    while !is_prime(n) {
        n += 1;
    }
    n
}

fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::upstream::balancer::XorShift;

    struct Ep(bool);
    impl Candidate for Ep {
        fn weight(&self) -> u32 {
            1
        }
        fn outstanding(&self) -> u32 {
            0
        }
        fn eligible(&self) -> bool {
            self.0
        }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.{i}:8080")).collect()
    }

    fn build(names: &[String], weights: &[u32]) -> Maglev {
        Maglev::new(names.iter().zip(weights).map(|(n, w)| (n.as_str(), *w)).collect::<Vec<_>>().into_iter())
    }

    #[test]
    fn table_is_prime_sized_and_deterministic() {
        let n = names(5);
        let a = build(&n, &[1; 5]);
        assert!(is_prime(a.len() as u64) && a.len() >= 100 * 5, "{}", a.len());
        assert!(SIZES.iter().all(|&m| is_prime(m)));
        // Built independently (another worker, another process): the same table.
        assert_eq!(a, build(&n, &[1; 5]));
        let eps: Vec<Ep> = (0..5).map(|_| Ep(true)).collect();
        let rng = XorShift::new(11);
        for _ in 0..1000 {
            let h = rng.next_u64();
            assert_eq!(a.pick(&eps, h), build(&n, &[1; 5]).pick(&eps, h));
        }
    }

    #[test]
    fn keys_spread_evenly_and_by_weight() {
        let n = names(4);
        let eps: Vec<Ep> = (0..4).map(|_| Ep(true)).collect();
        let m = build(&n, &[1; 4]);
        let rng = XorShift::new(5);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[m.pick(&eps, rng.next_u64()).unwrap()] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        // Weights 1:3 -> about a quarter of the slots for the first endpoint.
        let w = build(&names(2), &[1, 3]);
        let shares = w.shares(2);
        let first = shares[0] as f64 / w.len() as f64;
        assert!((0.23..0.27).contains(&first), "{shares:?}");
    }

    #[test]
    fn an_ineligible_endpoint_moves_only_its_own_keys() {
        let n = names(5);
        let m = build(&n, &[1; 5]);
        let all: Vec<Ep> = (0..5).map(|_| Ep(true)).collect();
        let mut one_down: Vec<Ep> = (0..5).map(|_| Ep(true)).collect();
        one_down[2] = Ep(false);
        let rng = XorShift::new(42);
        let (mut moved, mut of_down) = (0, 0);
        for _ in 0..20_000 {
            let h = rng.next_u64();
            let before = m.pick(&all, h).unwrap();
            let after = m.pick(&one_down, h).unwrap();
            assert_ne!(after, 2);
            if before == 2 {
                of_down += 1;
            } else {
                assert_eq!(before, after, "a key of a healthy endpoint moved");
            }
            moved += usize::from(before != after);
        }
        assert_eq!(moved, of_down);
        assert!((3_500..4_500).contains(&of_down), "{of_down}");
        // Nothing eligible: no pick (the caller falls back).
        let none: Vec<Ep> = (0..5).map(|_| Ep(false)).collect();
        assert_eq!(m.pick(&none, 7), None);
    }

    #[test]
    fn adding_an_endpoint_moves_few_keys() {
        let m4 = build(&names(4), &[1; 4]);
        let m5 = build(&names(5), &[1; 5]);
        let eps: Vec<Ep> = (0..5).map(|_| Ep(true)).collect();
        let rng = XorShift::new(9);
        let moved = (0..10_000)
            .filter(|_| {
                let h = rng.next_u64();
                let (a, b) = (m4.pick(&eps[..4], h).unwrap(), m5.pick(&eps, h).unwrap());
                a != b && b != 4
            })
            .count();
        // Ideal is 0 between old endpoints; Maglev allows a little.
        assert!(moved < 1_000, "{moved}");
    }
}
