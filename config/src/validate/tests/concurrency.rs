//! `clusters[].caps` and `clusters[].adaptive_concurrency`.

use std::time::Duration;

use super::clusters::with_cluster;
use super::{assert_one, errors, valid};
use crate::model::{AdaptiveConcurrency, Caps, Cluster};

/// A cluster with one endpoint (line 6) and `keys` from line 7 on.
fn with_keys(keys: &str) -> String {
    with_cluster(&format!("endpoints = [\"127.0.0.1:9000\"]\n{keys}"))
}

fn cluster(keys: &str) -> Cluster {
    valid(&with_keys(keys)).clusters.remove(0)
}

#[test]
fn defaults() {
    let c = cluster("");
    assert_eq!(c.caps, Caps { max_connections: 1024, max_pending: 1024, max_requests: 1024, max_retries: 64 });
    assert_eq!(
        c.adaptive_concurrency,
        AdaptiveConcurrency {
            // No route names a class: nobody to favour, the limit is off.
            enabled: false,
            initial_limit: 16,
            min_limit: 2,
            tolerance: 0.05,
            probe_interval: Duration::from_secs(10),
        }
    );
    // Each key is optional on its own.
    assert!(!cluster("adaptive_concurrency = {}\n").adaptive_concurrency.enabled);
    assert_eq!(cluster("caps = { max_pending = 10 }\n").caps.max_requests, 1024);
    assert_eq!(cluster("adaptive_concurrency = { tolerance = 0.5 }\n").adaptive_concurrency.initial_limit, 16);
}

#[test]
fn every_key() {
    let c = cluster(
        "caps = { max_connections = 1, max_pending = 1000000, max_requests = 4, max_retries = 0 }\n\
         adaptive_concurrency = { enabled = false, initial_limit = 4, min_limit = 1, tolerance = 2, probe_interval = \"1h\" }\n",
    );
    assert_eq!(c.caps, Caps { max_connections: 1, max_pending: 1_000_000, max_requests: 4, max_retries: 0 });
    assert_eq!(
        c.adaptive_concurrency,
        AdaptiveConcurrency {
            enabled: false,
            initial_limit: 4,
            min_limit: 1,
            tolerance: 2.0,
            probe_interval: Duration::from_secs(3600),
        }
    );
    // Sub-tables work like inline tables; the limits may all be equal.
    let c = cluster(
        "[clusters.caps]\nmax_requests = 1000000\nmax_retries = 1000\n\
         [clusters.adaptive_concurrency]\ninitial_limit = 1000000\nmin_limit = 1000000\nprobe_interval = \"1s\"\n",
    );
    assert_eq!((c.caps.max_requests, c.caps.max_retries), (1_000_000, 1000));
    let a = c.adaptive_concurrency;
    assert_eq!((a.initial_limit, a.min_limit, a.probe_interval), (1_000_000, 1_000_000, Duration::from_secs(1)));
}

#[test]
fn bad_caps() {
    let cases = [
        ("max_connections = 0", "max_connections", "must be between 1 and 1000000, got 0"),
        ("max_pending = 1000001", "max_pending", "must be between 1 and 1000000, got 1000001"),
        ("max_requests = -1", "max_requests", "must be between 1 and 1000000, got -1"),
        ("max_retries = -1", "max_retries", "must be between 0 and 1000, got -1"),
        ("max_retries = 1001", "max_retries", "must be between 0 and 1000, got 1001"),
        ("max_retries = \"3\"", "max_retries", "invalid type: string \"3\", expected i64"),
        ("max_conns = 5", "max_conns", "unknown field `max_conns`, expected one of `max_connections`"),
    ];
    for (inner, key, needle) in cases {
        let text = with_keys(&format!("caps = {{ {inner} }}\n"));
        assert_one(&text, &format!("clusters[0].caps.{key}"), Some(7), needle);
    }
    assert_one(&with_keys("caps = 5\n"), "clusters[0].caps", Some(7), "expected a caps table");
}

