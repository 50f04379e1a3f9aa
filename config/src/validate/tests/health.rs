//! `clusters[].health_check`, `outlier_detection`, `all_unhealthy`, `hash_key` and the
//! balancers that go with them.

use std::time::Duration;

use super::clusters::with_cluster;
use super::{assert_one, errors, valid};
use crate::model::{AllUnhealthy, Balancer, Cluster, HashKey, HealthCheck, OutlierDetection};

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
    assert_eq!(c.health_check, None);
    assert_eq!(
        c.outlier_detection,
        OutlierDetection {
            enabled: true,
            consecutive_5xx: 5,
            consecutive_gateway_errors: 3,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 50,
        }
    );
    assert_eq!((c.all_unhealthy, c.hash_key), (AllUnhealthy::Fail, None));
    let h = cluster("health_check = { path = \"/healthz\" }\n").health_check.unwrap();
    assert_eq!(
        h,
        HealthCheck {
            path: "/healthz".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            healthy_threshold: 2,
            unhealthy_threshold: 3,
            expected_statuses: vec![200..=399],
            host: None,
        }
    );
    assert!(h.expects(200) && h.expects(399) && !h.expects(400) && !h.expects(199));
}

#[test]
fn every_key() {
    let c = cluster(
        "all_unhealthy = \"panic\"\nbalancer = \"maglev\"\nhash_key = \"header:X-User\"\n\
         [clusters.health_check]\npath = \"/ready\"\ninterval = \"100ms\"\ntimeout = \"50ms\"\n\
         healthy_threshold = 1\nunhealthy_threshold = 100\nexpected_statuses = [204, \"200-202\", \" 300 - 301 \"]\nhost = \"api.internal:8080\"\n\
         [clusters.outlier_detection]\nenabled = false\nconsecutive_5xx = 0\nconsecutive_gateway_errors = 10000\n\
         base_ejection_time = \"1s\"\nmax_ejection_time = \"1s\"\nmax_ejection_percent = 100\n",
    );
    assert_eq!((c.all_unhealthy, c.balancer), (AllUnhealthy::Panic, Balancer::Maglev));
    assert_eq!(c.hash_key, Some(HashKey::Header("x-user".into())));
    let h = c.health_check.unwrap();
    assert_eq!((h.interval, h.timeout), (Duration::from_millis(100), Duration::from_millis(50)));
    assert_eq!((h.healthy_threshold, h.unhealthy_threshold), (1, 100));
    assert_eq!(h.expected_statuses, vec![204..=204, 200..=202, 300..=301]);
    assert_eq!(h.host.as_deref(), Some("api.internal:8080"));
    let o = c.outlier_detection;
    assert!(!o.enabled);
    assert_eq!((o.consecutive_5xx, o.consecutive_gateway_errors, o.max_ejection_percent), (0, 10000, 100));
    assert_eq!(cluster("balancer = \"maglev\"\nhash_key = \"client_ip\"\n").hash_key, Some(HashKey::ClientIp));
    assert_eq!(
        cluster("balancer = \"maglev\"\nhash_key = \"cookie:session\"\n").hash_key,
        Some(HashKey::Cookie("session".into()))
    );
    assert_eq!(cluster("balancer = \"peak_ewma\"\n").balancer, Balancer::PeakEwma);
}

#[test]
fn health_check_needs_a_valid_path() {
    assert_one(
        &with_keys("health_check = { interval = \"2s\" }\n"),
        "clusters[0].health_check",
        Some(7),
        "needs a `path`",
    );
    assert_one(
        &with_keys("health_check = { path = \"healthz\" }\n"),
        "clusters[0].health_check.path",
        Some(7),
        "must start with '/'",
    );
    assert_one(
        &with_keys("health_check = { path = \"/a b\" }\n"),
        "clusters[0].health_check.path",
        Some(7),
        "printable ASCII",
    );
}

