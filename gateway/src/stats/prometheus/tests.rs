//! Render tests, checked by a strict parser of the text exposition format 0.0.4.

mod parser;

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::stats::metrics::{self as table};
use parser::parse;

#[test]
fn escapes_label_values_and_help() {
    let mut out = String::new();
    escape_into(&mut out, "a\\b\"c\nd", true);
    assert_eq!(out, r#"a\\b\"c\nd"#);
    out.clear();
    escape_into(&mut out, "a\\b\"c\nd", false);
    assert_eq!(out, r#"a\\b"c\nd"#);
}

#[test]
fn two_workers_render_valid_and_complete() {
    let odd_route = "we\"ird\\route\nname";
    let (s0, m0) = (Arc::new(WorkerStats::default()), Arc::new(WorkerMetrics::new(0)));
    let (s1, m1) = (Arc::new(WorkerStats::default()), Arc::new(WorkerMetrics::new(1)));
    s0.requests_total.add(5);
    s0.count_status(200);
    s0.count_status(404);
    s1.count_status(503);
    s1.connections_active.add(3);
    s1.downstream_bytes_out.add(12_345);
    let route = m0.route(odd_route);
    route.observe(200, Duration::from_millis(3));
    route.observe(404, Duration::from_secs(45));
    m1.route("api").observe(204, Duration::from_micros(500));
    let cluster = m1.cluster("backend");
    cluster.observe(200, Duration::from_millis(20));
    cluster.connect();
    cluster.reuse();
    cluster.reuse();
    cluster.failure(FailureReason::Reset);
    m0.cluster("backend");
    m1.split("api", "backend").count(super::super::series::SplitReason::Sticky);
    route.mirror(super::super::series::MirrorResult::Dropped);
    route.mirror(super::super::series::MirrorResult::Mirrored);
    route.rate_limit_evicted(2);

    let process = ProcessInfo {
        config_version: 7,
        reloads_ok: 6,
        reloads_failed: 1,
        access_log_written: 100,
        access_log_dropped: 2,
        access_log_write_errors: 1,
        draining: true,
        uptime: Duration::from_millis(1500),
        workers_unhealthy: 0,
        build: ["0.1.0", "debug", "x86_64"],
        last_reload_ok: true,
        last_reload_success_time: 1.5,
        certificates: vec![super::CertificateSample {
            listener: "public".into(),
            name: "a.test".into(),
            serial: "0a1b".into(),
            not_after: 1_798_761_600,
        }],
        process: Some(crate::stats::process::ProcessStats {
            cpu_seconds: Some(1.25),
            resident_bytes: Some(4096),
            virtual_bytes: Some(8192),
            open_fds: Some(12),
            max_fds: Some(1024),
            start_time: Some(1_764_547_200.5),
        }),
        admin_requests: vec![("/metrics", 1), ("other", 0)],
        endpoints: (0..2)
            .map(|worker| super::EndpointSample {
                cluster: "backend".into(),
                endpoint: "127.0.0.1:8080".into(),
                worker,
                requests: [0, 3, 0, 0, 1],
                latency: HistogramSnapshot { cumulative: [2; crate::stats::histogram::BUCKETS], sum_seconds: 0.5 },
            })
            .collect(),
        classes: vec!["critical".into(), "normal".into()],
        health: vec![super::EndpointHealthSample {
            cluster: "backend".into(),
            endpoint: "127.0.0.1:8080".into(),
            healthy: true,
            ..Default::default()
        }],
        dns: vec![super::DnsSample { cluster: "backend".into(), resolutions: 3, failures: 1, changes: 2 }],
    };
    m1.count_class(1, super::super::series::ClassOutcome::Shed);
    let workers = [(s0, m0), (s1, m1)];
    summed_over_workers(&workers, &process, odd_route);
    let mut out = String::new();
    render_prometheus(&mut out, &workers, &process, true);
    let exp = parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));

    let expected: Vec<&table::Family> = table::all_families().collect();
    let declared: Vec<&str> = exp.order.iter().map(String::as_str).collect();
    assert_eq!(declared, expected.iter().map(|f| f.name).collect::<Vec<_>>(), "families, in table order");
    for family in expected {
        let parsed = &exp.families[family.name];
        assert_eq!(parsed.kind, family.kind.as_str(), "{}", family.name);
        assert_eq!(parsed.help.as_deref(), Some(family.help), "{}", family.name);
        assert!(!parsed.samples.is_empty(), "{} has no samples", family.name);
        for sample in &parsed.samples {
            let names: Vec<&str> = sample.labels.iter().map(|(k, _)| k.as_str()).filter(|k| *k != "le").collect();
            assert_eq!(names, family.labels, "labels of {}", sample.name);
        }
    }

    let v = |name: &str, labels: &[(&str, &str)]| exp.value(name, labels);
    let cert = [("listener", "public"), ("name", "a.test"), ("serial", "0a1b")];
    assert_eq!(v("gateway_tls_certificate_expiry_seconds", &cert), 1_798_761_600.0);
    assert_eq!(v("gateway_build_info", &[("version", "0.1.0"), ("profile", "debug"), ("arch", "x86_64")]), 1.0);
    assert_eq!(v("gateway_config_last_reload_success", &[]), 1.0);
    assert_eq!(v("process_cpu_seconds_total", &[]), 1.25);
    assert_eq!(v("process_start_time_seconds", &[]), 1_764_547_200.5);
    assert_eq!(
        v("gateway_priority_requests_total", &[("priority", "normal"), ("outcome", "shed"), ("worker", "1")]),
        1.0
    );
    assert_eq!(
        v("gateway_priority_requests_total", &[("priority", "critical"), ("outcome", "served"), ("worker", "0")]),
        0.0
    );
    assert_eq!(v("gateway_requests_total", &[("worker", "0")]), 5.0);
    let split = [("route", "api"), ("cluster", "backend"), ("reason", "sticky"), ("worker", "1")];
    assert_eq!(v("gateway_route_split_decisions_total", &split), 1.0);
    let mirror = |result| [("route", odd_route), ("result", result), ("worker", "0")];
    assert_eq!(v("gateway_route_mirror_requests_total", &mirror("dropped")), 1.0);
    assert_eq!(v("gateway_route_mirror_requests_total", &mirror("failed")), 0.0);
    assert_eq!(v("gateway_requests_total", &[("worker", "1")]), 0.0);
    assert_eq!(v("gateway_responses_total", &[("class", "2xx"), ("worker", "0")]), 1.0);
    assert_eq!(v("gateway_responses_total", &[("class", "5xx"), ("worker", "1")]), 1.0);
    assert_eq!(v("gateway_connections_active", &[("worker", "1")]), 3.0);
    assert_eq!(v("gateway_downstream_bytes_out_total", &[("worker", "1")]), 12_345.0);
    let odd = [("route", odd_route), ("class", "4xx"), ("worker", "0")];
    assert_eq!(v("gateway_route_requests_total", &odd), 1.0, "escaped label value reads back as it was");
    let odd = [("route", odd_route), ("worker", "0")];
    assert_eq!(v("gateway_route_request_duration_seconds_count", &odd), 2.0);
    assert_eq!(v("gateway_route_request_duration_seconds_sum", &odd), 45.003);
    let le = |le| [("route", odd_route), ("worker", "0"), ("le", le)];
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &le("0.0025")), 0.0);
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &le("0.005")), 1.0);
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &le("30")), 1.0);
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &le("+Inf")), 2.0);
    let api = [("route", "api"), ("worker", "1"), ("le", "0.0005")];
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &api), 1.0, "0.5 ms is le=0.0005");
    let backend = [("cluster", "backend"), ("worker", "1")];
    assert_eq!(v("gateway_cluster_upstream_connects_total", &backend), 1.0);
    assert_eq!(v("gateway_cluster_upstream_reuses_total", &backend), 2.0);
    assert_eq!(v("gateway_cluster_upstream_duration_seconds_count", &backend), 1.0);
    let reset = [("cluster", "backend"), ("reason", "reset"), ("worker", "1")];
    assert_eq!(v("gateway_cluster_upstream_failures_total", &reset), 1.0);
    let idle = [("cluster", "backend"), ("class", "2xx"), ("worker", "0")];
    assert_eq!(v("gateway_cluster_requests_total", &idle), 0.0, "configured but idle clusters export zeros");
    assert_eq!(v("gateway_config_version", &[]), 7.0);
    assert_eq!(v("gateway_config_reloads_total", &[("result", "failed")]), 1.0);
    assert_eq!(v("gateway_access_log_lines_total", &[("result", "dropped")]), 2.0);
    assert_eq!(v("gateway_draining", &[]), 1.0);
    assert_eq!(v("gateway_uptime_seconds", &[]), 1.5);
    assert_eq!(v("gateway_admin_requests_total", &[("path", "/metrics")]), 1.0);
    assert_eq!(exp.families["gateway_requests_total"].samples.len(), 2);
}

