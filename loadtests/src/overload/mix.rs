//! The traffic mix (`critical=10,normal=30,sheddable=60`) and the seeded random numbers that
//! pick a class per request and space Poisson arrivals.

use std::fmt;
use std::str::FromStr;

/// Request classes with relative weights, in the order given. Each class is requested on the
/// path `/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    classes: Vec<(String, u32)>,
    total: u64,
}

/// Why a mix could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixError(String);

impl fmt::Display for MixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MixError {}

impl FromStr for Mix {
    type Err = MixError;

    /// `name=weight,name=weight,...`: names of letters, digits, `-` and `_`, unique; weights
    /// whole numbers; at least one weight above zero.
    fn from_str(s: &str) -> Result<Mix, MixError> {
        let mut classes: Vec<(String, u32)> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, weight)) = part.split_once('=') else {
                return Err(MixError(format!("'{part}' is not name=weight")));
            };
            let name = name.trim();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(MixError(format!("class name '{name}' must be letters, digits, '-' or '_'")));
            }
            if classes.iter().any(|(n, _)| n == name) {
                return Err(MixError(format!("class '{name}' appears twice")));
            }
            let weight: u32 =
                weight.trim().parse().map_err(|_| MixError(format!("weight of '{name}' is not a whole number")))?;
            classes.push((name.to_string(), weight));
        }
        let total = classes.iter().map(|(_, w)| u64::from(*w)).sum();
        if total == 0 {
            return Err(MixError("the mix needs at least one class with a weight above 0".into()));
        }
        Ok(Mix { classes, total })
    }
}

impl Mix {
    /// The class names, in the order given; a class is identified by its index here.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.classes.iter().map(|(n, _)| n.as_str())
    }

    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The class for a uniformly random `draw`: each class with probability weight / total.
    pub fn pick(&self, draw: u64) -> usize {
        let mut point = draw % self.total;
        for (i, (_, weight)) in self.classes.iter().enumerate() {
            let weight = u64::from(*weight);
            if point < weight {
                return i;
            }
            point -= weight;
        }
        0 // unreachable: the weights sum to `total`
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, weight)) in self.classes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={weight}")?;
        }
        Ok(())
    }
}

/// SplitMix64: small, fast, and the same sequence for the same seed on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponentially distributed with this mean (Poisson inter-arrival times).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -(1.0 - self.next_f64()).ln() * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_a_mix() {
        let mix: Mix = "critical=10, normal=30,sheddable=60".parse().unwrap();
        assert_eq!(mix.names().collect::<Vec<_>>(), ["critical", "normal", "sheddable"]);
        assert_eq!(mix.to_string(), "critical=10,normal=30,sheddable=60");
    }

    #[test]
    fn refuses_bad_mixes() {
        for bad in ["", "a", "a=x", "a=-1", "a=0", "a=1,a=2", "a/b=1", "=3"] {
            assert!(bad.parse::<Mix>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn picks_by_weight() {
        let mix: Mix = "a=10,b=30,c=60,z=0".parse().unwrap();
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 4];
        for _ in 0..100_000 {
            counts[mix.pick(rng.next_u64())] += 1;
        }
        assert_eq!(counts[3], 0);
        for (i, want) in [10_000, 30_000, 60_000].into_iter().enumerate() {
            assert!(counts[i].abs_diff(want) < 1_500, "{counts:?}");
        }
        // Every draw maps into the table, the edges included.
        assert_eq!(mix.pick(0), 0);
        assert_eq!(mix.pick(99), 2);
        assert_eq!(mix.pick(100), 0);
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(43).next_u64(), xs[0]);
    }

    #[test]
    fn exponential_has_the_requested_mean() {
        let mut rng = Rng::new(1);
        let n = 100_000;
        let mean = (0..n).map(|_| rng.exponential(0.005)).sum::<f64>() / f64::from(n);
        assert!((mean - 0.005).abs() < 0.0002, "{mean}");
    }
}
