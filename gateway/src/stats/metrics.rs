//! Every Prometheus metric the gateway exports, in one table: name, type, labels and help.
//!
//! The renderer ([`render_prometheus`]) writes exactly the families of [`WORKER_FAMILIES`] and
//! [`FAMILIES`], in that order. `gateway/METRICS.md` is generated from these tables and a
//! test fails when it is out of date (rerun it with `UPDATE_METRICS_MD=1` to rewrite it).
//!
//! This module also re-exports the rest of the metrics API, so callers need one import path.

pub use super::histogram::{Histogram, HistogramSnapshot, LE_LABELS};
pub use super::prometheus::{render_prometheus, CertificateSample, EndpointSample, ProcessInfo, CONTENT_TYPE};
pub use super::series::{
    status_class, ClassOutcome, ClusterMetrics, FailureReason, MirrorResult, RouteMetrics, SplitMetrics, SplitReason,
    WorkerMetrics, CLASS_OUTCOMES, MAX_PRIORITY_CLASSES, MIRROR_RESULTS, SPLIT_REASONS, STATUS_CLASSES,
};

/// A Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family: the `# HELP` and `# TYPE` lines and the label names of its samples, in the
/// order they are written (a histogram's `le` comes after them and is not listed).
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// A family fed by [`super::WorkerStats`] fields: one field, or one per value of its `class`
/// label (`(field, Some(class))`).
#[derive(Debug, Clone, Copy)]
pub struct WorkerFamily {
    pub family: Family,
    pub fields: &'static [(&'static str, Option<&'static str>)],
}