/// The default view of the same workers: every family, each series once without `worker`,
/// holding the sum over the workers.
fn summed_over_workers(workers: &[(Arc<WorkerStats>, Arc<WorkerMetrics>)], process: &ProcessInfo, odd_route: &str) {
    let mut out = String::new();
    render_prometheus(&mut out, workers, process, false);
    let exp = parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    for family in table::all_families() {
        let parsed = &exp.families[family.name];
        assert!(!parsed.samples.is_empty(), "{} has no samples", family.name);
        let labels: Vec<&str> = family.labels.iter().copied().filter(|l| *l != "worker").collect();
        for sample in &parsed.samples {
            let names: Vec<&str> = sample.labels.iter().map(|(k, _)| k.as_str()).filter(|k| *k != "le").collect();
            assert_eq!(names, labels, "labels of {}", sample.name);
        }
    }
    let v = |name: &str, labels: &[(&str, &str)]| exp.value(name, labels);
    assert_eq!(v("gateway_requests_total", &[]), 5.0);
    assert_eq!(exp.families["gateway_requests_total"].samples.len(), 1);
    assert_eq!(v("gateway_responses_total", &[("class", "2xx")]), 1.0);
    assert_eq!(v("gateway_responses_total", &[("class", "5xx")]), 1.0);
    assert_eq!(v("gateway_connections_active", &[]), 3.0);
    assert_eq!(v("gateway_priority_requests_total", &[("priority", "normal"), ("outcome", "shed")]), 1.0);
    // A route seen by one worker only, and one cluster seen by both (one of them idle).
    assert_eq!(v("gateway_route_requests_total", &[("route", odd_route), ("class", "4xx")]), 1.0);
    assert_eq!(v("gateway_route_request_duration_seconds_count", &[("route", "api")]), 1.0);
    assert_eq!(v("gateway_route_request_duration_seconds_bucket", &[("route", odd_route), ("le", "+Inf")]), 2.0);
    assert_eq!(v("gateway_cluster_upstream_duration_seconds_count", &[("cluster", "backend")]), 1.0);
    assert_eq!(v("gateway_cluster_upstream_reuses_total", &[("cluster", "backend")]), 2.0);
    assert_eq!(v("gateway_uptime_seconds", &[]), 1.5);
    let ep = [("cluster", "backend"), ("endpoint", "127.0.0.1:8080")];
    assert_eq!(v("gateway_endpoint_requests_total", &[ep[0], ep[1], ("class", "2xx")]), 6.0);
    assert_eq!(v("gateway_endpoint_upstream_duration_seconds_count", &ep), 4.0);
}

