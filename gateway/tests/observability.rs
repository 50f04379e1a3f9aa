//! End-to-end: Prometheus metrics, the access log and its drop counter, request ids, and the
//! systemd notification protocol.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use common::process::{GatewayProcess, TempDir};
use common::*;

fn cfg(origin: SocketAddr, extra_server: &str) -> String {
    format!(
        r#"
[server]
workers = 1
admin = {{ address = "127.0.0.1:0" }}
watch = false
{extra_server}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "home"
match = {{ path = "/" }}
direct_response = {{ status = 200, body = "home" }}

[[routes]]
name = "api"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
"#
    )
}

/// Parses Prometheus text strictly enough for these tests: every sample belongs to a family
/// declared by `# TYPE` before it, no family is declared twice. Returns series -> value.
fn parse_prometheus(text: &str) -> HashMap<String, f64> {
    let mut declared: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            assert!(declared.insert(name.to_string(), kind.to_string()).is_none(), "family {name} declared twice");
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let name = series.split('{').next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| declared.get(*f).is_some_and(|k| k == "histogram")))
            .unwrap_or(name);
        assert!(declared.contains_key(family), "sample {name} before its # TYPE");
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        assert!(samples.insert(series.to_string(), v).is_none(), "duplicate series {series}");
    }
    samples
}