impl Kind {
    /// The word of the `# TYPE` line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

macro_rules! per_worker {
    ($field:ident, $kind:ident, $name:literal, $help:literal) => {
        WorkerFamily {
            family: Family { name: $name, kind: Kind::$kind, labels: &["worker"], help: $help },
            fields: &[(stringify!($field), None)],
        }
    };
}

/// Families fed by [`super::WorkerStats`]; every field appears exactly once (a test checks).
pub const WORKER_FAMILIES: &[WorkerFamily] = &[
    WorkerFamily {
        family: Family {
            name: "gateway_panics_total",
            kind: Kind::Counter,
            labels: &["boundary", "worker"],
            help: "Panics caught and contained, by boundary: request (HTTP/1.1, answered 500 when nothing was sent), stream (HTTP/2, 500 or reset), connection (closed). The worker serves on; each is logged with its location.",
        },
        fields: &[
            ("panics_request", Some("request")),
            ("panics_stream", Some("stream")),
            ("panics_connection", Some("connection")),
        ],
    },
    per_worker!(
        connections_accepted,
        Counter,
        "gateway_connections_accepted_total",
        "Downstream connections accepted."
    ),
    per_worker!(
        connections_rejected,
        Counter,
        "gateway_connections_rejected_total",
        "Times a worker stopped accepting because it was at its connection limit (the kernel backlog and other workers take the load)."
    ),
    per_worker!(connections_active, Gauge, "gateway_connections_active", "Downstream connections currently open."),
    per_worker!(
        connections_parked,
        Gauge,
        "gateway_connections_parked",
        "Idle HTTP/1.1 keep-alive connections (plain, and TLS on io_uring) parked without a task (about 0.2 s after their last request); included in gateway_connections_active."
    ),
    per_worker!(requests_total, Counter, "gateway_requests_total", "Requests whose head was parsed completely."),
    per_worker!(requests_active, Gauge, "gateway_requests_active", "Requests currently being handled."),
    WorkerFamily {
        family: Family {
            name: "gateway_responses_total",
            kind: Kind::Counter,
            labels: &["class", "worker"],
            help: "Final responses sent downstream, by status class (100 Continue is not counted).",
        },
        fields: &[
            ("responses_1xx", Some("1xx")),
            ("responses_2xx", Some("2xx")),
            ("responses_3xx", Some("3xx")),
            ("responses_4xx", Some("4xx")),
            ("responses_5xx", Some("5xx")),
        ],
    },
    per_worker!(
        requests_rejected,
        Counter,
        "gateway_requests_rejected_total",
        "Requests refused for malformed or over-limit input (400, 413, 414, 417, 426, 431, 501, 505)."
    ),
    per_worker!(
        header_read_timeouts,
        Counter,
        "gateway_header_read_timeouts_total",
        "Connections closed because the request head did not arrive within the header-read timeout."
    ),
    per_worker!(
        downstream_bytes_in,
        Counter,
        "gateway_downstream_bytes_in_total",
        "Bytes read from downstream clients."
    ),
    per_worker!(
        downstream_bytes_out,
        Counter,
        "gateway_downstream_bytes_out_total",
        "Bytes written to downstream clients."
    ),
    per_worker!(upstream_connects, Counter, "gateway_upstream_connects_total", "New upstream connections opened."),
    per_worker!(
        upstream_connect_errors,
        Counter,
        "gateway_upstream_connect_errors_total",
        "Upstream connection attempts that failed or timed out."
    ),
    per_worker!(
        upstream_reuses,
        Counter,
        "gateway_upstream_reuses_total",
        "Requests sent on a pooled (reused) upstream connection."
    ),
    per_worker!(
        upstream_stale_retries,
        Counter,
        "gateway_upstream_stale_retries_total",
        "Requests retried once on a fresh connection after a reused connection failed before any response byte."
    ),
    per_worker!(
        upstream_idle_discards,
        Counter,
        "gateway_upstream_idle_discards_total",
        "Pooled upstream connections dropped when taken: the upstream had closed them, or sent bytes while they were idle."
    ),
    per_worker!(
        upstream_retries,
        Counter,
        "gateway_upstream_retries_total",
        "Tries sent again after a failed try, under the route's retry policy."
    ),
    per_worker!(
        upstream_retries_budget_exhausted,
        Counter,
        "gateway_upstream_retries_budget_exhausted_total",
        "Retries not made because the cluster's retry budget was used up."
    ),
    per_worker!(
        requests_deadline_expired,
        Counter,
        "gateway_requests_deadline_expired_total",
        "Requests answered 504 at once because their incoming deadline (grpc-timeout or the deadline header) had expired."
    ),
    per_worker!(
        upstream_protocol_errors,
        Counter,
        "gateway_upstream_protocol_errors_total",
        "Upstream responses refused as malformed (answered 502)."
    ),
    per_worker!(
        upstream_timeouts,
        Counter,
        "gateway_upstream_timeouts_total",
        "Upstream exchanges that hit the route timeout (answered 504)."
    ),
    per_worker!(
        upstream_requests_active,
        Gauge,
        "gateway_upstream_requests_active",
        "Requests currently waiting on or exchanging with an upstream."
    ),
    WorkerFamily {
        family: Family {
            name: "gateway_admission_decisions_total",
            kind: Kind::Counter,
            labels: &["decision", "worker"],
            help: "Overload decisions: shed (503, class over capacity), overflow (503, cluster cap), rate_limited (429), delayed (rate limit, then served), queued (waited for an upstream slot).",
        },
        fields: &[
            ("requests_shed", Some("shed")),
            ("requests_overflow", Some("overflow")),
            ("requests_rate_limited", Some("rate_limited")),
            ("requests_delayed", Some("delayed")),
            ("requests_queued", Some("queued")),
        ],
    },
    per_worker!(
        requests_shed_standing,
        Counter,
        "gateway_admission_shed_standing_queue_total",
        "Of the shed requests, those refused on arrival because their class's wait queue stood (the queue-delay signal: its shortest wait over an interval stayed above the class's threshold)."
    ),
    per_worker!(
        websocket_upgrades,
        Counter,
        "gateway_websocket_upgrades_total",
        "WebSocket tunnels established (the upstream answered 101 and it was relayed to the client)."
    ),
    per_worker!(websocket_active, Gauge, "gateway_websocket_active", "WebSocket tunnels currently open."),
    per_worker!(tls_handshakes, Counter, "gateway_tls_handshakes_total", "TLS handshakes completed."),
    per_worker!(
        tls_resumptions,
        Counter,
        "gateway_tls_resumptions_total",
        "TLS handshakes completed by resuming a session (ticket or session cache)."
    ),
    WorkerFamily {
        family: Family {
            name: "gateway_tls_handshake_failures_total",
            kind: Kind::Counter,
            labels: &["reason", "worker"],
            help: "TLS handshakes that failed, by reason.",
        },
        fields: &[
            ("tls_failed_protocol_version", Some("protocol_version")),
            ("tls_failed_no_shared_cipher", Some("no_shared_cipher")),
            ("tls_failed_unknown_sni", Some("unknown_sni")),
            ("tls_failed_client_certificate", Some("client_certificate")),
            ("tls_failed_bad_message", Some("bad_message")),
            ("tls_failed_eof", Some("eof")),
            ("tls_failed_timeout", Some("timeout")),
            ("tls_failed_other", Some("other")),
        ],
    },
    WorkerFamily {
        family: Family {
            name: "gateway_proxy_protocol_errors_total",
            kind: Kind::Counter,
            labels: &["reason", "worker"],
            help: "Connections closed because their PROXY protocol header was refused, by reason: missing, too_long, bad_v1, bad_version, bad_command, bad_family, bad_length, timeout, closed, untrusted_peer.",
        },
        fields: &[
            ("pp_failed_missing", Some("missing")),
            ("pp_failed_too_long", Some("too_long")),
            ("pp_failed_bad_v1", Some("bad_v1")),
            ("pp_failed_bad_version", Some("bad_version")),
            ("pp_failed_bad_command", Some("bad_command")),
            ("pp_failed_bad_family", Some("bad_family")),
            ("pp_failed_bad_length", Some("bad_length")),
            ("pp_failed_timeout", Some("timeout")),
            ("pp_failed_closed", Some("closed")),
            ("pp_failed_untrusted_peer", Some("untrusted_peer")),
        ],
    },
    per_worker!(h2_connections, Counter, "gateway_h2_connections_total", "HTTP/2 connections served."),
    per_worker!(h2_streams, Counter, "gateway_h2_streams_total", "HTTP/2 streams (requests) accepted."),
    WorkerFamily {
        family: Family {
            name: "gateway_h2_abuse_total",
            kind: Kind::Counter,
            labels: &["kind", "worker"],
            help: "HTTP/2 connections closed with GOAWAY for abuse, by kind.",
        },
        fields: &[
            ("h2_abuse_reset_flood", Some("reset_flood")),
            ("h2_abuse_control_flood", Some("control_flood")),
            ("h2_abuse_empty_frames", Some("empty_frames")),
            ("h2_abuse_header_block", Some("header_block")),
            ("h2_abuse_stall", Some("stall")),
            ("h2_abuse_penalized", Some("penalized")),
        ],
    },
    per_worker!(
        h2_protocol_errors,
        Counter,
        "gateway_h2_protocol_errors_total",
        "HTTP/2 connections ended by a connection-level protocol error."
    ),
];

pub const ROUTE_REQUESTS: Family = Family {
    name: "gateway_route_requests_total",
    kind: Kind::Counter,
    labels: &["route", "class", "worker"],
    help: "Final responses sent downstream for requests matched to a route, by status class.",
};
pub const ROUTE_DECISIONS: Family = Family {
    name: "gateway_route_admission_total",
    kind: Kind::Counter,
    labels: &["route", "outcome", "worker"],
    help: "Admission decisions for requests matched to a route: served, shed (503), overflow (503, a cap), rate_limited (429).",
};
pub const ROUTE_DURATION: Family = Family {
    name: "gateway_route_request_duration_seconds",
    kind: Kind::Histogram,
    labels: &["route", "worker"],
    help: "Time from the request head being parsed to the end of the response, per route.",
};
pub const ROUTE_SPLITS: Family = Family {
    name: "gateway_route_split_decisions_total",
    kind: Kind::Counter,
    labels: &["route", "cluster", "reason", "worker"],
    help: "Requests of a route with a split (or pins) sent to each of its clusters, by reason: weight (random by weight), sticky (hash of the sticky key), pin (a pin matched).",
};
pub const ROUTE_MIRRORS: Family = Family {
    name: "gateway_route_mirror_requests_total",
    kind: Kind::Counter,
    labels: &["route", "result", "worker"],
    help: "Mirror copies of a route's requests to its shadow cluster, by result: mirrored (the shadow answered), failed (connect, send, read or route timeout), dropped (not sent: max_in_flight copies already in flight on the worker).",
};
pub const ROUTE_RATE_LIMIT_EVICTIONS: Family = Family {
    name: "gateway_route_rate_limit_evictions_total",
    kind: Kind::Counter,
    labels: &["route", "worker"],
    help: "Keys (client addresses or header values) evicted from a route's per-key rate-limit table because it was full (`max_keys` per worker): an evicted key in debt comes back with a full bucket, so a steady rate here means the table is too small for the clients seen.",
};
pub const CLUSTER_REQUESTS: Family = Family {
    name: "gateway_cluster_requests_total",
    kind: Kind::Counter,
    labels: &["cluster", "class", "worker"],
    help: "Upstream responses received from a cluster, by status class.",
};
pub const CLUSTER_DURATION: Family = Family {
    name: "gateway_cluster_upstream_duration_seconds",
    kind: Kind::Histogram,
    labels: &["cluster", "worker"],
    help: "Time from sending a request upstream to receiving the response head, per cluster.",
};
pub const CLUSTER_CONNECTS: Family = Family {
    name: "gateway_cluster_upstream_connects_total",
    kind: Kind::Counter,
    labels: &["cluster", "worker"],
    help: "New upstream connections opened to a cluster.",
};
pub const PRIORITY_REQUESTS: Family = Family {
    name: "gateway_priority_requests_total",
    kind: Kind::Counter,
    labels: &["priority", "outcome", "worker"],
    help:
        "Routed requests by priority class and outcome: served, shed (503), overflow (503, a cap), rate_limited (429).",
};
pub const CLUSTER_LIMIT: Family = Family {
    name: "gateway_cluster_concurrency_limit",
    kind: Kind::Gauge,
    labels: &["cluster", "worker"],
    help: "The cluster's in-flight limit on a worker: its part of the adaptive limit the workers share (following upstream latency; the parts sum to the cluster's limit), or the fixed cap per worker.",
};
pub const CLUSTER_REUSES: Family = Family {
    name: "gateway_cluster_upstream_reuses_total",
    kind: Kind::Counter,
    labels: &["cluster", "worker"],
    help: "Requests sent to a cluster on a pooled (reused) connection.",
};
pub const CLUSTER_FAILURES: Family = Family {
    name: "gateway_cluster_upstream_failures_total",
    kind: Kind::Counter,
    labels: &["cluster", "reason", "worker"],
    help: "Failed upstream exchanges by reason: connect_error, connect_timeout, timeout (no response head before the route timeout, or a per-try timeout that could not be retried), \
           protocol (malformed response), reset (closed before the response was complete).",
};
pub const CLUSTER_EJECTIONS: Family = Family {
    name: "gateway_cluster_ejections_total",
    kind: Kind::Counter,
    labels: &["cluster", "reason", "worker"],
    help: "Endpoints ejected by this worker's passive outlier detection, by reason: consecutive_5xx, consecutive_gateway_errors.",
};
pub const CLUSTER_EJECTED: Family = Family {
    name: "gateway_cluster_ejected_endpoints",
    kind: Kind::Gauge,
    labels: &["cluster", "worker"],
    help: "Endpoints of a cluster currently ejected by this worker's outlier detection.",
};
pub const CLUSTER_PANIC_PICKS: Family = Family {
    name: "gateway_cluster_panic_picks_total",
    kind: Kind::Counter,
    labels: &["cluster", "worker"],
    help: "Requests sent to an endpoint although none was eligible (all_unhealthy = \"panic\").",
};
pub const CLUSTER_SUSPECTS_PASSED_OVER: Family = Family {
    name: "gateway_cluster_suspects_passed_over_total",
    kind: Kind::Counter,
    labels: &["cluster", "worker"],
    help: "Requests sent to another endpoint than the balancer's choice, whose last try ended in a gateway error the request would not be retried after (outlier detection's suspect endpoints).",
};
pub const CLUSTER_TRY_TIMEOUTS: Family = Family {
    name: "gateway_cluster_try_timeouts_total",
    kind: Kind::Counter,
    labels: &["cluster", "worker"],
    help: "Tries abandoned at their per-try timeout (the route's per_try_timeout, or the adaptive one when it sets none) before the route timeout; each is retried on another endpoint when the retry policy allows, else answered 504.",
};
pub const HEALTH_CHECKS: Family = Family {
    name: "gateway_health_checks_total",
    kind: Kind::Counter,
    labels: &["cluster", "endpoint", "result"],
    help: "Active health checks, process-wide (one checker per process), by result: passed, failed.",
};
pub const HEALTH_TRANSITIONS: Family = Family {
    name: "gateway_health_transitions_total",
    kind: Kind::Counter,
    labels: &["cluster", "endpoint", "to"],
    help: "Active health state changes of an endpoint, by new state: healthy, unhealthy.",
};
pub const ENDPOINT_HEALTHY: Family = Family {
    name: "gateway_endpoint_healthy",
    kind: Kind::Gauge,
    labels: &["cluster", "endpoint"],
    help: "1 while active health checks consider the endpoint healthy (or it is not checked), else 0.",
};
pub const DNS_RESOLUTIONS: Family = Family {
    name: "gateway_dns_resolutions_total",
    kind: Kind::Counter,
    labels: &["cluster"],
    help: "Host-name endpoints of a cluster resolved again (every dns_refresh), failed or not; process-wide.",
};
pub const DNS_FAILURES: Family = Family {
    name: "gateway_dns_resolution_failures_total",
    kind: Kind::Counter,
    labels: &["cluster"],
    help: "Re-resolutions that failed or found no usable address; the name's last good addresses stay in use.",
};
pub const DNS_CHANGES: Family = Family {
    name: "gateway_dns_endpoint_changes_total",
    kind: Kind::Counter,
    labels: &["cluster"],
    help: "Times a cluster's endpoint set changed because its host names resolved differently (published without a reload).",
};
pub const ENDPOINT_REQUESTS: Family = Family {
    name: "gateway_endpoint_requests_total",
    kind: Kind::Counter,
    labels: &["cluster", "endpoint", "class", "worker"],
    help: "Requests answered through each upstream endpoint (the last try's), by status class of the response sent downstream.",
};
pub const ENDPOINT_DURATION: Family = Family {
    name: "gateway_endpoint_upstream_duration_seconds",
    kind: Kind::Histogram,
    labels: &["cluster", "endpoint", "worker"],
    help: "Time from sending a request to each upstream endpoint to its response head.",
};
pub const CONFIG_VERSION: Family = Family {
    name: "gateway_config_version",
    kind: Kind::Gauge,
    labels: &[],
    help: "Version of the config snapshot in use.",
};
pub const CONFIG_RELOADS: Family = Family {
    name: "gateway_config_reloads_total",
    kind: Kind::Counter,
    labels: &["result"],
    help: "Config reloads, by result (ok or failed).",
};
pub const ACCESS_LOG_LINES: Family = Family {
    name: "gateway_access_log_lines_total",
    kind: Kind::Counter,
    labels: &["result"],
    help: "Access log lines, by result (written, or dropped without being written).",
};
pub const ACCESS_LOG_WRITE_ERRORS: Family = Family {
    name: "gateway_access_log_write_errors_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Failed writes of access log batches (disk full, I/O error); their lines count as dropped.",
};
pub const DRAINING: Family = Family {
    name: "gateway_draining",
    kind: Kind::Gauge,
    labels: &[],
    help: "1 while the gateway is draining for shutdown, else 0.",
};
pub const UPTIME: Family = Family {
    name: "gateway_uptime_seconds",
    kind: Kind::Gauge,
    labels: &[],
    help: "Seconds since the gateway started.",
};
pub const BUILD_INFO: Family = Family {
    name: "gateway_build_info",
    kind: Kind::Gauge,
    labels: &["version", "profile", "arch"],
    help: "Always 1; its labels say which build runs.",
};
pub const CONFIG_LAST_RELOAD_SUCCESS: Family = Family {
    name: "gateway_config_last_reload_success",
    kind: Kind::Gauge,
    labels: &[],
    help: "1 when the last load of the configuration (start, file change, SIGHUP, POST /reload) succeeded, 0 when it was rejected (the previous one still runs).",
};
pub const CONFIG_LAST_RELOAD_SUCCESS_TIME: Family = Family {
    name: "gateway_config_last_reload_success_timestamp_seconds",
    kind: Kind::Gauge,
    labels: &[],
    help: "Unix time of the last successful load of the configuration.",
};
pub const TLS_CERT_EXPIRY: Family = Family {
    name: "gateway_tls_certificate_expiry_seconds",
    kind: Kind::Gauge,
    labels: &["listener", "name", "serial"],
    help: "Unix time at which a served certificate expires (its notAfter), per listener and certificate (its first name, its serial).",
};
pub const PROCESS_CPU: Family = Family {
    name: "process_cpu_seconds_total",
    kind: Kind::Counter,
    labels: &[],
    help: "User and system CPU time spent by the process, in seconds.",
};
pub const PROCESS_RESIDENT: Family = Family {
    name: "process_resident_memory_bytes",
    kind: Kind::Gauge,
    labels: &[],
    help: "Resident memory size in bytes.",
};
pub const PROCESS_VIRTUAL: Family = Family {
    name: "process_virtual_memory_bytes",
    kind: Kind::Gauge,
    labels: &[],
    help: "Virtual memory size in bytes.",
};
pub const PROCESS_OPEN_FDS: Family =
    Family { name: "process_open_fds", kind: Kind::Gauge, labels: &[], help: "Open file descriptors." };
pub const PROCESS_MAX_FDS: Family = Family {
    name: "process_max_fds",
    kind: Kind::Gauge,
    labels: &[],
    help: "The limit of open file descriptors (soft RLIMIT_NOFILE).",
};
pub const PROCESS_START_TIME: Family = Family {
    name: "process_start_time_seconds",
    kind: Kind::Gauge,
    labels: &[],
    help: "Unix time at which the process started.",
};

pub const WORKERS_UNHEALTHY: Family = Family {
    name: "gateway_workers_unhealthy",
    kind: Kind::Gauge,
    labels: &[],
    help:
        "Workers that stopped ticking for over 2 s or whose thread died (/healthz answers 503 while this is above 0).",
};

/// Families other than [`WORKER_FAMILIES`] written by [`render_prometheus`], in output order.
pub const FAMILIES: &[Family] = &[
    PRIORITY_REQUESTS,
    ROUTE_REQUESTS,
    ROUTE_DECISIONS,
    ROUTE_DURATION,
    ROUTE_SPLITS,
    ROUTE_MIRRORS,
    ROUTE_RATE_LIMIT_EVICTIONS,
    CLUSTER_REQUESTS,
    CLUSTER_DURATION,
    CLUSTER_CONNECTS,
    CLUSTER_REUSES,
    CLUSTER_LIMIT,
    CLUSTER_FAILURES,
    CLUSTER_EJECTIONS,
    CLUSTER_EJECTED,
    CLUSTER_PANIC_PICKS,
    CLUSTER_SUSPECTS_PASSED_OVER,
    CLUSTER_TRY_TIMEOUTS,
    HEALTH_CHECKS,
    HEALTH_TRANSITIONS,
    ENDPOINT_HEALTHY,
    DNS_RESOLUTIONS,
    DNS_FAILURES,
    DNS_CHANGES,
    ENDPOINT_REQUESTS,
    ENDPOINT_DURATION,
    CONFIG_VERSION,
    CONFIG_RELOADS,
    ACCESS_LOG_LINES,
    ACCESS_LOG_WRITE_ERRORS,
    DRAINING,
    UPTIME,
    WORKERS_UNHEALTHY,
    BUILD_INFO,
    CONFIG_LAST_RELOAD_SUCCESS,
    CONFIG_LAST_RELOAD_SUCCESS_TIME,
    TLS_CERT_EXPIRY,
    PROCESS_CPU,
    PROCESS_RESIDENT,
    PROCESS_VIRTUAL,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_START_TIME,
    ADMIN_REQUESTS,
];

pub const ADMIN_REQUESTS: Family = Family {
    name: "gateway_admin_requests_total",
    kind: Kind::Counter,
    labels: &["path"],
    help: "Requests served by the admin listener, by path.",
};

/// Every family of the two tables: worker, then the others.
pub fn all_families() -> impl Iterator<Item = &'static Family> {
    WORKER_FAMILIES.iter().map(|w| &w.family).chain(FAMILIES)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::stats::WorkerStats;

