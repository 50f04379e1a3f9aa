//! What an open-loop run measured, per class, per phase and per second.

use std::collections::BTreeMap;
use std::time::Duration;

use std::io::Write as _;

use serde::Serialize;

use super::client::Outcome;

/// One scheduled request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub class: usize,
    /// `None`: no worker was free at the scheduled time, so it was never sent.
    pub outcome: Option<Outcome>,
    /// Scheduled send time, from the start of the run.
    pub scheduled: Duration,
    /// From the scheduled send time to the end of the answer (or the timeout, or the error).
    pub latency: Duration,
    /// From the scheduled send time to the moment a worker started sending: the generator's
    /// own delay, part of `latency`.
    pub lag: Duration,
}

/// The whole report, as `overload-load --out` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub params: Params,
    /// From the first scheduled request to the last answer.
    pub wall_s: f64,
    pub generator: GeneratorStats,
    /// All classes together.
    pub total: ClassStats,
    pub classes: BTreeMap<String, ClassStats>,
    /// Requests split by scheduled time at `params.split_at_s` (empty without it).
    pub phases: Vec<Phase>,
    pub series: Series,
}

#[derive(Debug, Clone, Serialize)]
pub struct Params {
    pub target: String,
    pub rate: f64,
    pub duration_s: f64,
    pub mix: String,
    pub timeout_ms: u64,
    pub arrivals: String,
    pub seed: u64,
    pub workers: usize,
    pub split_at_s: Option<f64>,
}

/// Whether the generator itself kept up; a run is valid only with `overloaded == 0`.
#[derive(Debug, Clone, Serialize)]
pub struct GeneratorStats {
    /// Requests not sent because no worker was free at their scheduled time.
    pub overloaded: u64,
    /// Latest the scheduler woke for a scheduled request.
    pub scheduler_max_lag_ms: f64,
    /// From the scheduled time to the start of sending, over the requests sent: the floor under
    /// every latency measured from the schedule (thread wake-ups on a busy or virtual CPU).
    pub send_lag_ms: Latency,
    pub workers: usize,
    pub connections_opened: u64,
}

/// Counts and latencies of one class (or of all).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassStats {
    /// Scheduled, sent or not.
    pub offered: u64,
    /// 2xx.
    pub succeeded: u64,
    /// 503.
    pub shed: u64,
    /// 429.
    pub rate_limited: u64,
    /// No complete answer within the client timeout.
    pub timed_out: u64,
    /// Everything else: `error_status` + `connect_errors` + `io_errors`.
    pub errors: u64,
    /// Other statuses by code (504 is a proxy's own upstream timeout).
    pub error_status: BTreeMap<String, u64>,
    pub connect_errors: u64,
    pub io_errors: u64,
    /// Not sent: no worker was free (see [`GeneratorStats`]).
    pub generator_overloaded: u64,
    /// Latency of the successes, from their scheduled send time.
    pub ok_ms: Latency,
    /// Latency of the 503s.
    pub shed_ms: Latency,
    /// Latency of the 503s from the moment a worker started sending them (without the
    /// generator's own lag).
    pub shed_from_send_ms: Latency,
    /// Longest any sent request took to end, however it ended (timeouts included).
    pub max_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub from_s: f64,
    pub to_s: f64,
    pub total: ClassStats,
    pub classes: BTreeMap<String, ClassStats>,
}

/// Per-second counts: `offered` by scheduled time, the others by the time the answer ended.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub interval_s: f64,
    pub classes: BTreeMap<String, ClassSeries>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassSeries {
    pub offered: Vec<u64>,
    pub succeeded: Vec<u64>,
    pub shed: Vec<u64>,
    /// Every other ending: 429, timeouts, errors.
    pub failed: Vec<u64>,
}

impl ClassStats {
    pub(crate) fn of<'a>(records: impl Iterator<Item = &'a Record>) -> ClassStats {
        let mut s = ClassStats::default();
        let (mut ok, mut shed, mut shed_from_send, mut max) = (Vec::new(), Vec::new(), Vec::new(), None::<Duration>);
        for r in records {
            s.offered += 1;
            let Some(outcome) = r.outcome else {
                s.generator_overloaded += 1;
                continue;
            };
            max = max.max(Some(r.latency));
            match outcome {
                Outcome::Status(200..=299) => {
                    s.succeeded += 1;
                    ok.push(r.latency);
                }
                Outcome::Status(503) => {
                    s.shed += 1;
                    shed.push(r.latency);
                    shed_from_send.push(r.latency.saturating_sub(r.lag));
                }
                Outcome::Status(429) => s.rate_limited += 1,
                Outcome::Status(code) => *s.error_status.entry(code.to_string()).or_default() += 1,
                Outcome::TimedOut => s.timed_out += 1,
                Outcome::Connect => s.connect_errors += 1,
                Outcome::Io => s.io_errors += 1,
            }
        }
        s.errors = s.error_status.values().sum::<u64>() + s.connect_errors + s.io_errors;
        s.ok_ms = Latency::of(ok);
        s.shed_ms = Latency::of(shed);
        s.shed_from_send_ms = Latency::of(shed_from_send);
        s.max_ms = max.map(ms);
        s
    }
}

