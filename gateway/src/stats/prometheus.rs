//! Prometheus text exposition (format 0.0.4) of the workers' stats and metric sets.
//!
//! Runs on the admin thread at scrape time: it reads every worker's counters with relaxed loads
//! and writes each family of [`super::metrics`] once, `# HELP` and `# TYPE` first, then one
//! sample per worker (and route, cluster, class, reason). Workers are never stopped or locked
//! out: a scrape sees each counter at a slightly different moment, which Prometheus tolerates.

use std::collections::HashMap;
use std::fmt::{Display, Write};
use std::sync::Arc;
use std::time::Duration;

use super::histogram::{HistogramSnapshot, LE_LABELS};
use super::metrics::{
    Family, ACCESS_LOG_LINES, ACCESS_LOG_WRITE_ERRORS, CLUSTER_CONNECTS, CLUSTER_DURATION, CLUSTER_EJECTED,
    CLUSTER_EJECTIONS, CLUSTER_FAILURES, CLUSTER_LIMIT, CLUSTER_PANIC_PICKS, CLUSTER_REQUESTS, CLUSTER_REUSES,
    CLUSTER_SUSPECTS_PASSED_OVER, CLUSTER_TRY_TIMEOUTS, CONFIG_RELOADS, CONFIG_VERSION, DNS_CHANGES, DNS_FAILURES,
    DNS_RESOLUTIONS, DRAINING, ENDPOINT_HEALTHY, HEALTH_CHECKS, HEALTH_TRANSITIONS, PRIORITY_REQUESTS, ROUTE_DECISIONS,
    ROUTE_DURATION, ROUTE_MIRRORS, ROUTE_RATE_LIMIT_EVICTIONS, ROUTE_REQUESTS, ROUTE_SPLITS, UPTIME, WORKERS_UNHEALTHY,
    WORKER_FAMILIES,
};
use super::metrics::{
    ADMIN_REQUESTS, BUILD_INFO, CONFIG_LAST_RELOAD_SUCCESS, CONFIG_LAST_RELOAD_SUCCESS_TIME, ENDPOINT_DURATION,
    ENDPOINT_REQUESTS, PROCESS_CPU, PROCESS_MAX_FDS, PROCESS_OPEN_FDS, PROCESS_RESIDENT, PROCESS_START_TIME,
    PROCESS_VIRTUAL, TLS_CERT_EXPIRY,
};
use super::process::ProcessStats;
use super::series::{ClusterMetrics, FailureReason, RouteMetrics, SplitMetrics, WorkerMetrics, CLASS_OUTCOMES};
use super::series::{MIRROR_RESULTS, SPLIT_REASONS, STATUS_CLASSES};
use super::WorkerStats;