    const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/METRICS.md");
    const START: &str = "<!-- generated from gateway/src/stats/metrics.rs by its tests; \
                         UPDATE_METRICS_MD=1 cargo test -p gateway --lib stats::metrics rewrites it -->";
    const END: &str = "<!-- end of generated table -->";

    #[test]
    fn metrics_md_lists_every_family() {
        let doc = std::fs::read_to_string(DOC).unwrap_or_default();
        let generated = markdown_table();
        let current = doc.split_once(START).and_then(|(_, rest)| rest.split_once(END)).map(|(table, _)| table);
        if current != Some(generated.as_str()) && std::env::var_os("UPDATE_METRICS_MD").is_some() {
            let (head, tail) = match doc.split_once(START).map(|(h, rest)| (h, rest.split_once(END))) {
                Some((head, Some((_, tail)))) => (head.to_string(), tail.to_string()),
                _ => (format!("{}\n\n", doc.trim_end()), "\n".to_string()),
            };
            std::fs::write(DOC, format!("{head}{START}{generated}{END}{tail}")).unwrap();
            return;
        }
        for family in all_families() {
            assert!(doc.contains(&format!("`{}`", family.name)), "METRICS.md does not list {}", family.name);
        }
        assert_eq!(
            current,
            Some(generated.as_str()),
            "METRICS.md is out of date: rerun with UPDATE_METRICS_MD=1 and commit the result"
        );
    }

