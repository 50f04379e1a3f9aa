//! What a run measured: every latency kept (bounded), exact percentiles at the end, the JSON
//! report and the validity check.

use serde::Serialize;

/// At most this many latencies (and as many lags of each kind) are kept; a run that would keep more is
/// reported invalid.
pub const MAX_SAMPLES: usize = 50_000_000;
/// A run whose p99 send lag on free connections, or p99 timer lag, is above this is invalid: the
/// generator could not keep to its schedule.
pub const MAX_LAG_P99_US: u32 = 1000;

/// The JSON report of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub target: String,
    pub rate: f64,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Requests scheduled after the warm-up.
    pub scheduled: u64,
    /// Of those, answered (any status from 200 to 599).
    pub completed: u64,
    pub errors: Errors,
    /// `completed` over the measured time: from the end of the warm-up to the later of the end
    /// of the schedule and the last answer.
    pub achieved_rps: f64,
    /// From each request's scheduled time to the end of its answer, over completed requests.
    pub latency_us: Latency,
    /// From the scheduled time to the send, for requests whose connection was free when they
    /// were due: the generator's own lateness.
    pub send_lag_us: SendLag,
    /// From the scheduled time to when the generator's loop saw the request due, for every
    /// request: the generator's lateness even when no connection is ever free.
    pub timer_lag_us: SendLag,
    pub valid: bool,
    pub invalid_reason: Option<String>,
}

/// `connect`, `read` and `timeout` are requests that got no answer (so `completed` plus those
/// three is `scheduled`); `status` counts completed requests answered with a status outside 2xx.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub timeout: u64,
    pub status: u64,
}

/// Exact percentiles (nearest rank) in microseconds; null when nothing completed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub p50: Option<u32>,
    pub p90: Option<u32>,
    pub p99: Option<u32>,
    pub p999: Option<u32>,
    pub max: Option<u32>,
    pub mean: Option<f64>,
}

/// Lag percentiles in microseconds, and how many requests they cover.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SendLag {
    pub p50: Option<u32>,
    pub p99: Option<u32>,
    pub max: Option<u32>,
    pub samples: u64,
}

/// The parameters echoed in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub target: String,
    pub rate: f64,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
}

/// Collects outcomes during the run: plain counters and preallocated vectors, no allocation per
/// request below the capacity given to [`Recorder::new`].
#[derive(Debug)]
pub struct Recorder {
    scheduled: u64,
    latencies: Vec<u32>,
    lags: Vec<u32>,
    timer_lags: Vec<u32>,
    dropped: u64,
    completed: u64,
    errors: Errors,
    last_answer_ns: u64,
}

impl Recorder {
    /// For `scheduled` measured requests.
    pub fn new(scheduled: u64) -> Recorder {
        let cap = usize::try_from(scheduled).unwrap_or(MAX_SAMPLES).min(MAX_SAMPLES);
        Recorder {
            scheduled,
            latencies: Vec::with_capacity(cap),
            lags: Vec::with_capacity(cap),
            timer_lags: Vec::with_capacity(cap),
            dropped: 0,
            completed: 0,
            errors: Errors::default(),
            last_answer_ns: 0,
        }
    }

    /// A complete answer with `status`, `latency_ns` after its scheduled time, at `now_ns`.
    pub fn answer(&mut self, status: u16, latency_ns: u64, now_ns: u64) {
        self.completed += 1;
        if !(200..300).contains(&status) {
            self.errors.status += 1;
        }
        self.last_answer_ns = self.last_answer_ns.max(now_ns);
        if self.latencies.len() < MAX_SAMPLES {
            self.latencies.push(micros(latency_ns));
        } else {
            self.dropped += 1;
        }
    }

    /// A request sent `lag_ns` after its scheduled time on a connection that was free by then.
    pub fn send_lag(&mut self, lag_ns: u64) {
        if self.lags.len() < MAX_SAMPLES {
            self.lags.push(micros(lag_ns));
        }
    }

