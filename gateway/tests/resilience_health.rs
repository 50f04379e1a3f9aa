//! End-to-end: active health checks, passive outlier detection, `all_unhealthy` and the
//! maglev balancer, against real origins on 127.0.0.1 that fail on command.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;
#[path = "resilience/origin.rs"]
mod switch_origin;

use std::time::{Duration, Instant};

use common::*;
use switch_origin::{SwitchOrigin, FAIL_5XX, HEALTH_503, OK, REFUSE};

/// A gateway whose one route proxies to cluster `c` of `origins`; `cluster` holds more keys
/// of the cluster (inline keys first, then sub-tables).
fn gateway(driver: &str, workers: usize, origins: &[SwitchOrigin], cluster: &str) -> TestGateway {
    TestGateway::start(&config_text(driver, workers, origins, cluster))
}

fn config_text(driver: &str, workers: usize, origins: &[SwitchOrigin], cluster: &str) -> String {
    let endpoints: Vec<String> = origins.iter().map(|o| format!("\"{}\"", o.addr)).collect();
    format!(
        r#"
[server]
workers = {workers}
io_driver = "{driver}"
admin = {{ address = "127.0.0.1:0" }}
drain_timeout = "5s"
log_level = "error"

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["http/1.1", "h2"]

[[routes]]
name = "default"
cluster = "c"
timeout = "2s"

[[clusters]]
name = "c"
endpoints = [{}]
connect_timeout = "500ms"
{cluster}
"#,
        endpoints.join(", ")
    )
}

fn origins(n: usize) -> Vec<SwitchOrigin> {
    (0..n).map(|i| SwitchOrigin::start(&format!("o{i}"))).collect()
}

/// Statuses of `n` GETs, each on a new connection.
fn send(gw: &TestGateway, n: usize) -> Vec<u16> {
    (0..n).map(|_| get(gw.addr, "/x").status).collect()
}

fn admin(gw: &TestGateway, path: &str) -> Resp {
    get(gw.gw.as_ref().unwrap().admin_addr().unwrap(), path)
}

/// Endpoint `i` of cluster `c` as `/clusters` shows it.
fn endpoint(gw: &TestGateway, i: usize) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&admin(gw, "/clusters").body).unwrap();
    v["clusters"][0]["endpoints"][i].clone()
}

fn hits(o: &[SwitchOrigin]) -> Vec<u64> {
    o.iter().map(SwitchOrigin::hits).collect()
}