impl Latency {
    pub(crate) fn of(mut samples: Vec<Duration>) -> Latency {
        samples.sort_unstable();
        Latency {
            count: samples.len() as u64,
            p50: percentile(&samples, 50.0).map(ms),
            p90: percentile(&samples, 90.0).map(ms),
            p99: percentile(&samples, 99.0).map(ms),
            max: samples.last().copied().map(ms),
        }
    }
}

/// Per-class statistics of `records`, keyed by class name.
pub(crate) fn by_class<'a>(
    names: &[String],
    records: impl Iterator<Item = &'a Record> + Clone,
) -> BTreeMap<String, ClassStats> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.clone(), ClassStats::of(records.clone().filter(|r| r.class == i))))
        .collect()
}

/// Per-second counts over `seconds` buckets (later endings go to the last bucket).
pub(crate) fn series(names: &[String], records: &[Record], seconds: usize) -> Series {
    let mut classes: Vec<ClassSeries> = names
        .iter()
        .map(|_| ClassSeries {
            offered: vec![0; seconds],
            succeeded: vec![0; seconds],
            shed: vec![0; seconds],
            failed: vec![0; seconds],
        })
        .collect();
    let last = seconds.saturating_sub(1);
    let bucket = |d: Duration| (d.as_secs() as usize).min(last);
    for r in records {
        let Some(c) = classes.get_mut(r.class) else {
            continue;
        };
        bump(&mut c.offered, bucket(r.scheduled));
        let ended = bucket(r.scheduled + r.latency);
        match r.outcome {
            Some(Outcome::Status(200..=299)) => bump(&mut c.succeeded, ended),
            Some(Outcome::Status(503)) => bump(&mut c.shed, ended),
            Some(_) => bump(&mut c.failed, ended),
            None => {}
        }
    }
    Series { interval_s: 1.0, classes: names.iter().cloned().zip(classes).collect() }
}

/// Every record as a CSV line (see [`super::run_recorded`]).
pub(crate) fn write_csv(names: &[String], records: &[Record], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(out);
    writeln!(w, "class,scheduled_ms,latency_ms,lag_ms,outcome")?;
    for r in records {
        let outcome = match r.outcome {
            None => "unsent".to_string(),
            Some(Outcome::Status(s)) => s.to_string(),
            Some(Outcome::TimedOut) => "timeout".into(),
            Some(Outcome::Connect) => "connect".into(),
            Some(Outcome::Io) => "io".into(),
        };
        let class = names.get(r.class).map_or("?", String::as_str);
        writeln!(w, "{class},{:.3},{:.3},{:.3},{outcome}", ms(r.scheduled), ms(r.latency), ms(r.lag))?;
    }
    w.flush()
}

fn bump(counts: &mut [u64], i: usize) {
    if let Some(c) = counts.get_mut(i) {
        *c += 1;
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Milliseconds, to the microsecond.
fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(class: usize, outcome: Option<Outcome>, scheduled_ms: u64, latency_ms: u64) -> Record {
        Record {
            class,
            outcome,
            scheduled: Duration::from_millis(scheduled_ms),
            latency: Duration::from_millis(latency_ms),
            lag: Duration::ZERO,
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&v, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&v, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(percentile(&v[..1], 99.0), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn classifies_every_outcome() {
        let records = [
            rec(0, Some(Outcome::Status(200)), 0, 40),
            rec(0, Some(Outcome::Status(204)), 0, 42),
            rec(0, Some(Outcome::Status(503)), 0, 1),
            rec(0, Some(Outcome::Status(429)), 0, 1),
            rec(0, Some(Outcome::Status(504)), 0, 2000),
            rec(0, Some(Outcome::Status(502)), 0, 3),
            rec(0, Some(Outcome::TimedOut), 0, 3000),
            rec(0, Some(Outcome::Connect), 0, 0),
            rec(0, Some(Outcome::Io), 0, 5),
            rec(0, None, 0, 0),
        ];
        let s = ClassStats::of(records.iter());
        assert_eq!((s.offered, s.succeeded, s.shed, s.rate_limited, s.timed_out), (10, 2, 1, 1, 1));
        assert_eq!((s.errors, s.connect_errors, s.io_errors, s.generator_overloaded), (4, 1, 1, 1));
        assert_eq!(s.error_status.get("504"), Some(&1));
        assert_eq!((s.ok_ms.count, s.ok_ms.p50, s.ok_ms.max), (2, Some(40.0), Some(42.0)));
        assert_eq!(s.shed_ms.p99, Some(1.0));
        assert_eq!(s.shed_from_send_ms.p99, Some(1.0));
        assert_eq!(s.max_ms, Some(3000.0));
    }

    #[test]
    fn series_counts_offers_by_schedule_and_endings_by_end_time() {
        let names = vec!["a".to_string(), "b".to_string()];
        let records = [
            rec(0, Some(Outcome::Status(200)), 900, 200), // offered in 0, ended in 1
            rec(1, Some(Outcome::Status(503)), 100, 1),
            rec(1, Some(Outcome::TimedOut), 1500, 5000), // ends after the last bucket
            rec(1, None, 1900, 0),
        ];
        let s = series(&names, &records, 3);
        let a = &s.classes["a"];
        assert_eq!((a.offered.clone(), a.succeeded.clone()), (vec![1, 0, 0], vec![0, 1, 0]));
        let b = &s.classes["b"];
        assert_eq!(
            (b.offered.clone(), b.shed.clone(), b.failed.clone()),
            (vec![1, 2, 0], vec![1, 0, 0], vec![0, 0, 1])
        );
    }
}
