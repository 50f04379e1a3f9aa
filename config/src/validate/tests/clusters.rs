//! `[[clusters]]`: endpoints, balancer, pool and timeouts.

use std::time::Duration;

use super::{assert_one, errors, valid, LISTENER};
use crate::model::Balancer;

/// Listener on lines 1-3, then the cluster from line 4 (`[[clusters]]`, `name = "c"`), its
/// other keys from line 6 on.
pub(super) fn with_cluster(keys: &str) -> String {
    format!("{LISTENER}[[clusters]]\nname = \"c\"\n{keys}")
}

#[test]
fn endpoints_and_defaults() {
    let text = with_cluster("endpoints = [\"127.0.0.1:9000\", { address = \"127.0.0.1:9001\", weight = 3 }, { address = \"[::1]:9002\" }, \"localhost:9003\"]\n");
    let cluster = valid(&text).clusters.remove(0);
    let summary: Vec<(&str, String, u32)> =
        cluster.endpoints.iter().map(|e| (e.name.as_str(), e.address.to_string(), e.weight)).collect();
    assert_eq!(
        summary[..3],
        [
            ("127.0.0.1:9000", "127.0.0.1:9000".to_owned(), 1),
            ("127.0.0.1:9001", "127.0.0.1:9001".to_owned(), 3),
            ("[::1]:9002", "[::1]:9002".to_owned(), 1),
        ]
    );
    assert_eq!(summary[3].0, "localhost:9003");
    assert!(cluster.endpoints[3].address.ip().is_loopback());
    assert_eq!(cluster.endpoints[3].address.port(), 9003);
    assert_eq!(cluster.balancer, Balancer::P2c);
    assert_eq!(cluster.connect_timeout, Duration::from_secs(3));
    assert_eq!((cluster.pool.max_idle_per_endpoint, cluster.pool.idle_timeout), (1024, Duration::from_secs(30)));
}

#[test]
fn balancer_pool_timeout() {
    let text = with_cluster("endpoints = [\"127.0.0.1:9000\"]\nbalancer = \"round_robin\"\nconnect_timeout = \"250ms\"\n[clusters.pool]\nmax_idle_per_endpoint = 0\nidle_timeout = \"2m\"\n");
    let cluster = valid(&text).clusters.remove(0);
    assert_eq!(cluster.balancer, Balancer::RoundRobin);
    assert_eq!(cluster.connect_timeout, Duration::from_millis(250));
    assert_eq!((cluster.pool.max_idle_per_endpoint, cluster.pool.idle_timeout), (0, Duration::from_secs(120)));
}

#[test]
fn bad_clusters() {
    let ep = "endpoints = [\"127.0.0.1:9000\"]\n";
    let cases = [
        (String::new(), "clusters[0].endpoints", Some(4), "cluster has no endpoints"),
        ("endpoints = []\n".to_owned(), "clusters[0].endpoints", Some(6), "cluster has no endpoints"),
        (
            format!("{ep}balancer = \"random\"\n"),
            "clusters[0].balancer",
            Some(7),
            "unknown value \"random\" (expected one of \"p2c\", \"round_robin\", \"peak_ewma\", \"maglev\")",
        ),
        (format!("{ep}connect_timeout = \"0ms\"\n"), "clusters[0].connect_timeout", Some(7), "greater than zero"),
        (
            format!("{ep}pool = {{ max_idle_per_endpoint = -1 }}\n"),
            "clusters[0].pool.max_idle_per_endpoint",
            Some(7),
            "got -1",
        ),
        (format!("{ep}pool = {{ idle_timeout = \"48h\" }}\n"), "clusters[0].pool.idle_timeout", Some(7), "at most 24h"),
        (format!("{ep}pool = {{ size = 1 }}\n"), "clusters[0].pool.size", Some(7), "unknown field `size`"),
        (format!("{ep}tls = true\n"), "clusters[0].tls", Some(7), "expected a table with ca and an optional sni"),
    ];
    for (keys, path, line, needle) in cases {
        assert_one(&with_cluster(&keys), path, line, needle);
    }
}

#[test]
fn bad_endpoints() {
    let cases = [
        ("\"127.0.0.1\"", "clusters[0].endpoints[0]", "invalid endpoint \"127.0.0.1\": expected host:port"),
        ("\"127.0.0.1:http\"", "clusters[0].endpoints[0]", "port from 1 to 65535"),
        ("\"127.0.0.1:0\"", "clusters[0].endpoints[0]", "port 0"),
        ("\"0.0.0.0:80\"", "clusters[0].endpoints[0]", "0.0.0.0 cannot be connected to"),
        (
            "\"no-such-host.invalid:80\"",
            "clusters[0].endpoints[0]",
            "cannot resolve endpoint \"no-such-host.invalid:80\"",
        ),
        ("{ address = \"no-such-host.invalid:80\" }", "clusters[0].endpoints[0].address", "cannot resolve endpoint"),
        ("{ address = \"127.0.0.1:80\", weight = 0 }", "clusters[0].endpoints[0].weight", "between 1 and 1000, got 0"),
        (
            "{ address = \"127.0.0.1:80\", weight = 1001 }",
            "clusters[0].endpoints[0].weight",
            "between 1 and 1000, got 1001",
        ),
        ("{ weight = 2 }", "clusters[0].endpoints[0]", "missing field `address`"),
        ("{ address = \"127.0.0.1:80\", wieght = 2 }", "clusters[0].endpoints[0].wieght", "unknown field `wieght`"),
        ("80", "clusters[0].endpoints[0]", "expected \"host:port\" or a table"),
    ];
    for (endpoint, path, needle) in cases {
        let text = with_cluster(&format!("endpoints = [{endpoint}]\n"));
        assert_one(&text, path, Some(6), needle);
    }
    let text = with_cluster("endpoints = [\"127.0.0.1:80\", { address = \"127.0.0.1:80\", weight = 2 }]\n");
    assert_one(&text, "clusters[0].endpoints[1]", Some(6), "like endpoints[0] (\"127.0.0.1:80\")");
}

#[test]
fn cluster_names() {
    let text = format!(
        "{}[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\n",
        with_cluster("endpoints = [\"127.0.0.1:1\"]\n")
    );
    assert_one(&text, "clusters[1].name", Some(8), "duplicate name \"c\" (already used by clusters[0])");
    let text = format!("{LISTENER}[[clusters]]\nname = \"a/b\"\nendpoints = [\"127.0.0.1:1\"]\n");
    assert_one(&text, "clusters[0].name", Some(5), "invalid name \"a/b\"");
}

#[test]
fn broken_cluster_is_still_known_to_routes() {
    // The cluster fails to deserialize; the route naming it must not add "unknown cluster".
    let text = with_cluster("endpoints = [\"127.0.0.1:1\"]\nweight = 2\n[[routes]]\nname = \"r\"\ncluster = \"c\"\n");
    let errors = errors(&text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!((errors[0].0.as_str(), errors[0].1), ("clusters[0].weight", Some(7)));
}