#[test]
fn consecutive_5xx_ejects_an_endpoint_until_its_ejection_time_is_up() {
    each_driver(|d| {
        let o = origins(3);
        let gw = gateway(
            d,
            1,
            &o,
            "balancer = \"round_robin\"\noutlier_detection = { consecutive_5xx = 3, base_ejection_time = \"1s\" }",
        );
        o[0].set(FAIL_5XX);
        // Round robin: o0 gets every third request; its third 5xx ejects it.
        let statuses = send(&gw, 9);
        assert_eq!(statuses.iter().filter(|&&s| s == 500).count(), 3, "{d}: {statuses:?}");
        let ejected_at = Instant::now();
        let before = o[0].hits();
        assert!(send(&gw, 20).iter().all(|&s| s == 200), "{d}");
        assert_eq!(o[0].hits(), before, "{d}: an ejected endpoint gets no traffic");
        let e = endpoint(&gw, 0);
        assert_eq!((e["ejected"].as_bool(), e["workers"][0]["times_ejected"].as_u64()), (Some(true), Some(1)), "{e}");
        assert_eq!(e["health"], "unchecked");
        o[0].set(OK);
        // Back after base_ejection_time x 1.
        assert!(wait_until(Duration::from_secs(5), || {
            send(&gw, 3);
            o[0].hits() > before
        }));
        assert!(ejected_at.elapsed() >= Duration::from_millis(900), "{d}: back too early");
        assert_eq!(endpoint(&gw, 0)["ejected"], false);
        let metrics = admin(&gw, "/metrics?per_worker=1").text();
        assert!(
            metrics.contains(r#"gateway_cluster_ejections_total{cluster="c",reason="consecutive_5xx",worker="0"} 1"#),
            "{metrics}"
        );
    });
}

#[test]
fn refused_connections_eject_an_endpoint_and_it_returns() {
    each_driver(|d| {
        let o = origins(3);
        let gw = gateway(
            d,
            1,
            &o,
            "balancer = \"round_robin\"\noutlier_detection = { consecutive_gateway_errors = 2, base_ejection_time = \"1s\" }",
        );
        o[1].set(REFUSE);
        // The origin closes its listener asynchronously: wait until connections are refused.
        assert!(wait_until(Duration::from_secs(2), || std::net::TcpStream::connect(o[1].addr).is_err()));
        // The default retry policy moves each refused try to another endpoint: clients see only
        // 200s, while the refusals count towards the ejection.
        let statuses = send(&gw, 2);
        assert!(statuses.iter().all(|&s| s == 200), "{d}: {statuses:?}");
        // One refusal: suspect (POSTs would pass it over), not ejected.
        let w = &endpoint(&gw, 1)["workers"][0];
        assert_eq!((w["suspect"].as_bool(), w["ejected"].as_bool()), (Some(true), Some(false)), "{d}: {w}");
        assert!(w["suspect_until"].as_f64().is_some(), "{d}: {w}");
        assert_eq!(endpoint(&gw, 0)["workers"][0]["suspect"], false, "{d}");
        let statuses = send(&gw, 4);
        assert!(statuses.iter().all(|&s| s == 200), "{d}: {statuses:?}");
        assert_eq!(gw.total("upstream_retries"), 2, "{d}");
        assert!(send(&gw, 20).iter().all(|&s| s == 200), "{d}: the refusing endpoint is ejected");
        assert_eq!(gw.total("upstream_retries"), 2, "{d}: no try went to the ejected endpoint");
        let e = endpoint(&gw, 1);
        assert_eq!(e["ejected"], true, "{e}");
        assert_eq!(e["workers"][0]["suspect"], false, "{d}: ejected, no longer merely suspect: {e}");
        o[1].set(OK);
        assert!(wait_until(Duration::from_secs(5), || {
            send(&gw, 3);
            o[1].hits() > 0
        }));
        let metrics = admin(&gw, "/metrics?per_worker=1").text();
        let line = r#"gateway_cluster_ejections_total{cluster="c",reason="consecutive_gateway_errors",worker="0"} 1"#;
        assert!(metrics.contains(line), "{metrics}");
    });
}

#[test]
fn a_one_endpoint_cluster_is_never_ejected_passively() {
    let o = origins(1);
    let gw = gateway("epoll", 1, &o, "outlier_detection = { consecutive_5xx = 2, consecutive_gateway_errors = 1 }");
    o[0].set(FAIL_5XX);
    assert!(send(&gw, 10).iter().all(|&s| s == 500));
    assert_eq!(o[0].hits(), 10, "every request still reaches the only endpoint");
    assert_eq!(endpoint(&gw, 0)["ejected"], false);
    o[0].set(OK);
    assert_eq!(send(&gw, 1), [200]);
}

#[test]
fn max_ejection_percent_caps_the_ejected_endpoints() {
    let o = origins(4);
    let gw = gateway(
        "epoll",
        1,
        &o,
        "balancer = \"round_robin\"\noutlier_detection = { consecutive_5xx = 1, max_ejection_percent = 50, base_ejection_time = \"1m\" }",
    );
    for failing in &o[..3] {
        failing.set(FAIL_5XX);
    }
    send(&gw, 12);
    let before = hits(&o);
    let statuses = send(&gw, 40);
    let after = hits(&o);
    let got: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // floor(4 x 50%) = 2 ejected: one failing endpoint and the healthy one share the traffic.
    assert_eq!(got.iter().filter(|&&g| g == 0).count(), 2, "{got:?}");
    assert_eq!((got[3], got[..3].iter().sum::<u64>()), (20, 20), "{got:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 500).count(), 20);
    let ejected = (0..4).filter(|&i| endpoint(&gw, i)["ejected"] == true).count();
    assert_eq!(ejected, 2);
}

const HEALTH: &str = "outlier_detection = { enabled = false }\n[clusters.health_check]\npath = \"/healthz\"\n\
                      interval = \"100ms\"\ntimeout = \"80ms\"\nunhealthy_threshold = 2\nhealthy_threshold = 2\n";

#[test]
fn health_checks_take_an_endpoint_out_and_back() {
    each_driver(|d| {
        let o = origins(2);
        let gw = gateway(d, 1, &o, HEALTH);
        let health = |i| endpoint(&gw, i)["health"].as_str().unwrap_or_default().to_owned();
        assert!(wait_until(Duration::from_secs(5), || health(0) == "healthy" && health(1) == "healthy"), "{d}");
        o[0].set(HEALTH_503);
        assert!(wait_until(Duration::from_secs(5), || health(0) == "unhealthy"), "{d}");
        let e = endpoint(&gw, 0);
        assert!(e["active_health"]["consecutive_failed"].as_u64() >= Some(2), "{e}");
        assert_eq!(e["active_health"]["last_status"], 503, "{e}");
        let before = hits(&o);
        assert!(send(&gw, 20).iter().all(|&s| s == 200));
        assert_eq!(hits(&o), vec![before[0], before[1] + 20], "{d}: no traffic to the unhealthy endpoint");
        o[0].set(OK);
        assert!(wait_until(Duration::from_secs(5), || health(0) == "healthy"), "{d}");
        send(&gw, 20);
        assert!(o[0].hits() > before[0], "{d}: traffic again once healthy");
        let head = o[0].last_health_head();
        assert!(head.starts_with("get /healthz http/1.1\r\n"), "{head}");
        for field in ["user-agent: gateway-health-check\r\n", "connection: close\r\n"] {
            assert!(head.contains(field), "{head}");
        }
        assert!(head.contains(&format!("host: {}\r\n", o[0].addr)), "the endpoint's name by default: {head}");
        let metrics = admin(&gw, "/metrics?per_worker=1").text();
        let ep = o[0].addr;
        for to in ["unhealthy", "healthy"] {
            let line = format!(r#"gateway_health_transitions_total{{cluster="c",endpoint="{ep}",to="{to}"}} 1"#);
            assert!(metrics.contains(&line), "{line}\n{metrics}");
        }
    });
}

#[test]
fn reloads_keep_health_and_the_checker_follows_the_config() {
    let o = origins(3);
    let gw = gateway("epoll", 1, &o[..2], HEALTH);
    let health = |i| endpoint(&gw, i)["health"].as_str().unwrap_or_default().to_owned();
    o[0].set(HEALTH_503);
    assert!(wait_until(Duration::from_secs(5), || health(0) == "unhealthy" && health(1) == "healthy"));
    let apply = |origins: &[SwitchOrigin]| {
        let config = gateway_config::parse(&config_text("epoll", 1, origins, HEALTH), "<test>").unwrap();
        gw.gw.as_ref().unwrap().apply(config).unwrap();
    };
    // A new endpoint rebuilds the worker's cluster state: o0's health stays, o2 starts healthy.
    apply(&o);
    let before = hits(&o);
    assert!(send(&gw, 20).iter().all(|&s| s == 200));
    let got: Vec<u64> = hits(&o).iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!((got[0], got[1] + got[2]), (0, 20), "o0 is still unhealthy after the reload: {got:?}");
    assert!(got[2] > 0, "the new endpoint starts healthy: {got:?}");
    assert!(wait_until(Duration::from_secs(5), || o[2].health_hits() >= 2), "the new endpoint is checked");
    assert_eq!(health(0), "unhealthy");
    // A removed endpoint is no longer checked.
    apply(&[SwitchOrigin::start("unused"), SwitchOrigin::start("unused2")]);
    std::thread::sleep(Duration::from_millis(200));
    let checks = o[1].health_hits();
    std::thread::sleep(Duration::from_millis(500));
    assert!(o[1].health_hits() <= checks + 1, "checks of a removed endpoint stop");
}

/// A TLS origin's server config for `origin.test`, its CA written into a new directory
/// (returned: the CA file and the directory, for the test to remove).
fn tls_origin(tag: &str) -> (std::sync::Arc<rustls::ServerConfig>, std::path::PathBuf, std::path::PathBuf) {
    use rustls_pki_types::pem::PemObject;
    let pki = common::tls::TestPki::new();
    let (chain, key) = pki.leaf(&["origin.test"]);
    let dir = common::tls::temp_dir(tag);
    let ca = pki.write(&dir, "ca.pem", &pki.ca_pem());
    let certs: Vec<_> =
        rustls_pki_types::CertificateDer::pem_slice_iter(chain.as_bytes()).map(Result::unwrap).collect();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    (std::sync::Arc::new(config), ca, dir)
}

#[test]
fn health_checks_speak_tls_to_tls_clusters() {
    let (server, ca, dir) = tls_origin("resilience-tls");
    let o = vec![SwitchOrigin::start_with("tls", Some(server))];
    let keys = format!("tls = {{ sni = \"origin.test\", ca = \"{}\" }}\n{HEALTH}", ca.display());
    let gw = gateway("epoll", 1, &o, &keys);
    let health = || endpoint(&gw, 0)["active_health"].clone();
    assert!(wait_until(Duration::from_secs(5), || health()["last_status"] == 200), "{}", health());
    assert_eq!(health()["health"], "healthy");
    assert_eq!(send(&gw, 1), [200], "the route works over TLS too");
    o[0].set(HEALTH_503);
    assert!(wait_until(Duration::from_secs(5), || health()["health"] == "unhealthy"), "{}", health());
    let _ = std::fs::remove_dir_all(&dir);
}

/// HTTP/1.1 to a TLS upstream on both drivers (on io_uring the upstream connection goes back
/// to completion mode after its handshake: `runtime::uring_tls`): responses larger than the
/// response buffer, a request body, and requests that reuse the pooled connection.
#[test]
fn http1_over_tls_to_upstreams_carries_bodies_both_ways_on_reused_connections() {
    let (server, ca, dir) = tls_origin("upstream-tls-h1");
    each_driver(|d| {
        let o = vec![SwitchOrigin::start_with("tls", Some(std::sync::Arc::clone(&server)))];
        let gw = gateway(d, 1, &o, &format!("tls = {{ sni = \"origin.test\", ca = \"{}\" }}", ca.display()));
        for n in [0, 10, 40_000, 100_000] {
            let r = get(gw.addr, &format!("/bytes/{n}"));
            assert_eq!((r.status, r.body.len()), (200, n), "{d}");
            assert!(r.body == loadtests::origin::pattern(n), "{d}: {n} bytes differ");
        }
        let body = loadtests::origin::pattern(200_000);
        let mut raw = format!("POST /echo HTTP/1.1\r\nhost: a\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
        raw.extend_from_slice(&body);
        let r = exchange(gw.addr, &raw);
        assert_eq!(r.status, 200, "{d}");
        assert!(r.body == body, "{d}: the echoed body differs ({} bytes)", r.body.len());
        assert_eq!(send(&gw, 20), [200; 20], "{d}");
        assert_eq!(o[0].hits(), 25, "{d}");
        // Kept alive: far fewer connections than requests.
        let connects = gw.total("upstream_connects");
        assert!((1..=5).contains(&connects), "{d}: {connects} connections");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn all_unhealthy_fails_fast_or_panics_as_configured() {
    for (mode, expected) in [("fail", 503), ("panic", 200)] {
        let o = origins(1);
        o[0].set(HEALTH_503);
        let gw = gateway("epoll", 1, &o, &format!("all_unhealthy = \"{mode}\"\n{HEALTH}"));
        assert!(wait_until(Duration::from_secs(5), || endpoint(&gw, 0)["health"] == "unhealthy"), "{mode}");
        let started = Instant::now();
        let r = get(gw.addr, "/x");
        assert!(started.elapsed() < Duration::from_millis(500), "{mode}: fast");
        assert_eq!(r.status, expected, "{mode}");
        let reason = (expected == 503).then_some("no-healthy-upstream");
        assert_eq!(r.header("x-gateway-reason"), reason, "{mode}");
        let h2 = clients::runtime().block_on(async {
            let mut c = clients::h2_connect(gw.addr, None).await;
            clients::h2_request(&mut c, clients::h2_get("http", "a", "/x"), None).await.unwrap()
        });
        assert_eq!(h2.status, expected, "{mode} over h2");
        assert_eq!(h2.headers.get("x-gateway-reason").map(|v| v.to_str().unwrap()), reason, "{mode} over h2");
        // Nothing reached the origin, or both requests (HTTP/1.1 and HTTP/2) in panic mode.
        let served = 2 * u64::from(expected == 200);
        assert_eq!(o[0].hits(), served, "{mode}");
        let panics = format!(r#"gateway_cluster_panic_picks_total{{cluster="c",worker="0"}} {served}"#);
        assert!(admin(&gw, "/metrics?per_worker=1").text().contains(&panics), "{mode}");
    }
}

#[test]
fn health_traffic_does_not_grow_with_the_worker_count() {
    let o = origins(1);
    let gw = gateway("epoll", 2, &o, HEALTH);
    assert!(wait_until(Duration::from_secs(5), || o[0].health_hits() >= 2));
    let (start, at) = (o[0].health_hits(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let per_second = (o[0].health_hits() - start) as f64 / at.elapsed().as_secs_f64();
    // One checker per process: about 10 checks a second at 100ms, not 20 with two workers.
    assert!((4.0..=13.0).contains(&per_second), "{per_second}");
    drop(gw);
}

#[test]
fn maglev_sends_one_key_to_one_origin_in_every_gateway() {
    each_driver(|d| {
        let o = origins(3);
        let keys = "balancer = \"maglev\"\nhash_key = \"header:x-user\"";
        let first = gateway(d, 2, &o, keys);
        let second = gateway(d, 1, &o, keys);
        let served = |gw: &TestGateway, user: usize| {
            let raw = format!("GET /x HTTP/1.1\r\nhost: a\r\nx-user: user-{user}\r\n\r\n");
            exchange(gw.addr, raw.as_bytes()).text()
        };
        let mut owners = std::collections::BTreeSet::new();
        for user in 0..30 {
            let owner = served(&first, user);
            for _ in 0..3 {
                assert_eq!(served(&first, user), owner, "{d}: user-{user} moved between requests or workers");
            }
            assert_eq!(served(&second, user), owner, "{d}: user-{user}: another gateway, another origin");
            owners.insert(owner);
        }
        assert!(owners.len() >= 2, "{d}: keys spread over the origins: {owners:?}");
        // HTTP/2 requests hash the same key to the same origin.
        let rt = clients::runtime();
        rt.block_on(async {
            let mut c = clients::h2_connect(first.addr, None).await;
            for user in 0..10 {
                let mut req = clients::h2_get("http", "a", "/x");
                req.headers_mut().insert("x-user", format!("user-{user}").parse().unwrap());
                let r = clients::h2_request(&mut c, req, None).await.unwrap();
                assert_eq!(String::from_utf8(r.body).unwrap(), served(&second, user), "{d}: user-{user} over h2");
            }
        });
        // Requests without the key still get served (p2c).
        assert_eq!(send(&first, 5), [200; 5]);
    });
}