    /// The loop saw a request due `lag_ns` after its scheduled time.
    pub fn timer_lag(&mut self, lag_ns: u64) {
        if self.timer_lags.len() < MAX_SAMPLES {
            self.timer_lags.push(micros(lag_ns));
        }
    }

    pub fn connect_error(&mut self) {
        self.errors.connect += 1;
    }

    pub fn read_error(&mut self) {
        self.errors.read += 1;
    }

    pub fn timeout(&mut self) {
        self.errors.timeout += 1;
    }

    /// Sorts and summarises. `measure_start_ns` is the end of the warm-up, `schedule_end_ns`
    /// the end of the schedule, both from the start of the run.
    pub fn finish(mut self, params: Params, measure_start_ns: u64, schedule_end_ns: u64) -> Report {
        self.latencies.sort_unstable();
        self.lags.sort_unstable();
        self.timer_lags.sort_unstable();
        let window_ns = schedule_end_ns.max(self.last_answer_ns).saturating_sub(measure_start_ns);
        let achieved_rps = if window_ns == 0 { 0.0 } else { self.completed as f64 * 1e9 / window_ns as f64 };
        let l = &self.latencies;
        let latency_us = Latency {
            p50: percentile(l, 50, 100),
            p90: percentile(l, 90, 100),
            p99: percentile(l, 99, 100),
            p999: percentile(l, 999, 1000),
            max: l.last().copied(),
            mean: mean(l),
        };
        let (send_lag_us, timer_lag_us) = (lag_summary(&self.lags), lag_summary(&self.timer_lags));
        let invalid_reason = if self.dropped > 0 {
            Some(format!("more than {MAX_SAMPLES} answers: {} latencies were not kept", self.dropped))
        } else {
            [("send lag on free connections", &send_lag_us), ("timer lag", &timer_lag_us)].iter().find_map(
                |(what, lag)| {
                    lag.p99.filter(|&p99| p99 > MAX_LAG_P99_US).map(|p99| {
                        format!(
                            "the generator fell behind: p99 {what} {p99} us (limit {MAX_LAG_P99_US} us); \
                             give it a CPU of its own or lower the rate"
                        )
                    })
                },
            )
        };
        Report {
            target: params.target,
            rate: params.rate,
            connections: params.connections,
            duration_s: params.duration_s,
            warmup_s: params.warmup_s,
            scheduled: self.scheduled,
            completed: self.completed,
            errors: self.errors,
            achieved_rps,
            latency_us,
            send_lag_us,
            timer_lag_us,
            valid: invalid_reason.is_none(),
            invalid_reason,
        }
    }
}

impl Report {
    /// One line for humans.
    pub fn summary(&self) -> String {
        let us = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        let e = &self.errors;
        format!(
            "openloop: {} req/s offered, {:.0} achieved, {}/{} completed, errors connect {} read {} timeout {} \
             status {}; latency p50 {} p99 {} p99.9 {} max {} us; send lag p99 {} us, timer lag p99 {} us; {}",
            self.rate,
            self.achieved_rps,
            self.completed,
            self.scheduled,
            e.connect,
            e.read,
            e.timeout,
            e.status,
            us(self.latency_us.p50),
            us(self.latency_us.p99),
            us(self.latency_us.p999),
            us(self.latency_us.max),
            us(self.send_lag_us.p99),
            us(self.timer_lag_us.p99),
            match &self.invalid_reason {
                None => "valid".to_string(),
                Some(why) => format!("INVALID: {why}"),
            }
        )
    }
}

