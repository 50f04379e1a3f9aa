//! The admin's operating endpoints and process-level series: `GET /certs`, `GET`/`POST
//! /logging`, `gateway_build_info`, `process_*`, the last reload's outcome and the served
//! certificates' expiry, against the real binary with a TLS listener.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::process::{GatewayProcess, TempDir};
use common::tls::TestPki;
use common::*;

fn cfg(cert: &std::path::Path, key: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
[server]
workers = 1
admin = {{ address = "127.0.0.1:0" }}
watch = false
{extra}

[[listeners]]
name = "public"
address = "127.0.0.1:0"
tls = {{ certificates = [{{ cert = "{}", key = "{}" }}] }}

[[routes]]
name = "home"
direct_response = {{ status = 200, body = "home" }}
"#,
        cert.display(),
        key.display()
    )
}

/// Series -> value of the admin's `/metrics` (samples only).
fn scrape(admin: SocketAddr) -> std::collections::HashMap<String, f64> {
    let text = get(admin, "/metrics").text();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn post(addr: SocketAddr, path: &str, body: &str) -> Resp {
    let raw = format!("POST {path} HTTP/1.1\r\nhost: admin\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    exchange(addr, raw.as_bytes())
}

fn json(r: &Resp) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn certs_endpoint_and_expiry_series_show_each_served_certificate() {
    let dir = TempDir::new("certs");
    let pki = TestPki::named("Ops Test CA");
    let (cert, key) = pki.write_leaf(&dir.0, "site", &["a.test", "b.test"]);
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(&cert, &key, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();

    let certs = json(&get(admin, "/certs"));
    let listener = &certs["listeners"][0];
    assert_eq!(listener["listener"], "public");
    let c = &listener["certificates"][0];
    assert_eq!(c["names"], serde_json::json!(["a.test", "b.test"]));
    assert!(c["issuer"].as_str().unwrap().contains("Ops Test CA"), "{c}");
    assert!(c["subject"].as_str().unwrap().contains("test server"), "{c}");
    assert_eq!(c["file"], cert.display().to_string());
    assert_eq!(c["expired"], false);
    let not_after = c["not_after"].as_i64().unwrap();
    let days_left = c["days_left"].as_i64().unwrap();
    assert_eq!(days_left, (not_after - now() as i64).div_euclid(86_400));
    let serial = c["serial"].as_str().unwrap().to_owned();
    assert!(!serial.is_empty() && serial.bytes().all(|b| b.is_ascii_hexdigit()), "{serial}");

    let m = scrape(admin);
    let series =
        format!(r#"gateway_tls_certificate_expiry_seconds{{listener="public",name="a.test",serial="{serial}"}}"#);
    assert_eq!(m.get(&series), Some(&(not_after as f64)), "{m:?}");
}

#[test]
fn build_process_and_reload_series() {
    let dir = TempDir::new("process-series");
    let pki = TestPki::new();
    let (cert, key) = pki.write_leaf(&dir.0, "site", &["a.test"]);
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(&cert, &key, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();

    let m = scrape(admin);
    let build = m.keys().find(|k| k.starts_with("gateway_build_info{")).expect("build info").clone();
    assert!(build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))), "{build}");
    assert_eq!(m[&build], 1.0);
    assert!(m["process_resident_memory_bytes"] > 1e6, "{m:?}");
    assert!(m["process_virtual_memory_bytes"] >= m["process_resident_memory_bytes"]);
    assert!(m["process_open_fds"] >= 5.0, "listeners, admin, ring: {m:?}");
    assert!(m["process_max_fds"] >= m["process_open_fds"]);
    assert!(m["process_cpu_seconds_total"] >= 0.0);
    let start = m["process_start_time_seconds"];
    assert!(start <= now() + 1.0 && start > now() - 600.0, "{start}");
    assert_eq!(m["gateway_config_last_reload_success"], 1.0);
    let loaded = m["gateway_config_last_reload_success_timestamp_seconds"];
    assert!(loaded >= start - 1.0 && loaded <= now() + 1.0, "{loaded}");

    // A rejected reload turns the gauge to 0 and keeps the timestamp; a good one restores both.
    std::fs::write(&path, "[server]\nworkers = \"many\"\n").unwrap();
    assert_eq!(post(admin, "/reload", "").status, 400);
    let m = scrape(admin);
    assert_eq!(m["gateway_config_last_reload_success"], 0.0);
    assert_eq!(m["gateway_config_last_reload_success_timestamp_seconds"], loaded);
    std::fs::write(&path, cfg(&cert, &key, "drain_timeout = \"3s\"")).unwrap();
    assert_eq!(post(admin, "/reload", "").status, 200);
    let m = scrape(admin);
    assert_eq!(m["gateway_config_last_reload_success"], 1.0);
    assert!(m["gateway_config_last_reload_success_timestamp_seconds"] >= loaded);
}

#[test]
fn logging_filter_is_shown_and_changed_live() {
    let dir = TempDir::new("logging");
    let pki = TestPki::new();
    let (cert, key) = pki.write_leaf(&dir.0, "site", &["a.test"]);
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg(&cert, &key, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();

    assert_eq!(json(&get(admin, "/logging"))["filter"], "info,rustls=error");
    // Bad filters change nothing.
    let bad = post(admin, "/logging", "info,[=nope");
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("invalid log filter"), "{}", bad.text());
    assert_eq!(post(admin, "/logging", "").status, 400);
    assert_eq!(json(&get(admin, "/logging"))["filter"], "info,rustls=error");

    let changed = post(admin, "/logging", "debug");
    assert_eq!(changed.status, 200, "{}", changed.text());
    assert_eq!(json(&changed)["filter"], "debug,rustls=error");
    assert!(p.log_arrives("log filter changed", Duration::from_secs(5)));
    // Debug lines are written now: a request through the TLS listener with no SNI match logs
    // at debug; any debug line will do.
    let before = p.log_count(" DEBUG ");
    let _ = std::net::TcpStream::connect(p.listener);
    assert!(wait_until(Duration::from_secs(5), || p.log_count(" DEBUG ") > before), "{}", p.log_text());

    // From the query string, percent-encoded, and naming rustls itself (then no cap is added).
    let q = exchange(
        admin,
        b"POST /logging?filter=warn%2Crustls%3Ddebug HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\n\r\n",
    );
    assert_eq!(q.status, 200, "{}", q.text());
    assert_eq!(json(&get(admin, "/logging"))["filter"], "warn,rustls=debug");
    assert_eq!(exchange(admin, b"PUT /logging HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\n\r\n").status, 405);
}
