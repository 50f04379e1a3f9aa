//! Prometheus text exposition (format 0.0.4) of the workers' stats and metric sets.
//!
//! Runs on the admin thread at scrape time: it reads every worker's counters with relaxed loads
//! and writes each family of [`super::metrics`] once, `# HELP` and `# TYPE` first, then one
//! sample per worker (and route, cluster, class, reason). Workers are never stopped or locked
//! out: a scrape sees each counter at a slightly different moment, which Prometheus tolerates.

use std::fmt::{Display, Write};
use std::sync::Arc;
use std::time::Duration;

use super::histogram::{HistogramSnapshot, LE_LABELS};
use super::metrics::{
    Family, ACCESS_LOG_LINES, ACCESS_LOG_WRITE_ERRORS, CLUSTER_CONNECTS, CLUSTER_DURATION, CLUSTER_EJECTED,
    CLUSTER_EJECTIONS, CLUSTER_FAILURES, CLUSTER_LIMIT, CLUSTER_PANIC_PICKS, CLUSTER_REQUESTS, CLUSTER_REUSES,
    CONFIG_RELOADS, CONFIG_VERSION, DRAINING, ENDPOINT_HEALTHY, HEALTH_CHECKS, HEALTH_TRANSITIONS, PRIORITY_REQUESTS,
    ROUTE_DECISIONS, ROUTE_DURATION, ROUTE_MIRRORS, ROUTE_REQUESTS, ROUTE_SPLITS, UPTIME, WORKERS_UNHEALTHY,
    WORKER_FAMILIES,
};
use super::metrics::{
    BUILD_INFO, CONFIG_LAST_RELOAD_SUCCESS, CONFIG_LAST_RELOAD_SUCCESS_TIME, PROCESS_CPU, PROCESS_MAX_FDS,
    PROCESS_OPEN_FDS, PROCESS_RESIDENT, PROCESS_START_TIME, PROCESS_VIRTUAL, TLS_CERT_EXPIRY,
};
use super::process::ProcessStats;
use super::recorder::ProcessHandle;
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
    /// The process-level `metrics` recorder, whose families are appended after ours.
    pub recorder: Option<ProcessHandle>,
    /// The configured priority class names, in order (labels of `gateway_priority_requests_total`).
    pub classes: Vec<String>,
    /// Every endpoint's active health (the process's health registry).
    pub health: Vec<EndpointHealthSample>,
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
/// sets; its `worker` label is [`WorkerMetrics::worker`], so ids must be distinct.
pub fn render_prometheus(out: &mut String, workers: &[(Arc<WorkerStats>, Arc<WorkerMetrics>)], process: &ProcessInfo) {
    let views: Vec<WorkerView> = workers.iter().map(|(stats, metrics)| WorkerView::read(stats, metrics)).collect();
    let mut w = Writer { out };
    w.worker_families(&views);
    w.priority_families(&views, &process.classes);
    w.route_families(&views);
    w.cluster_families(&views);
    w.health_families(&process.health);
    w.process_families(process);
    if let Some(recorder) = &process.recorder {
        recorder.render_into(w.out);
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
        self.sample(BUILD_INFO.name, "", &[("version", version), ("profile", profile), ("arch", arch)], 1);
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
    }

    fn header(&mut self, family: &Family) {
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

    fn sample(&mut self, name: &str, suffix: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(key);
                self.out.push_str("=\"");
                escape_into(self.out, value, true);
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
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