#[test]
fn health_check_timing() {
    assert_one(
        &with_keys("health_check = { path = \"/h\", interval = \"10ms\", timeout = \"5ms\" }\n"),
        "clusters[0].health_check.interval",
        Some(7),
        "between 100ms and 1h",
    );
    assert_one(
        &with_keys("health_check = { path = \"/h\", interval = \"1s\", timeout = \"1s\" }\n"),
        "clusters[0].health_check.timeout",
        Some(7),
        "must be shorter than interval",
    );
    // The default timeout (1s) against a short interval: point at the interval.
    assert_one(
        &with_keys("health_check = { path = \"/h\", interval = \"500ms\" }\n"),
        "clusters[0].health_check.interval",
        Some(7),
        "the default",
    );
    assert_one(
        &with_keys("health_check = { path = \"/h\", timeout = 1 }\n"),
        "clusters[0].health_check.timeout",
        Some(7),
        "needs a unit",
    );
}

#[test]
fn health_check_thresholds_statuses_and_host() {
    for key in ["healthy_threshold", "unhealthy_threshold"] {
        for bad in ["0", "101"] {
            assert_one(
                &with_keys(&format!("health_check = {{ path = \"/h\", {key} = {bad} }}\n")),
                &format!("clusters[0].health_check.{key}"),
                Some(7),
                "between 1 and 100",
            );
        }
    }
    assert_one(
        &with_keys("health_check = { path = \"/h\", expected_statuses = [] }\n"),
        "clusters[0].health_check.expected_statuses",
        Some(7),
        "at least one",
    );
    for (bad, needle) in [
        ("99", "100 to 599"),
        ("\"600\"", "100 to 599"),
        ("\"300-200\"", "must not exceed"),
        ("\"2xx\"", "invalid status"),
    ] {
        assert_one(
            &with_keys(&format!("health_check = {{ path = \"/h\", expected_statuses = [200, {bad}] }}\n")),
            "clusters[0].health_check.expected_statuses[1]",
            Some(7),
            needle,
        );
    }
    assert_one(
        &with_keys("health_check = { path = \"/h\", host = \"a b\" }\n"),
        "clusters[0].health_check.host",
        Some(7),
        "invalid host",
    );
    assert_one(
        &with_keys("health_check = { path = \"/h\", method = \"HEAD\" }\n"),
        "clusters[0].health_check.method",
        Some(7),
        "unknown field",
    );
}

#[test]
fn outlier_detection_ranges() {
    for (keys, key, needle) in [
        ("consecutive_5xx = -1", "consecutive_5xx", "between 0 and 10000"),
        ("consecutive_gateway_errors = 10001", "consecutive_gateway_errors", "between 0 and 10000"),
        ("max_ejection_percent = 101", "max_ejection_percent", "between 0 and 100"),
        ("base_ejection_time = \"0s\"", "base_ejection_time", ""),
        ("max_ejection_time = \"10s\"", "max_ejection_time", "at least base_ejection_time"),
        ("base_ejection_time = \"10m\"", "base_ejection_time", "at least base_ejection_time"),
    ] {
        assert_one(
            &with_keys(&format!("outlier_detection = {{ {keys} }}\n")),
            &format!("clusters[0].outlier_detection.{key}"),
            Some(7),
            needle,
        );
    }
}

#[test]
fn all_unhealthy_and_hash_key() {
    assert_one(&with_keys("all_unhealthy = \"open\"\n"), "clusters[0].all_unhealthy", Some(7), "\"fail\", \"panic\"");
    assert_one(&with_keys("balancer = \"maglev\"\n"), "clusters[0].balancer", Some(7), "needs a `hash_key`");
    assert_one(
        &with_keys("hash_key = \"client_ip\"\n"),
        "clusters[0].hash_key",
        Some(7),
        "only by balancer = \"maglev\"",
    );
    for bad in ["ip", "header:", "header:a b", "cookie:x;y", "query:id"] {
        assert_one(
            &with_keys(&format!("balancer = \"maglev\"\nhash_key = \"{bad}\"\n")),
            "clusters[0].hash_key",
            Some(8),
            "invalid hash_key",
        );
    }
    assert_one(&with_keys("balancer = \"least_conn\"\n"), "clusters[0].balancer", Some(7), "\"peak_ewma\", \"maglev\"");
    // Every problem of a table is reported, not only the first.
    assert_eq!(
        errors(&with_keys("health_check = { path = \"x\", healthy_threshold = 0, expected_statuses = [1] }\n")).len(),
        3
    );
}