    #[test]
    fn every_worker_stats_field_is_exported_exactly_once() {
        let mut exported: Vec<&str> = WORKER_FAMILIES.iter().flat_map(|w| w.fields.iter().map(|(f, _)| *f)).collect();
        exported.sort_unstable();
        let mut fields: Vec<&str> = WorkerStats::FIELDS.iter().map(|(name, _)| *name).collect();
        fields.sort_unstable();
        assert_eq!(exported, fields);
        for wf in WORKER_FAMILIES {
            let classes: Vec<Option<&str>> = wf.fields.iter().map(|(_, class)| *class).collect();
            if wf.fields.len() == 1 {
                assert_eq!(classes, [None], "{}", wf.family.name);
                assert_eq!(wf.family.labels, ["worker"], "{}", wf.family.name);
            } else if wf.family.labels.first() == Some(&"class") {
                let expected: Vec<Option<&str>> = STATUS_CLASSES.iter().copied().map(Some).collect();
                assert_eq!(classes, expected, "{}", wf.family.name);
                assert_eq!(wf.family.labels, ["class", "worker"], "{}", wf.family.name);
            } else {
                assert!(classes.iter().all(Option::is_some), "{}", wf.family.name);
                assert_eq!(wf.family.labels.len(), 2, "{}", wf.family.name);
                assert_eq!(wf.family.labels.get(1), Some(&"worker"), "{}", wf.family.name);
            }
        }
    }

