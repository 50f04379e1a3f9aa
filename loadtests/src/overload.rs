//! An open-loop load generator for the overload benchmark.
//!
//! Requests are scheduled at a fixed total rate (evenly spaced, or Poisson) whatever the
//! answers do, each with a class drawn from a seeded [`Mix`] and sent as `GET /<class>`. A
//! scheduler thread hands each request, at its scheduled time, to an idle worker (each worker
//! owns one keep-alive connection); if no worker is idle the request is counted as "generator
//! overloaded" and not sent, so a valid run has none. Latency runs from the scheduled time, so
//! a slow server cannot hide its delay by slowing the generator (no coordinated omission).

mod client;
mod mix;
mod report;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub use client::Outcome;
pub use mix::{Mix, MixError, Rng};
pub use report::{ClassSeries, ClassStats, GeneratorStats, Latency, Params, Phase, Report, Series};

use client::Client;
use report::Record;

/// How requests are spread over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Exactly `1 / rate` apart.
    Uniform,
    /// Exponentially distributed gaps with mean `1 / rate` (seeded).
    Poisson,
}

/// One run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: SocketAddr,
    /// The `Host` header.
    pub host: String,
    /// Requests per second, all classes together.
    pub rate: f64,
    pub duration: Duration,
    pub mix: Mix,
    /// Client timeout per request, from its scheduled time.
    pub timeout: Duration,
    pub arrivals: Arrivals,
    pub seed: u64,
    /// Worker threads, one connection each.
    pub workers: usize,
    /// Report the requests scheduled before and after this time separately.
    pub split_at: Option<Duration>,
}

/// A job for a worker.
struct Job {
    class: usize,
    /// From the start of the run.
    scheduled: Duration,
    /// The same, as an instant.
    due: Instant,
}

/// Resolves `http://host:port[/...]` to an address and a `Host` header value.
pub fn parse_target(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("target '{url}' must start with http://"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.is_empty() {
        return Err(format!("target '{url}' has no host"));
    }
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())) {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{authority}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{authority}' resolves to no address"))?;
    Ok((addr, authority.to_string()))
}

/// Workers enough for every request to be in flight for the whole timeout: `rate` x (timeout
/// + 1/4 s), plus 16.
pub fn default_workers(rate: f64, timeout: Duration) -> usize {
    (rate * (timeout.as_secs_f64() + 0.25)).ceil() as usize + 16
}

/// Runs the load and waits for the last answer (at most `timeout` after the last scheduled
/// request).
pub fn run(cfg: &LoadConfig) -> io::Result<Report> {
    run_recorded(cfg, None)
}