/// The scrape cost at 64 workers x 100 routes (and 20 clusters), both views. A measurement,
/// not a test: run it in release, as docs/observability.md says:
/// `cargo test -p gateway --release --lib scrape_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement that prints time and size; run with --release --ignored --nocapture"]
fn scrape_cost_at_64_workers_and_100_routes() {
    let workers: Vec<(Arc<WorkerStats>, Arc<WorkerMetrics>)> = (0..64)
        .map(|i| {
            let (s, m) = (Arc::new(WorkerStats::default()), Arc::new(WorkerMetrics::new(i)));
            s.requests_total.add(1000 + i as u64);
            for r in 0..100 {
                m.route(&format!("route-{r:03}")).observe(200, Duration::from_millis(r));
            }
            for c in 0..20 {
                m.cluster(&format!("cluster-{c:02}")).observe(200, Duration::from_millis(c));
            }
            (s, m)
        })
        .collect();
    let process = ProcessInfo { classes: vec!["critical".into(), "normal".into()], ..Default::default() };
    for per_worker in [false, true] {
        let mut out = String::new();
        render_prometheus(&mut out, &workers, &process, per_worker);
        let rounds = 20;
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            out.clear();
            render_prometheus(&mut out, &workers, &process, per_worker);
        }
        let each = start.elapsed() / rounds;
        let lines = out.lines().filter(|l| !l.starts_with('#')).count();
        println!(
            "64 workers x 100 routes x 20 clusters, {}: {:.1} ms per scrape, {} KiB, {lines} series",
            if per_worker { "per worker" } else { "summed (default)" },
            each.as_secs_f64() * 1e3,
            out.len() / 1024
        );
    }
}

#[test]
fn no_workers_still_declares_every_family() {
    let mut out = String::new();
    render_prometheus(&mut out, &[], &ProcessInfo::default(), false);
    let exp = parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let rendered = table::WORKER_FAMILIES.iter().map(|w| &w.family).chain(table::FAMILIES);
    assert_eq!(exp.order, rendered.map(|f| f.name.to_string()).collect::<Vec<_>>());
    assert_eq!(exp.value("gateway_draining", &[]), 0.0);
}

#[test]
fn the_parser_rejects_invalid_expositions() {
    let undeclared = "# TYPE a counter\na_total 1\n";
    assert!(parse(undeclared).is_err(), "sample of an undeclared family");
    let cases = [
        ("# TYPE a counter\n# TYPE a counter\na 1\n", "declared twice"),
        ("a 1\n# TYPE a counter\n", "sample before TYPE"),
        ("# TYPE a counter\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n", "family split"),
        ("# TYPE a counter\na 1\na 2\n", "duplicate series"),
        ("# TYPE a counter\na{x=\"1\\t\"} 1\n", "bad escape"),
        ("# TYPE a counter\na{x=\"1\"\n", "unterminated"),
        ("# TYPE 1a counter\n1a 1\n", "bad name"),
        ("# TYPE a counter\na{__x=\"1\"} 1\n", "reserved label"),
        ("# TYPE a counter\na 1", "no final newline"),
        ("# TYPE a counter\na one\n", "bad value"),
        ("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n", "not cumulative"),
        ("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n", "+Inf != count"),
        ("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 0\nh_count 1\n", "no +Inf"),
        ("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", "no _sum"),
    ];
    for (text, why) in cases {
        assert!(parse(text).is_err(), "accepted ({why}): {text:?}");
    }
    let good =
        "# HELP h x\\ny\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n";
    assert_eq!(parse(good).unwrap().families["h"].help.as_deref(), Some("x\ny"));
}