    #[test]
    fn names_labels_and_help_follow_the_conventions() {
        let mut names = BTreeSet::new();
        for f in all_families() {
            assert!(names.insert(f.name), "{} declared twice", f.name);
            // The standard process_* families of Prometheus client libraries keep their names.
            assert!(f.name.starts_with("gateway_") || f.name.starts_with("process_"), "{}", f.name);
            assert!(f.name.bytes().all(|b| b == b'_' || b.is_ascii_lowercase() || b.is_ascii_digit()), "{}", f.name);
            match f.kind {
                Kind::Counter => assert!(f.name.ends_with("_total"), "counter {} must end in _total", f.name),
                Kind::Gauge => assert!(!f.name.ends_with("_total"), "gauge {} must not end in _total", f.name),
                Kind::Histogram => assert!(f.name.ends_with("_seconds"), "histogram {} is a duration", f.name),
            }
            assert!(!f.help.trim().is_empty() && !f.help.contains('\n'), "help of {}", f.name);
            for label in f.labels {
                assert!(label.bytes().all(|b| b == b'_' || b.is_ascii_lowercase()), "{}: {label}", f.name);
                assert!(*label != "le" && !label.starts_with("__"), "{}: reserved label {label}", f.name);
            }
        }
        for f in all_families() {
            for suffix in ["_bucket", "_sum", "_count"] {
                if f.kind == Kind::Histogram {
                    assert!(!names.contains(format!("{}{suffix}", f.name).as_str()), "{} clashes", f.name);
                }
            }
        }
    }