#[test]
fn bad_adaptive_concurrency() {
    let cases = [
        ("initial_limit = 0", "initial_limit", "must be between 1 and 1000000, got 0"),
        ("min_limit = 0", "min_limit", "must be between 1 and 1000000, got 0"),
        ("min_limit = 20", "min_limit", "min_limit (20) must not exceed initial_limit (16)"),
        ("initial_limit = 4, min_limit = 5", "min_limit", "min_limit (5) must not exceed initial_limit (4)"),
        (
            "initial_limit = 2000",
            "initial_limit",
            "initial_limit (2000) must not exceed caps.max_requests (1024): the adaptive limit stays within the cap",
        ),
        // Checked while disabled too, so that enabling it cannot break a valid file.
        ("enabled = false, initial_limit = 2000", "initial_limit", "must not exceed caps.max_requests (1024)"),
        ("tolerance = 0", "tolerance", "tolerance must be greater than 0 and at most 2.0, got 0"),
        ("tolerance = -0.1", "tolerance", "got -0.1"),
        ("tolerance = 2.5", "tolerance", "got 2.5"),
        ("tolerance = nan", "tolerance", "got NaN"),
        ("probe_interval = \"500ms\"", "probe_interval", "probe_interval must be between 1s and 1h, got 500ms"),
        ("probe_interval = \"2h\"", "probe_interval", "between 1s and 1h, got 7200s"),
        ("probe_interval = \"0s\"", "probe_interval", "must be greater than zero"),
        ("probe_interval = 10", "probe_interval", "a duration needs a unit"),
        ("enabled = 1", "enabled", "invalid type: integer `1`, expected a boolean"),
        ("window = \"1s\"", "window", "unknown field `window`, expected one of `enabled`"),
    ];
    for (inner, key, needle) in cases {
        let text = with_keys(&format!("adaptive_concurrency = {{ {inner} }}\n"));
        assert_one(&text, &format!("clusters[0].adaptive_concurrency.{key}"), Some(7), needle);
    }
}

#[test]
fn initial_limit_within_max_requests() {
    // A small cap with the default initial limit: the default follows the cap, and a default
    // min_limit follows a small initial limit.
    let c = cluster("caps = { max_requests = 8 }\n");
    assert_eq!((c.caps.max_requests, c.adaptive_concurrency.initial_limit), (8, 8));
    let c = cluster("adaptive_concurrency = { initial_limit = 1 }\n");
    assert_eq!((c.adaptive_concurrency.initial_limit, c.adaptive_concurrency.min_limit), (1, 1));
    let text = with_keys("caps = { max_requests = 8 }\nadaptive_concurrency = { initial_limit = 10 }\n");
    assert_one(
        &text,
        "clusters[0].adaptive_concurrency.initial_limit",
        Some(8),
        "initial_limit (10) must not exceed caps.max_requests (8)",
    );
    let c = cluster("caps = { max_requests = 8 }\nadaptive_concurrency = { initial_limit = 8 }\n");
    assert_eq!((c.caps.max_requests, c.adaptive_concurrency.initial_limit), (8, 8));
    // An invalid cap is reported once, not again as a conflict.
    let found = errors(&with_keys("caps = { max_requests = 0 }\n"));
    assert_eq!(found.len(), 1, "{found:#?}");
}

#[test]
fn the_adaptive_limit_is_on_by_default_where_classes_are_in_use() {
    let route = "[[routes]]\nname = \"r\"\nmatch = { path_prefix = \"/\" }\ncluster = \"c\"\n";
    let with = |route_keys: &str, extra: &str, cluster_keys: &str| {
        let text = format!("{}\n{route}{route_keys}\n{extra}", with_keys(cluster_keys));
        valid(&text).clusters.remove(0).adaptive_concurrency.enabled
    };
    assert!(with("priority = \"critical\"\n", "", ""), "a route names a class");
    assert!(
        with("", "[overload]\npriority_header = \"x-priority\"\ntrusted_sources = [\"10.0.0.0/8\"]\n", ""),
        "a priority header can name one"
    );
    assert!(!with("", "", ""), "no class named anywhere");
    assert!(
        !with("priority = \"critical\"\n", "", "adaptive_concurrency = { enabled = false }\n"),
        "an explicit false stays"
    );
    assert!(with("", "", "adaptive_concurrency = { enabled = true }\n"), "an explicit true stays");
}