/// The `Content-Type` of [`render_prometheus`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Process-wide facts for the scrape, gathered by the admin thread.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    pub config_version: u64,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub access_log_written: u64,
    pub access_log_dropped: u64,
    pub access_log_write_errors: u64,
    pub draining: bool,
    pub uptime: Duration,
    /// Workers stuck (no tick within the stall limit) or dead, as `/healthz` counts them.
    pub workers_unhealthy: u64,
    /// The labels of `gateway_build_info`: version, profile, arch.
    pub build: [&'static str; 3],
    /// Whether the last load of the configuration succeeded, and when the last success was
    /// (unix seconds).
    pub last_reload_ok: bool,
    pub last_reload_success_time: f64,
    /// Every served certificate.
    pub certificates: Vec<CertificateSample>,
    /// `/proc/self` values, when read.
    pub process: Option<ProcessStats>,
    /// Admin requests by path (the label values of `gateway_admin_requests_total`).
    pub admin_requests: Vec<(&'static str, u64)>,
    /// The configured priority class names, in order (labels of `gateway_priority_requests_total`).
    pub classes: Vec<String>,
    /// Each worker's requests and latency per upstream endpoint.
    pub endpoints: Vec<EndpointSample>,
    /// Every endpoint's active health (the process's health registry).
    pub health: Vec<EndpointHealthSample>,
    /// Re-resolution counters of every cluster with host-name endpoints.
    pub dns: Vec<DnsSample>,
}

/// One cluster's re-resolution counters (see `crate::dns`).
#[derive(Debug, Clone, Default)]
pub struct DnsSample {
    pub cluster: String,
    pub resolutions: u64,
    pub failures: u64,
    pub changes: u64,
}

/// One served certificate, as `gateway_tls_certificate_expiry_seconds` shows it.
#[derive(Debug, Clone, Default)]
pub struct CertificateSample {
    pub listener: String,
    pub name: String,
    pub serial: String,
    /// Unix seconds.
    pub not_after: i64,
}

/// One worker's counts for one upstream endpoint.
#[derive(Debug, Clone)]
pub struct EndpointSample {
    pub cluster: String,
    pub endpoint: String,
    pub worker: usize,
    /// By status class, indexed like `STATUS_CLASSES`.
    pub requests: [u64; 5],
    pub latency: HistogramSnapshot,
}

/// One endpoint's active-health counters, as the exposition shows them.
#[derive(Debug, Clone, Default)]
pub struct EndpointHealthSample {
    pub cluster: String,
    pub endpoint: String,
    pub checks_passed: u64,
    pub checks_failed: u64,
    pub became_healthy: u64,
    pub became_unhealthy: u64,
    pub healthy: bool,
}

/// Appends the exposition of every family to `out`. Each pair is one worker's stats and metric
/// sets; its `worker` label is [`WorkerMetrics::worker`], so ids must be distinct. With
/// `per_worker` false (the default view) every series is summed over the workers and written
/// once, without the `worker` label.
pub fn render_prometheus(
    out: &mut String,
    workers: &[(Arc<WorkerStats>, Arc<WorkerMetrics>)],
    process: &ProcessInfo,
    per_worker: bool,
) {
    let views: Vec<WorkerView> = workers.iter().map(|(stats, metrics)| WorkerView::read(stats, metrics)).collect();
    let mut w = Writer { out, sums: (!per_worker).then(Sums::default) };
    w.worker_families(&views);
    w.priority_families(&views, &process.classes);
    w.route_families(&views);
    w.cluster_families(&views);
    w.health_families(&process.health);
    w.dns_families(&process.dns);
    w.endpoint_families(&process.endpoints);
    w.process_families(process);
    w.flush();
}

/// The series of the family being written, summed over workers: each series' text (name,
/// suffix and labels but `worker`) and its running sum, in first-seen order.
#[derive(Default)]
struct Sums {
    index: HashMap<String, usize>,
    series: Vec<(String, Value)>,
    key: String,
}

/// A sample's value, kept in its type so that sums of integers stay exact.
#[derive(Debug, Clone, Copy)]
enum Value {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

impl Value {
    fn add(self, other: Value) -> Value {
        match (self, other) {
            (Value::Unsigned(a), Value::Unsigned(b)) => Value::Unsigned(a.wrapping_add(b)),
            (Value::Signed(a), Value::Signed(b)) => Value::Signed(a.wrapping_add(b)),
            (a, b) => Value::Float(a.as_f64() + b.as_f64()),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Value::Unsigned(v) => v as f64,
            Value::Signed(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

impl Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Unsigned(v) => v.fmt(f),
            Value::Signed(v) => v.fmt(f),
            Value::Float(v) => v.fmt(f),
        }
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Unsigned(v)
    }
}

impl From<u8> for Value {
    fn from(v: u8) -> Self {
        Value::Unsigned(v.into())
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Signed(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// One worker's values, read once per scrape.
struct WorkerView {
    id: String,
    stats: Vec<u64>,
    classes: Vec<[u64; CLASS_OUTCOMES.len()]>,
    routes: Vec<(Arc<str>, Arc<RouteMetrics>)>,
    splits: Vec<(String, String, Arc<SplitMetrics>)>,
    clusters: Vec<(Arc<str>, Arc<ClusterMetrics>)>,
}

impl WorkerView {
    fn read(stats: &WorkerStats, metrics: &WorkerMetrics) -> Self {
        Self {
            id: metrics.worker().to_string(),
            stats: stats.values(),
            classes: (0..super::series::MAX_PRIORITY_CLASSES).map(|c| metrics.class_counts(c)).collect(),
            routes: metrics.routes(),
            splits: metrics.splits(),
            clusters: metrics.clusters(),
        }
    }

    fn field(&self, name: &str) -> Option<u64> {
        let index = WorkerStats::FIELDS.iter().position(|(field, _)| *field == name)?;
        self.stats.get(index).copied()
    }
}

struct Writer<'a> {
    out: &'a mut String,
    /// Summing over workers (the default view); `None` writes each worker's series.
    sums: Option<Sums>,
}

impl Writer<'_> {
    fn worker_families(&mut self, views: &[WorkerView]) {
        for wf in WORKER_FAMILIES {
            self.header(&wf.family);
            for view in views {
                for (field, class) in wf.fields {
                    let Some(value) = view.field(field) else { continue };
                    let worker = ("worker", view.id.as_str());
                    // A family split over several fields labels them with its first label.
                    let split = wf.family.labels.first().copied().unwrap_or("class");
                    let labels: &[(&str, &str)] = match class {
                        Some(class) => &[(split, class), worker],
                        None => &[worker],
                    };
                    if wf.family.kind == super::metrics::Kind::Gauge {
                        // A gauge is a wrapping up/down counter; show an (impossible) underflow
                        // as negative rather than as 2^64 - n.
                        self.sample(wf.family.name, "", labels, value as i64);
                    } else {
                        self.sample(wf.family.name, "", labels, value);
                    }
                }
            }
        }
    }

    fn route_families(&mut self, views: &[WorkerView]) {
        self.header(&ROUTE_REQUESTS);
        for view in views {
            for (route, metrics) in &view.routes {
                for (class, value) in STATUS_CLASSES.iter().zip(metrics.requests()) {
                    let labels = [("route", &**route), ("class", class), ("worker", &view.id)];
                    self.sample(ROUTE_REQUESTS.name, "", &labels, value);
                }
            }
        }
        self.header(&ROUTE_DECISIONS);
        for view in views {
            for (route, metrics) in &view.routes {
                for (outcome, value) in CLASS_OUTCOMES.iter().zip(metrics.decisions()) {
                    let labels = [("route", &**route), ("outcome", outcome), ("worker", &view.id)];
                    self.sample(ROUTE_DECISIONS.name, "", &labels, value);
                }
            }
        }
        self.header(&ROUTE_DURATION);
        for view in views {
            for (route, metrics) in &view.routes {
                self.histogram(ROUTE_DURATION.name, &[("route", route), ("worker", &view.id)], &metrics.latency());
            }
        }
        self.header(&ROUTE_SPLITS);
        for view in views {
            for (route, cluster, metrics) in &view.splits {
                for (reason, value) in SPLIT_REASONS.iter().zip(metrics.decisions()) {
                    let labels =
                        [("route", route.as_str()), ("cluster", cluster), ("reason", reason), ("worker", &view.id)];
                    self.sample(ROUTE_SPLITS.name, "", &labels, value);
                }
            }
        }
        self.header(&ROUTE_MIRRORS);
        for view in views {
            // Only routes that mirrored (or tried to): every route has the counters.
            for (route, metrics) in view.routes.iter().filter(|(_, m)| m.mirrors().iter().any(|n| *n > 0)) {
                for (result, value) in MIRROR_RESULTS.iter().zip(metrics.mirrors()) {
                    let labels = [("route", &**route), ("result", result), ("worker", &view.id)];
                    self.sample(ROUTE_MIRRORS.name, "", &labels, value);
                }
            }
        }
        self.header(&ROUTE_RATE_LIMIT_EVICTIONS);
        for view in views {
            // Only routes that evicted keys (every route has the counter).
            for (route, metrics) in view.routes.iter().filter(|(_, m)| m.rate_limit_evictions() > 0) {
                let labels = [("route", &**route), ("worker", &view.id)];
                self.sample(ROUTE_RATE_LIMIT_EVICTIONS.name, "", &labels, metrics.rate_limit_evictions());
            }
        }
    }

    fn cluster_families(&mut self, views: &[WorkerView]) {
        self.header(&CLUSTER_REQUESTS);
        for view in views {
            for (cluster, metrics) in &view.clusters {
                for (class, value) in STATUS_CLASSES.iter().zip(metrics.requests()) {
                    let labels = [("cluster", &**cluster), ("class", class), ("worker", &view.id)];
                    self.sample(CLUSTER_REQUESTS.name, "", &labels, value);
                }
            }
        }
        self.header(&CLUSTER_DURATION);
        for view in views {
            for (cluster, metrics) in &view.clusters {
                let labels = [("cluster", &**cluster), ("worker", &view.id)];
                self.histogram(CLUSTER_DURATION.name, &labels, &metrics.latency());
            }
        }
        self.cluster_counter(&CLUSTER_CONNECTS, views, ClusterMetrics::connects);
        self.cluster_counter(&CLUSTER_REUSES, views, ClusterMetrics::reuses);
        self.cluster_counter(&CLUSTER_LIMIT, views, ClusterMetrics::limit);
        self.header(&CLUSTER_FAILURES);
        for view in views {
            for (cluster, metrics) in &view.clusters {
                for (reason, value) in FailureReason::ALL.iter().zip(metrics.failures()) {
                    let labels = [("cluster", &**cluster), ("reason", reason.label()), ("worker", &view.id)];
                    self.sample(CLUSTER_FAILURES.name, "", &labels, value);
                }
            }
        }
        self.header(&CLUSTER_EJECTIONS);
        for view in views {
            for (cluster, metrics) in &view.clusters {
                for (reason, value) in super::metrics::EjectReason::ALL.iter().zip(metrics.ejections()) {
                    let labels = [("cluster", &**cluster), ("reason", reason.label()), ("worker", &view.id)];
                    self.sample(CLUSTER_EJECTIONS.name, "", &labels, value);
                }
            }
        }
        self.cluster_counter(&CLUSTER_EJECTED, views, ClusterMetrics::ejected);
        self.cluster_counter(&CLUSTER_PANIC_PICKS, views, ClusterMetrics::panic_picks);
        self.cluster_counter(&CLUSTER_SUSPECTS_PASSED_OVER, views, ClusterMetrics::suspects_passed_over);
        self.cluster_counter(&CLUSTER_TRY_TIMEOUTS, views, ClusterMetrics::try_timeouts);
    }

    fn health_families(&mut self, health: &[EndpointHealthSample]) {
        self.header(&HEALTH_CHECKS);
        for h in health {
            for (result, value) in [("passed", h.checks_passed), ("failed", h.checks_failed)] {
                let labels = [("cluster", h.cluster.as_str()), ("endpoint", h.endpoint.as_str()), ("result", result)];
                self.sample(HEALTH_CHECKS.name, "", &labels, value);
            }
        }
        self.header(&HEALTH_TRANSITIONS);
        for h in health {
            for (to, value) in [("healthy", h.became_healthy), ("unhealthy", h.became_unhealthy)] {
                let labels = [("cluster", h.cluster.as_str()), ("endpoint", h.endpoint.as_str()), ("to", to)];
                self.sample(HEALTH_TRANSITIONS.name, "", &labels, value);
            }
        }
        self.header(&ENDPOINT_HEALTHY);
        for h in health {
            let labels = [("cluster", h.cluster.as_str()), ("endpoint", h.endpoint.as_str())];
            self.sample(ENDPOINT_HEALTHY.name, "", &labels, u8::from(h.healthy));
        }
    }

    fn dns_families(&mut self, dns: &[DnsSample]) {
        for (family, value) in [
            (&DNS_RESOLUTIONS, (|d: &DnsSample| d.resolutions) as fn(&DnsSample) -> u64),
            (&DNS_FAILURES, |d| d.failures),
            (&DNS_CHANGES, |d| d.changes),
        ] {
            self.header(family);
            for d in dns {
                self.sample(family.name, "", &[("cluster", d.cluster.as_str())], value(d));
            }
        }
    }

    fn endpoint_families(&mut self, endpoints: &[EndpointSample]) {
        self.header(&ENDPOINT_REQUESTS);
        for e in endpoints {
            let worker = e.worker.to_string();
            for (class, value) in STATUS_CLASSES.iter().zip(e.requests) {
                let labels = [
                    ("cluster", e.cluster.as_str()),
                    ("endpoint", e.endpoint.as_str()),
                    ("class", class),
                    ("worker", &worker),
                ];
                self.sample(ENDPOINT_REQUESTS.name, "", &labels, value);
            }
        }
        self.header(&ENDPOINT_DURATION);
        for e in endpoints {
            let worker = e.worker.to_string();
            let labels = [("cluster", e.cluster.as_str()), ("endpoint", e.endpoint.as_str()), ("worker", &worker)];
            self.histogram(ENDPOINT_DURATION.name, &labels, &e.latency);
        }
    }

    fn cluster_counter(&mut self, family: &Family, views: &[WorkerView], read: fn(&ClusterMetrics) -> u64) {
        self.header(family);
        for view in views {
            for (cluster, metrics) in &view.clusters {
                self.sample(family.name, "", &[("cluster", cluster), ("worker", &view.id)], read(metrics));
            }
        }
    }

    fn priority_families(&mut self, views: &[WorkerView], classes: &[String]) {
        self.header(&PRIORITY_REQUESTS);
        for view in views {
            for (name, counts) in classes.iter().zip(&view.classes) {
                for (outcome, value) in CLASS_OUTCOMES.iter().zip(counts) {
                    let labels = [("priority", name.as_str()), ("outcome", *outcome), ("worker", &view.id)];
                    self.sample(PRIORITY_REQUESTS.name, "", &labels, *value);
                }
            }
        }
    }

    fn process_families(&mut self, p: &ProcessInfo) {
        self.header(&CONFIG_VERSION);
        self.sample(CONFIG_VERSION.name, "", &[], p.config_version);
        self.header(&CONFIG_RELOADS);
        self.sample(CONFIG_RELOADS.name, "", &[("result", "ok")], p.reloads_ok);
        self.sample(CONFIG_RELOADS.name, "", &[("result", "failed")], p.reloads_failed);
        self.header(&ACCESS_LOG_LINES);
        self.sample(ACCESS_LOG_LINES.name, "", &[("result", "written")], p.access_log_written);
        self.sample(ACCESS_LOG_LINES.name, "", &[("result", "dropped")], p.access_log_dropped);
        self.header(&ACCESS_LOG_WRITE_ERRORS);
        self.sample(ACCESS_LOG_WRITE_ERRORS.name, "", &[], p.access_log_write_errors);
        self.header(&DRAINING);
        self.sample(DRAINING.name, "", &[], u8::from(p.draining));
        self.header(&UPTIME);
        self.sample(UPTIME.name, "", &[], p.uptime.as_secs_f64());
        self.header(&WORKERS_UNHEALTHY);
        self.sample(WORKERS_UNHEALTHY.name, "", &[], p.workers_unhealthy);
        self.header(&BUILD_INFO);
        let [version, profile, arch] = p.build;
        self.sample(BUILD_INFO.name, "", &[("version", version), ("profile", profile), ("arch", arch)], 1u8);
        self.header(&CONFIG_LAST_RELOAD_SUCCESS);
        self.sample(CONFIG_LAST_RELOAD_SUCCESS.name, "", &[], u8::from(p.last_reload_ok));
        self.header(&CONFIG_LAST_RELOAD_SUCCESS_TIME);
        self.sample(CONFIG_LAST_RELOAD_SUCCESS_TIME.name, "", &[], p.last_reload_success_time);
        self.header(&TLS_CERT_EXPIRY);
        for c in &p.certificates {
            let labels = [("listener", c.listener.as_str()), ("name", c.name.as_str()), ("serial", c.serial.as_str())];
            self.sample(TLS_CERT_EXPIRY.name, "", &labels, c.not_after);
        }
        let stats = p.process.clone().unwrap_or_default();
        let families: [(&Family, Option<f64>); 6] = [
            (&PROCESS_CPU, stats.cpu_seconds),
            (&PROCESS_RESIDENT, stats.resident_bytes.map(|v| v as f64)),
            (&PROCESS_VIRTUAL, stats.virtual_bytes.map(|v| v as f64)),
            (&PROCESS_OPEN_FDS, stats.open_fds.map(|v| v as f64)),
            (&PROCESS_MAX_FDS, stats.max_fds.map(|v| v as f64)),
            (&PROCESS_START_TIME, stats.start_time),
        ];
        for (family, value) in families {
            self.header(family);
            if let Some(v) = value {
                self.sample(family.name, "", &[], v);
            }
        }
        self.header(&ADMIN_REQUESTS);
        for (path, count) in &p.admin_requests {
            self.sample(ADMIN_REQUESTS.name, "", &[("path", path)], *count);
        }
    }

    fn header(&mut self, family: &Family) {
        self.flush();
        let _ = write!(self.out, "# HELP {} ", family.name);
        escape_into(self.out, family.help, false);
        let _ = writeln!(self.out, "\n# TYPE {} {}", family.name, family.kind.as_str());
    }

    /// `_bucket` lines (cumulative, ending with `+Inf`), `_sum` and `_count`, where `_count` is
    /// the `+Inf` bucket so the two always agree.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], snapshot: &HistogramSnapshot) {
        let mut with_le: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        with_le.extend_from_slice(labels);
        for (le, count) in LE_LABELS.iter().zip(snapshot.cumulative) {
            with_le.truncate(labels.len());
            with_le.push(("le", le));
            self.sample(name, "_bucket", &with_le, count);
        }
        self.sample(name, "_sum", labels, snapshot.sum_seconds);
        self.sample(name, "_count", labels, snapshot.count());
    }

    fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        let value = value.into();
        let has_worker = labels.iter().any(|(k, _)| *k == "worker");
        match &mut self.sums {
            Some(sums) if has_worker => {
                let mut key = std::mem::take(&mut sums.key);
                key.clear();
                write_series(&mut key, name, suffix, labels.iter().filter(|(k, _)| *k != "worker"));
                match sums.index.get(key.as_str()) {
                    Some(&i) => {
                        if let Some((_, sum)) = sums.series.get_mut(i) {
                            *sum = sum.add(value);
                        }
                        sums.key = key;
                    }
                    None => {
                        sums.index.insert(key.clone(), sums.series.len());
                        sums.series.push((key, value));
                    }
                }
            }
            _ => {
                write_series(self.out, name, suffix, labels.iter());
                let _ = writeln!(self.out, " {value}");
            }
        }
    }

    /// Writes the summed series of the family just finished, if any.
    fn flush(&mut self) {
        let Some(sums) = &mut self.sums else { return };
        for (series, value) in sums.series.drain(..) {
            let _ = writeln!(self.out, "{series} {value}");
        }
        sums.index.clear();
    }
}

/// `name` `suffix` `{labels}` (no braces without labels).
fn write_series<'l>(out: &mut String, name: &str, suffix: &str, labels: impl Iterator<Item = &'l (&'l str, &'l str)>) {
    out.push_str(name);
    out.push_str(suffix);
    let mut first = true;
    for (key, value) in labels {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(key);
        out.push_str("=\"");
        escape_into(out, value, true);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
}

/// Escapes a label value (`\`, `"`, newline) or, with `quotes` false, a help text (`\`, newline).
pub(crate) fn escape_into(out: &mut String, text: &str, quotes: bool) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