/// The nearest-rank percentile `num / den` of sorted values: the smallest value with at least
/// that fraction of the values at or below it. None for no values.
pub fn percentile(sorted: &[u32], num: u64, den: u64) -> Option<u32> {
    let n = sorted.len() as u64;
    let rank = (n * num).div_ceil(den.max(1)).clamp(1, n.max(1));
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

fn lag_summary(sorted: &[u32]) -> SendLag {
    SendLag {
        p50: percentile(sorted, 50, 100),
        p99: percentile(sorted, 99, 100),
        max: sorted.last().copied(),
        samples: sorted.len() as u64,
    }
}

fn mean(values: &[u32]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(values.iter().map(|&v| u64::from(v)).sum::<u64>() as f64 / values.len() as f64)
}

/// Nanoseconds to whole microseconds, saturating.
fn micros(ns: u64) -> u32 {
    u32::try_from(ns / 1000).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params { target: "http://x/".into(), rate: 100.0, connections: 2, duration_s: 1.0, warmup_s: 0.0 }
    }

    #[test]
    fn percentiles_are_exact_nearest_rank() {
        let v: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&v, 50, 100), Some(500));
        assert_eq!(percentile(&v, 90, 100), Some(900));
        assert_eq!(percentile(&v, 99, 100), Some(990));
        assert_eq!(percentile(&v, 999, 1000), Some(999));
        assert_eq!(percentile(&v, 1, 1), Some(1000));
        assert_eq!(percentile(&v, 0, 100), Some(1), "p0 is the minimum");
        let v = [10, 20, 30, 40];
        assert_eq!(percentile(&v, 50, 100), Some(20));
        assert_eq!(percentile(&v, 51, 100), Some(30));
        assert_eq!(percentile(&v, 99, 100), Some(40));
        assert_eq!(percentile(&[7], 999, 1000), Some(7));
        assert_eq!(percentile(&[], 50, 100), None);
    }

    #[test]
    fn empty_run_has_null_statistics() {
        let r = Recorder::new(0).finish(params(), 0, 1_000_000_000);
        assert_eq!(r.latency_us, Latency { p50: None, p90: None, p99: None, p999: None, max: None, mean: None });
        assert_eq!(r.send_lag_us.samples, 0);
        assert!(r.valid);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["latency_us"]["p50"], serde_json::Value::Null);
        assert_eq!(json["invalid_reason"], serde_json::Value::Null);
    }

    #[test]
    fn counts_and_latencies() {
        let mut rec = Recorder::new(5);
        rec.answer(200, 3_000_999, 1_500_000_000);
        rec.answer(204, 1_000_000, 10);
        rec.answer(503, 2_000_000, 20);
        rec.timeout();
        rec.read_error();
        rec.send_lag(20_000);
        let r = rec.finish(params(), 0, 1_000_000_000);
        assert_eq!((r.scheduled, r.completed), (5, 3));
        assert_eq!(r.errors, Errors { connect: 0, read: 1, timeout: 1, status: 1 });
        assert_eq!(r.latency_us.p50, Some(2000));
        assert_eq!(r.latency_us.max, Some(3000));
        assert_eq!(r.latency_us.mean, Some(2000.0));
        assert_eq!(r.achieved_rps, 2.0, "3 answers over 1.5 s, the last answer after the schedule's end");
        assert!(r.valid);
    }

    #[test]
    fn late_generator_makes_the_run_invalid() {
        let run = |late: usize| {
            let mut rec = Recorder::new(100);
            for i in 0..100 {
                rec.send_lag(if i < 100 - late { 50_000 } else { 5_000_000 });
            }
            rec.finish(params(), 0, 1)
        };
        let one_late = run(1);
        assert_eq!(one_late.send_lag_us.p99, Some(50));
        assert_eq!(one_late.send_lag_us.max, Some(5000));
        assert!(one_late.valid, "one late send in 100 is above p99");
        let two_late = run(2);
        assert!(!two_late.valid);
        assert!(two_late.invalid_reason.unwrap().contains("p99 send lag on free connections 5000 us"));

        // No connection ever free (an overloaded server): the timer lag still tells.
        let mut rec = Recorder::new(100);
        for i in 0..100 {
            rec.timer_lag(if i < 98 { 10_000 } else { 2_000_000 });
        }
        let r = rec.finish(params(), 0, 1);
        assert_eq!(r.send_lag_us.samples, 0);
        assert!(r.invalid_reason.unwrap().contains("p99 timer lag 2000 us"));
    }
}