#[test]
fn metrics_are_valid_prometheus_text_with_route_and_cluster_series() {
    let o = origin();
    let dir = TempDir::new("metrics");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(o.addr(), "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    for _ in 0..3 {
        assert_eq!(get(p.listener, "/").status, 200);
    }
    assert_eq!(get(p.listener, "/bytes/10").status, 200);
    assert_eq!(get(p.listener, "/status/503").status, 503);
    let scrape = |admin| {
        let r = get(admin, "/metrics?per_worker=1");
        assert_eq!(r.status, 200);
        assert!(r.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
        parse_prometheus(&r.text())
    };
    assert!(wait_until(Duration::from_secs(3), || {
        scrape(admin).get(r#"gateway_route_requests_total{route="api",class="5xx",worker="0"}"#) == Some(&1.0)
    }));
    let m = scrape(admin);
    assert_eq!(m[r#"gateway_route_requests_total{route="home",class="2xx",worker="0"}"#], 3.0);
    assert_eq!(m[r#"gateway_route_requests_total{route="api",class="2xx",worker="0"}"#], 1.0);
    assert_eq!(m[r#"gateway_route_request_duration_seconds_count{route="home",worker="0"}"#], 3.0);
    assert_eq!(m[r#"gateway_cluster_requests_total{cluster="origin",class="2xx",worker="0"}"#], 1.0);
    assert_eq!(m[r#"gateway_cluster_upstream_duration_seconds_count{cluster="origin",worker="0"}"#], 2.0);
    assert_eq!(m[r#"gateway_cluster_upstream_connects_total{cluster="origin",worker="0"}"#], 1.0);
    assert_eq!(m[r#"gateway_cluster_upstream_reuses_total{cluster="origin",worker="0"}"#], 1.0);
    assert_eq!(m[r#"gateway_requests_total{worker="0"}"#], 5.0);
    // Routes without a priority are in the default class.
    assert_eq!(m[r#"gateway_priority_requests_total{priority="normal",outcome="served",worker="0"}"#], 5.0);
    assert_eq!(m[r#"gateway_priority_requests_total{priority="critical",outcome="shed",worker="0"}"#], 0.0);
    assert_eq!(m["gateway_config_version"], 1.0);
    assert_eq!(m[r#"gateway_config_reloads_total{result="ok"}"#], 0.0);
    assert!(m.keys().any(|k| k.starts_with("gateway_admin_requests_total{path=\"/metrics\"")), "admin request series");
    // The default view: the same series summed over the workers, without the worker label.
    let summed = parse_prometheus(&get(admin, "/metrics").text());
    assert_eq!(summed[r#"gateway_route_requests_total{route="home",class="2xx"}"#], 3.0);
    assert_eq!(summed["gateway_requests_total"], 5.0);
    assert_eq!(summed[r#"gateway_cluster_upstream_duration_seconds_bucket{cluster="origin",le="+Inf"}"#], 2.0);
    assert!(!summed.keys().any(|k| k.contains("worker=")), "no worker label by default");
    // Per upstream endpoint: the proxied requests (one 2xx, one 5xx) and their upstream time.
    let endpoint = format!(r#"cluster="origin",endpoint="{}""#, o.addr());
    assert_eq!(summed[&format!("gateway_endpoint_requests_total{{{endpoint},class=\"2xx\"}}")], 1.0);
    assert_eq!(summed[&format!("gateway_endpoint_requests_total{{{endpoint},class=\"5xx\"}}")], 1.0);
    assert_eq!(summed[&format!("gateway_endpoint_upstream_duration_seconds_count{{{endpoint}}}")], 2.0);
    // A failing endpoint shows up by reason.
    std::fs::write(&path, cfg("127.0.0.1:9".parse().unwrap(), "")).unwrap();
    p.signal("HUP");
    assert!(wait_until(Duration::from_secs(3), || scrape(admin)["gateway_config_version"] == 2.0));
    assert_eq!(get(p.listener, "/x").status, 502);
    assert!(wait_until(Duration::from_secs(3), || {
        scrape(admin)
            .get(r#"gateway_cluster_upstream_failures_total{cluster="origin",reason="connect_error",worker="0"}"#)
            == Some(&1.0)
    }));
    // The route series survived the reload (kept by name).
    assert_eq!(scrape(admin)[r#"gateway_route_requests_total{route="home",class="2xx",worker="0"}"#], 3.0);
}

#[test]
fn access_log_writes_one_json_line_per_request_with_the_forwarded_request_id() {
    let o = origin();
    let dir = TempDir::new("alog");
    let log = dir.path("access.log");
    let path = dir.path("gateway.toml");
    let server = format!("[server.access_log]\nformat = \"json\"\npath = \"{}\"\n", log.display());
    std::fs::write(&path, cfg(o.addr(), &server)).unwrap();
    let p = GatewayProcess::start(&path, true);
    assert_eq!(get(p.listener, "/").status, 200);
    let r = exchange(p.listener, b"GET /bytes/5?q=1 HTTP/1.1\r\nhost: shop.local\r\nuser-agent: test\"agent\r\nx-request-id: client-id-42\r\n\r\n");
    assert_eq!(r.status, 200);
    let r = exchange(p.listener, b"GET /bytes/6 HTTP/1.1\r\nhost: shop.local\r\nx-request-id: not valid!\r\n\r\n");
    assert_eq!(r.status, 200);
    let lines = || std::fs::read_to_string(&log).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>();
    assert!(wait_until(Duration::from_secs(3), || lines().len() == 3), "{:?}", lines());
    let entries: Vec<serde_json::Value> = lines().iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(entries[0]["route"], "home");
    assert_eq!(entries[0]["status"], 200);
    assert_eq!(entries[0]["upstream"], serde_json::Value::Null);
    let e = &entries[1];
    assert_eq!(
        (e["method"].as_str(), e["path"].as_str(), e["query"].as_str()),
        (Some("GET"), Some("/bytes/5"), Some("q=1"))
    );
    assert_eq!(e["host"], "shop.local");
    assert_eq!(e["user_agent"], "test\"agent");
    assert_eq!(e["route"], "api");
    assert_eq!(e["cluster"], "origin");
    assert_eq!(e["upstream"], o.addr().to_string());
    assert_eq!(e["request_id"], "client-id-42", "a valid client id is kept");
    assert!(e["bytes_out"].as_u64().unwrap() > 5);
    let seen = o.received();
    assert_eq!(seen[0].header("x-request-id"), Some("client-id-42"), "forwarded");
    // An invalid client id is replaced by a generated one, logged and forwarded alike.
    let generated = entries[2]["request_id"].as_str().unwrap();
    assert_eq!(generated.len(), 32);
    assert_eq!(seen[1].header("x-request-id"), Some(generated));
    assert_eq!(seen[1].header_count("x-request-id"), 1);
}

#[test]
fn a_stuck_access_log_drops_and_counts_lines_and_never_delays_requests() {
    let o = origin();
    let dir = TempDir::new("alogdrop");
    let fifo = dir.path("access.fifo");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    // A reader that opens the pipe and never reads: the writer blocks once the pipe is full.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let f = std::fs::File::open(fifo).unwrap();
            std::thread::sleep(Duration::from_secs(30));
            drop(f);
        })
    };
    let path = dir.path("gateway.toml");
    let server = format!("[server.access_log]\npath = \"{}\"\nbuffer_lines = 64\n", fifo.display());
    std::fs::write(&path, cfg(o.addr(), &server)).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let mut s = connect(p.listener);
    let mut r = std::io::BufReader::new(s.try_clone().unwrap());
    for i in 0..3000 {
        std::io::Write::write_all(&mut s, b"GET / HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let resp = read_response(&mut r, false).unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(resp.status, 200);
    }
    let dropped = || {
        let text = get(admin, "/metrics").text();
        parse_prometheus(&text).get(r#"gateway_access_log_lines_total{result="dropped"}"#).copied().unwrap_or(0.0)
    };
    assert!(wait_until(Duration::from_secs(3), || dropped() > 1000.0), "dropped {}", dropped());
    drop(p);
    drop(reader);
}

#[test]
fn systemd_notifications_ready_reloading_watchdog_stopping() {
    let dir = TempDir::new("notify");
    let sock_path = dir.path("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("127.0.0.1:9".parse().unwrap(), "")).unwrap();
    let mut child = std::process::Command::new(common::process::BIN)
        .args(["run", "--allow-root", "--config"])
        .arg(&path)
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "400000")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let ready = recv();
    assert!(ready.starts_with("READY=1\n") && ready.contains(&format!("MAINPID={}", child.id())), "{ready}");
    assert_eq!(recv(), "WATCHDOG=1", "watchdog pings while workers tick");
    let _ = std::process::Command::new("kill").args(["-HUP", &child.id().to_string()]).status();
    let mut msgs: Vec<String> = (0..4).map(|_| recv()).filter(|m| m != "WATCHDOG=1").collect();
    if msgs.len() < 2 {
        msgs.extend((0..4).map(|_| recv()).filter(|m| m != "WATCHDOG=1"));
    }
    assert!(msgs[0].starts_with("RELOADING=1\nMONOTONIC_USEC="), "{msgs:?}");
    assert!(msgs[1].starts_with("READY=1"), "{msgs:?}");
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let stopping = (0..6).map(|_| recv()).find(|m| m != "WATCHDOG=1").unwrap();
    assert!(stopping.starts_with("STOPPING=1"), "{stopping}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn clusters_endpoint_shows_in_flight_and_idle_pooled_connections() {
    let o = origin();
    let dir = TempDir::new("clusters");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(o.addr(), "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let endpoint = |admin| {
        let v: serde_json::Value = serde_json::from_slice(&get(admin, "/clusters").body).unwrap();
        v["clusters"][0]["endpoints"][0].clone()
    };
    assert_eq!(endpoint(admin)["in_flight"], 0);
    let addr = p.listener;
    let slow = std::thread::spawn(move || get(addr, "/delay/800"));
    assert!(wait_until(Duration::from_secs(3), || endpoint(admin)["in_flight"] == 1), "{}", endpoint(admin));
    assert_eq!(slow.join().unwrap().status, 200);
    assert!(wait_until(Duration::from_secs(3), || endpoint(admin)["in_flight"] == 0));
    let e = endpoint(admin);
    assert_eq!(e["idle_connections"], 1, "{e}");
    assert_eq!(e["address"], o.addr().to_string());
}

/// `server.admin.per_worker_metrics = true` makes the per-worker view the default, and every
/// worker's series appear (summed, they equal the totals).
#[test]
fn per_worker_metrics_setting_labels_every_worker() {
    let o = origin();
    let dir = TempDir::new("per-worker");
    let path = dir.path("gateway.toml");
    let text = cfg(o.addr(), "").replace("workers = 1", "workers = 2").replace(
        "admin = { address = \"127.0.0.1:0\" }",
        "admin = { address = \"127.0.0.1:0\", per_worker_metrics = true }",
    );
    std::fs::write(&path, text).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    for _ in 0..4 {
        assert_eq!(get(p.listener, "/").status, 200);
    }
    let m = parse_prometheus(&get(admin, "/metrics").text());
    let per_worker: Vec<f64> = (0..2).map(|w| m[&format!("gateway_requests_total{{worker=\"{w}\"}}")]).collect();
    assert_eq!(per_worker.iter().sum::<f64>(), 4.0, "{per_worker:?}");
    assert!(!m.contains_key("gateway_requests_total"));
}