    /// The markdown table of every family, between the markers of METRICS.md.
    fn markdown_table() -> String {
        let mut out = String::from("\n| name | type | labels | help |\n| --- | --- | --- | --- |\n");
        for f in all_families() {
            let mut labels: Vec<String> = f
                .labels
                .iter()
                .map(|l| if *l == "worker" { "`worker` (per-worker view only)".into() } else { format!("`{l}`") })
                .collect();
            if f.kind == Kind::Histogram {
                labels.push("`le` (on `_bucket`)".into());
            }
            let labels = if labels.is_empty() { "—".to_string() } else { labels.join(", ") };
            let help = f.help.replace('|', "\\|");
            out.push_str(&format!("| `{}` | {} | {labels} | {help} |\n", f.name, f.kind.as_str()));
        }
        out
    }
}

/// Why an endpoint was ejected; the `reason` label of `gateway_cluster_ejections_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EjectReason {
    Consecutive5xx,
    ConsecutiveGatewayErrors,
}

impl EjectReason {
    pub const ALL: [EjectReason; 2] = [EjectReason::Consecutive5xx, EjectReason::ConsecutiveGatewayErrors];

    pub fn label(self) -> &'static str {
        match self {
            Self::Consecutive5xx => "consecutive_5xx",
            Self::ConsecutiveGatewayErrors => "consecutive_gateway_errors",
        }
    }
}
