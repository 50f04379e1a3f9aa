//! The request schedule: request `k` is due `k / rate` seconds after the start and goes to
//! connection `k % connections`.

/// Uniform arrivals at a fixed rate, in nanoseconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    rate: f64,
    connections: u64,
}

impl Schedule {
    /// `rate` must be finite and above 0, `connections` at least 1 (the config checks both).
    pub fn new(rate: f64, connections: usize) -> Schedule {
        Schedule { rate, connections: connections.max(1) as u64 }
    }

    /// When request `k` is due, in nanoseconds from the start (rounded to the nearest ns; no
    /// error accumulates from one request to the next).
    pub fn due_ns(&self, k: u64) -> u64 {
        (k as f64 * 1e9 / self.rate).round() as u64
    }

    /// The connection request `k` is sent on.
    pub fn connection(&self, k: u64) -> usize {
        (k % self.connections) as usize
    }

    /// The first request on connection `c`.
    pub fn first_on(&self, c: usize) -> u64 {
        c as u64
    }

    /// The next request on the same connection after request `k`.
    pub fn next_on_same(&self, k: u64) -> u64 {
        k.saturating_add(self.connections)
    }

    /// How many requests are due strictly before `t_ns`: the index of the first request due at
    /// or after `t_ns`.
    pub fn count_before(&self, t_ns: u64) -> u64 {
        let mut k = (t_ns as f64 * self.rate / 1e9).ceil().max(0.0) as u64;
        // The float estimate can be one off either way; settle it with due_ns itself.
        while k > 0 && self.due_ns(k - 1) >= t_ns {
            k -= 1;
        }
        while self.due_ns(k) < t_ns {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_are_k_over_rate() {
        let s = Schedule::new(1000.0, 4);
        assert_eq!(s.due_ns(0), 0);
        assert_eq!(s.due_ns(1), 1_000_000);
        assert_eq!(s.due_ns(3), 3_000_000);
        assert_eq!(s.due_ns(1_000_000), 1_000_000_000_000);
        let s = Schedule::new(3.0, 1);
        assert_eq!(s.due_ns(1), 333_333_333);
        assert_eq!(s.due_ns(2), 666_666_667);
        assert_eq!(s.due_ns(3), 1_000_000_000);
        let s = Schedule::new(0.5, 1);
        assert_eq!(s.due_ns(1), 2_000_000_000);
    }

    #[test]
    fn no_drift_over_many_requests() {
        let s = Schedule::new(20_000.0, 64);
        // 20k/s for an hour: request 72M is due exactly at 3600 s.
        assert_eq!(s.due_ns(72_000_000), 3_600_000_000_000);
        let s = Schedule::new(7.0, 1);
        assert_eq!(s.due_ns(7 * 86_400), 86_400_000_000_000);
    }

    #[test]
    fn round_robin_over_connections() {
        let s = Schedule::new(100.0, 3);
        let conns: Vec<usize> = (0..7).map(|k| s.connection(k)).collect();
        assert_eq!(conns, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(s.first_on(2), 2);
        assert_eq!(s.next_on_same(2), 5);
        assert_eq!(s.connection(s.next_on_same(4)), s.connection(4));
        assert_eq!(Schedule::new(100.0, 0).connection(5), 0, "0 connections is treated as 1");
    }

    #[test]
    fn count_before_matches_due_times() {
        let s = Schedule::new(1000.0, 4);
        assert_eq!(s.count_before(0), 0);
        assert_eq!(s.count_before(1), 1, "request 0 is due at 0");
        assert_eq!(s.count_before(1_000_000), 1, "request 1 is due exactly at 1 ms: not before");
        assert_eq!(s.count_before(1_000_001), 2);
        assert_eq!(s.count_before(1_000_000_000), 1000, "1 s at 1000/s: requests 0..1000");
        for rate in [0.3, 1.0, 3.0, 7.7, 333.0, 20_000.0] {
            let s = Schedule::new(rate, 1);
            for t in [0, 1, 999_999_999, 1_000_000_000, 2_500_000_000, 10_000_000_001] {
                let n = s.count_before(t);
                assert!(n == 0 || s.due_ns(n - 1) < t, "rate {rate} t {t}");
                assert!(s.due_ns(n) >= t, "rate {rate} t {t}");
            }
        }
    }
}