/// [`run`], also writing every scheduled request to `records` as CSV: `class,scheduled_ms,
/// latency_ms,lag_ms,outcome` (outcome: the status, `timeout`, `connect`, `io` or `unsent`),
/// in scheduled order: for looking at how latency moved over a run.
pub fn run_recorded(cfg: &LoadConfig, records_out: Option<&mut dyn io::Write>) -> io::Result<Report> {
    if !(cfg.rate > 0.0 && cfg.rate.is_finite()) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the rate must be above 0"));
    }
    let names: Vec<String> = cfg.mix.names().map(str::to_string).collect();
    let requests: Arc<Vec<Vec<u8>>> = Arc::new(
        names
            .iter()
            .map(|n| {
                format!("GET /{n} HTTP/1.1\r\nhost: {}\r\nuser-agent: overload-load\r\n\r\n", cfg.host).into_bytes()
            })
            .collect(),
    );
    let idle: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new((0..cfg.workers).rev().collect()));
    let mut senders: Vec<SyncSender<Job>> = Vec::with_capacity(cfg.workers);
    let mut workers = Vec::with_capacity(cfg.workers);
    for id in 0..cfg.workers {
        let (tx, rx) = sync_channel::<Job>(1);
        let ctx = Worker {
            id,
            timeout: cfg.timeout,
            requests: Arc::clone(&requests),
            idle: Arc::clone(&idle),
            client: Client::new(cfg.target),
        };
        let spawned =
            thread::Builder::new().name("load-worker".into()).stack_size(128 * 1024).spawn(move || ctx.run(&rx));
        match spawned {
            Ok(handle) => workers.push(handle),
            Err(e) => {
                drop(senders); // ends the workers already started
                return Err(e);
            }
        }
        senders.push(tx);
    }

    // The run starts once every worker exists (spawning thousands takes a while).
    let start = Instant::now() + Duration::from_millis(50);
    let (unsent, max_lag) = schedule(cfg, start, &idle, &senders);
    drop(senders);
    let mut records = unsent;
    let mut opened = 0;
    for handle in workers {
        if let Ok((worker_records, worker_opened)) = handle.join() {
            records.extend(worker_records);
            opened += worker_opened;
        }
    }
    let wall = Instant::now().saturating_duration_since(start);
    records.sort_by_key(|r| r.scheduled);

    let phases = match cfg.split_at {
        Some(split) if split < cfg.duration => [(Duration::ZERO, split), (split, cfg.duration)]
            .into_iter()
            .map(|(from, to)| {
                let in_phase = records.iter().filter(move |r| r.scheduled >= from && r.scheduled < to);
                Phase {
                    from_s: from.as_secs_f64(),
                    to_s: to.as_secs_f64(),
                    total: ClassStats::of(in_phase.clone()),
                    classes: report::by_class(&names, in_phase),
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    if let Some(out) = records_out {
        report::write_csv(&names, &records, out)?;
    }
    let seconds = (cfg.duration + cfg.timeout).as_secs_f64().ceil() as usize + 1;
    let total = ClassStats::of(records.iter());
    Ok(Report {
        params: Params {
            target: format!("http://{}", cfg.host),
            rate: cfg.rate,
            duration_s: cfg.duration.as_secs_f64(),
            mix: cfg.mix.to_string(),
            timeout_ms: cfg.timeout.as_millis() as u64,
            arrivals: match cfg.arrivals {
                Arrivals::Uniform => "uniform".into(),
                Arrivals::Poisson => "poisson".into(),
            },
            seed: cfg.seed,
            workers: cfg.workers,
            split_at_s: cfg.split_at.map(|d| d.as_secs_f64()),
        },
        wall_s: wall.as_secs_f64(),
        generator: GeneratorStats {
            overloaded: total.generator_overloaded,
            scheduler_max_lag_ms: max_lag.as_micros() as f64 / 1000.0,
            send_lag_ms: Latency::of(records.iter().filter(|r| r.outcome.is_some()).map(|r| r.lag).collect()),
            workers: cfg.workers,
            connections_opened: opened,
        },
        classes: report::by_class(&names, records.iter()),
        total,
        phases,
        series: report::series(&names, &records, seconds),
    })
}

/// Hands out every scheduled request; returns the ones no worker was free for, and how late
/// the scheduler woke at worst.
fn schedule(
    cfg: &LoadConfig,
    start: Instant,
    idle: &Mutex<Vec<usize>>,
    senders: &[SyncSender<Job>],
) -> (Vec<Record>, Duration) {
    let mut rng = Rng::new(cfg.seed);
    let mut unsent = Vec::new();
    let mut max_lag = Duration::ZERO;
    let gap = 1.0 / cfg.rate;
    let end = cfg.duration.as_secs_f64();
    let mut at = 0.0_f64;
    let mut n: u64 = 0;
    while at < end {
        let scheduled = Duration::from_secs_f64(at);
        let due = start + scheduled;
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        max_lag = max_lag.max(Instant::now().saturating_duration_since(due));
        let class = cfg.mix.pick(rng.next_u64());
        let worker = lock(idle).pop();
        let job = Job { class, scheduled, due };
        let sent = worker.and_then(|w| senders.get(w)).is_some_and(|tx| tx.try_send(job).is_ok());
        if !sent {
            unsent.push(Record { class, outcome: None, scheduled, latency: Duration::ZERO, lag: Duration::ZERO });
        }
        n += 1;
        at = match cfg.arrivals {
            Arrivals::Uniform => n as f64 * gap,
            Arrivals::Poisson => at + rng.exponential(gap),
        };
    }
    (unsent, max_lag)
}

/// A worker thread: one connection, one request at a time.
struct Worker {
    id: usize,
    timeout: Duration,
    requests: Arc<Vec<Vec<u8>>>,
    idle: Arc<Mutex<Vec<usize>>>,
    client: Client,
}

impl Worker {
    fn run(mut self, jobs: &Receiver<Job>) -> (Vec<Record>, u64) {
        let mut records = Vec::new();
        while let Ok(job) = jobs.recv() {
            let due = job.due;
            let lag = Instant::now().saturating_duration_since(due);
            let outcome = match self.requests.get(job.class) {
                Some(request) => self.client.exchange(request, due + self.timeout),
                None => Outcome::Io,
            };
            let latency = Instant::now().saturating_duration_since(due);
            // An answer that ended after the deadline (the thread ran late) is not one either.
            let (outcome, latency) =
                if latency > self.timeout { (Outcome::TimedOut, self.timeout) } else { (outcome, latency) };
            records.push(Record { class: job.class, outcome: Some(outcome), scheduled: job.scheduled, latency, lag });
            lock(&self.idle).push(self.id);
        }
        (records, self.client.opened)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
