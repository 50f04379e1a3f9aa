//! End-to-end with the real binary: configuration reloads by every trigger, rejected
//! candidates, listeners added and removed, and a reload storm under load.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::process::{GatewayProcess, TempDir};
use common::*;

/// A config whose `/v` route answers `body`; `extra` is appended (more routes or listeners).
fn cfg(body: &str, watch: bool, origin: Option<SocketAddr>, extra: &str) -> String {
    let origin = origin.map(|o| o.to_string()).unwrap_or_else(|| "127.0.0.1:9".into());
    format!(
        r#"
[server]
workers = 2
admin = {{ address = "127.0.0.1:0", token = "s3cret" }}
drain_timeout = "5s"
watch = {watch}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "v"
match = {{ path = "/v" }}
direct_response = {{ status = 200, body = "{body}" }}

[[routes]]
name = "proxied"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
{extra}
"#
    )
}

fn body_of(addr: SocketAddr) -> String {
    get(addr, "/v").text()
}

/// Waits up to 5 s for `/v` to answer `want`.
fn serves(addr: SocketAddr, want: &str) -> bool {
    wait_until(Duration::from_secs(5), || body_of(addr) == want)
}

fn admin_json(admin: SocketAddr, path: &str) -> serde_json::Value {
    serde_json::from_slice(&get(admin, path).body).expect("admin JSON")
}

fn post(admin: SocketAddr, path: &str, token: Option<&str>) -> Resp {
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    exchange(admin, format!("POST {path} HTTP/1.1\r\nhost: admin\r\n{auth}content-length: 0\r\n\r\n").as_bytes())
}

#[test]
fn every_way_of_changing_the_file_is_followed() {
    let dir = TempDir::new("watch");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", true, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    assert_eq!(body_of(p.listener), "v1");

    // An editor writing in place.
    std::fs::write(&path, cfg("v2", true, None, "")).unwrap();
    assert!(serves(p.listener, "v2"), "in-place write:\n{}", p.log_text());
    assert_eq!(admin_json(admin, "/config")["version"], 2);

    // Write to a temporary file, then rename over the config.
    let tmp = dir.path(".gateway.toml.tmp");
    std::fs::write(&tmp, cfg("v3", true, None, "")).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert!(serves(p.listener, "v3"), "rename over:\n{}", p.log_text());

    // Deleted, then recreated: the running config stays meanwhile.
    std::fs::remove_file(&path).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(body_of(p.listener), "v3");
    std::fs::write(&path, cfg("v4", true, None, "")).unwrap();
    assert!(serves(p.listener, "v4"), "recreated:\n{}", p.log_text());
    assert_eq!(admin_json(admin, "/config")["version"], 4);
}

#[test]
fn a_kubernetes_configmap_symlink_swap_is_followed() {
    let dir = TempDir::new("configmap");
    let v1 = dir.path("..2026_11_30_12_00_00.000000001");
    std::fs::create_dir(&v1).unwrap();
    std::fs::write(v1.join("gateway.toml"), cfg("v1", true, None, "")).unwrap();
    std::os::unix::fs::symlink("..2026_11_30_12_00_00.000000001", dir.path("..data")).unwrap();
    std::os::unix::fs::symlink("..data/gateway.toml", dir.path("gateway.toml")).unwrap();
    let p = GatewayProcess::start(&dir.path("gateway.toml"), true);
    assert_eq!(body_of(p.listener), "v1");
    for (i, body) in ["v2", "v3"].iter().enumerate() {
        let next_name = format!("..2026_11_30_12_0{}_00.00000000{}", i + 1, i + 2);
        let next = dir.path(&next_name);
        std::fs::create_dir(&next).unwrap();
        std::fs::write(next.join("gateway.toml"), cfg(body, true, None, "")).unwrap();
        std::os::unix::fs::symlink(&next_name, dir.path("..data_tmp")).unwrap();
        let old = std::fs::read_link(dir.path("..data")).unwrap();
        std::fs::rename(dir.path("..data_tmp"), dir.path("..data")).unwrap();
        std::fs::remove_dir_all(dir.0.join(old)).unwrap();
        assert!(serves(p.listener, body), "swap {i}:\n{}", p.log_text());
    }
}

#[test]
fn an_invalid_file_is_rejected_and_the_old_config_keeps_serving() {
    let dir = TempDir::new("invalid");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", true, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let bad = cfg("v2", true, None, "").replace("name = \"origin\"\nendpoints", "name = \"origin\"\nendpointz");
    std::fs::write(&path, bad).unwrap();
    assert!(wait_until(Duration::from_secs(5), || !admin_json(admin, "/config")["reload"]["last_error"].is_null()));
    let status = admin_json(admin, "/config");
    let message = status["reload"]["last_error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("clusters[0]") && message.contains("endpointz"), "{message}");
    assert!(message.contains("gateway.toml:"), "line number in {message}");
    assert_eq!(status["version"], 1);
    assert_eq!(status["reload"]["reloads_failed"], 1);
    assert_eq!(body_of(p.listener), "v1", "old config still serving");
    std::fs::write(&path, cfg("v2", true, None, "")).unwrap();
    assert!(serves(p.listener, "v2"));
}

#[test]
fn sighup_and_post_reload_apply_the_file_and_need_the_token() {
    let dir = TempDir::new("sighup");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", false, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    std::fs::write(&path, cfg("v2", false, None, "")).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(body_of(p.listener), "v1", "watch = false: no automatic reload");
    p.signal("HUP");
    assert!(serves(p.listener, "v2"), "SIGHUP:\n{}", p.log_text());

    std::fs::write(&path, cfg("v3", false, None, "")).unwrap();
    assert_eq!(post(admin, "/reload", None).status, 401, "mutating endpoint without the token");
    assert_eq!(post(admin, "/reload", Some("wrong")).status, 401);
    let r = post(admin, "/reload", Some("s3cret"));
    assert_eq!(r.status, 200, "{}", r.text());
    let applied: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(applied["version"], 3);
    assert_eq!(body_of(p.listener), "v3", "applied before POST /reload answered");

    std::fs::write(&path, "[server]\nworkers = \"many\"\n").unwrap();
    let r = post(admin, "/reload", Some("s3cret"));
    assert_eq!(r.status, 400);
    assert!(r.text().contains("server.workers"), "{}", r.text());
    assert_eq!(body_of(p.listener), "v3");
}

#[test]
fn admin_config_shows_the_effective_config_with_secrets_redacted() {
    let dir = TempDir::new("admincfg");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", false, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let c = admin_json(admin, "/config");
    assert_eq!(c["version"], 1);
    assert_eq!(c["hash"].as_str().unwrap().len(), 16);
    assert_eq!(c["source"].as_str().unwrap(), path.display().to_string());
    assert_eq!(c["config"]["server"]["admin"]["token"], "<redacted>");
    assert!(!get(admin, "/config").text().contains("s3cret"), "the token never appears");
    assert_eq!(c["config"]["routes"][0]["name"], "v");
    assert_eq!(c["config"]["server"]["timeouts"]["header_read"], "10s");
    assert_eq!(c["bound_listeners"][0]["address"], p.listener.to_string());
    let clusters = admin_json(admin, "/clusters");
    assert_eq!(clusters["clusters"][0]["endpoints"][0]["address"], "127.0.0.1:9");
    let info = admin_json(admin, "/server_info");
    assert_eq!(info["workers"].as_array().unwrap().len(), 2);
    assert!(info["workers"][0]["driver"].as_str().unwrap().starts_with("io_uring"), "{info}");
    assert!(info["build"].as_str().unwrap().starts_with("debug "), "{info}");
    assert!(info["uptime_seconds"].is_u64());
    assert_eq!(get(admin, "/ready").status, 200);
    assert_eq!(post(admin, "/drain", Some("s3cret")).status, 202);
    assert_eq!(get(admin, "/ready").status, 503);
}

#[test]
fn a_non_loopback_admin_address_needs_a_token() {
    let dir = TempDir::new("token");
    let path = dir.path("gateway.toml");
    let text = cfg("v1", false, None, "")
        .replace(r#"admin = { address = "127.0.0.1:0", token = "s3cret" }"#, r#"admin = { address = "0.0.0.0:0" }"#);
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new(common::process::BIN)
        .args(["run", "--allow-root", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "refuses to start");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("server.admin.token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn listeners_are_added_and_removed_by_reload() {
    let dir = TempDir::new("listeners");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", false, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let extra = "\n[[listeners]]\nname = \"extra\"\naddress = \"127.0.0.1:0\"\n";
    std::fs::write(&path, cfg("v2", false, None, extra)).unwrap();
    assert_eq!(post(admin, "/reload", Some("s3cret")).status, 200);
    let c = admin_json(admin, "/config");
    let extra_addr: SocketAddr = c["bound_listeners"][1]["address"].as_str().unwrap().parse().unwrap();
    assert_eq!(c["bound_listeners"][0]["address"], p.listener.to_string(), "main keeps its socket");
    assert!(serves(extra_addr, "v2"), "added listener accepts");
    // A keep-alive connection on the listener about to be removed.
    let mut s = connect(extra_addr);
    s.write_all(b"GET /v HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    assert_eq!(read_response(&mut r, false).unwrap().text(), "v2");
    std::fs::write(&path, cfg("v3", false, None, "")).unwrap();
    assert_eq!(post(admin, "/reload", Some("s3cret")).status, 200);
    assert!(is_closed(&mut r), "idle connection of the removed listener is closed");
    assert!(
        wait_until(Duration::from_secs(3), || std::net::TcpStream::connect(extra_addr).is_err()),
        "removed listener stops accepting"
    );
    assert_eq!(body_of(p.listener), "v3", "main unaffected");
}

#[test]
fn a_reload_storm_under_load_loses_nothing() {
    let o = origin();
    let dir = TempDir::new("storm");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v0", false, Some(o.addr()), "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let (addr, admin) = (p.listener, p.admin.unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let phase = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
    // Two clients: one keep-alive connection each, and a new connection every 20 requests.
    let clients: Vec<_> = (0..2)
        .map(|c| {
            let stop = stop.clone();
            let phase = phase.clone();
            std::thread::spawn(move || {
                let (mut ok, mut failed) = (0u64, Vec::new());
                let mut lat: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
                let mut r: Option<BufReader<std::net::TcpStream>> = None;
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    if r.is_none() || i.is_multiple_of(20) {
                        r = Some(BufReader::new(connect(addr)));
                    }
                    let conn = r.as_mut().unwrap();
                    let path = if (i + c).is_multiple_of(2) { "/v" } else { "/bytes/64" };
                    let started = Instant::now();
                    let sent = conn.get_mut().write_all(format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").as_bytes());
                    match sent
                        .map_err(|e| e.to_string())
                        .and_then(|_| read_response(conn, false).map_err(|e| e.to_string()))
                    {
                        Ok(resp) if resp.status == 200 => {
                            ok += 1;
                            lat[phase.load(std::sync::atomic::Ordering::Relaxed) as usize].push(started.elapsed());
                        }
                        Ok(resp) => failed.push(format!("{path}: status {}", resp.status)),
                        Err(e) => {
                            failed.push(format!("{path}: {e}"));
                            r = None;
                        }
                    }
                }
                (ok, failed, lat)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2)); // baseline, no reloads
    phase.store(1, std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    for n in 1..=100 {
        std::fs::write(&path, cfg(&format!("v{n}"), false, Some(o.addr()), "")).unwrap();
        let r = post(admin, "/reload", Some("s3cret"));
        assert_eq!(r.status, 200, "reload {n}: {}", r.text());
        std::thread::sleep(Duration::from_millis(15));
    }
    let reload_time = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total_ok = 0;
    let mut all_failed = Vec::new();
    let mut lat: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for c in clients {
        let (ok, failed, l) = c.join().unwrap();
        total_ok += ok;
        all_failed.extend(failed);
        for (dst, src) in lat.iter_mut().zip(l) {
            dst.extend(src);
        }
    }
    let p99 = |v: &mut Vec<Duration>| {
        v.sort();
        v.get(v.len().saturating_sub(1) * 99 / 100).copied().unwrap_or_default()
    };
    let (base_n, storm_n) = (lat[0].len(), lat[1].len());
    let (base_p99, storm_p99) = (p99(&mut lat[0]), p99(&mut lat[1]));
    eprintln!(
        "reload storm: 100 reloads in {reload_time:?}; requests ok {total_ok}, failed {}; \
         p99 without reloads {base_p99:?} ({base_n} requests), during reloads {storm_p99:?} ({storm_n} requests)",
        all_failed.len()
    );
    assert!(all_failed.is_empty(), "failed requests: {all_failed:?}");
    assert!(storm_n > 100, "load kept running during the storm");
    assert_eq!(admin_json(admin, "/config")["version"], 101);
    assert_eq!(body_of(addr), "v100");
}

#[test]
fn a_reload_says_which_settings_cannot_change_live_and_applies_the_rest() {
    let dir = TempDir::new("fixed");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, cfg("v1", false, None, "")).unwrap();
    let p = GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    std::fs::write(&path, cfg("v2", false, None, "").replace("workers = 2", "workers = 3")).unwrap();
    let r = post(admin, "/reload", Some("s3cret"));
    assert_eq!(r.status, 200);
    let applied: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let warnings = applied["warnings"].to_string();
    assert!(warnings.contains("server.workers") && warnings.contains("restart"), "{warnings}");
    assert_eq!(body_of(p.listener), "v2", "the rest applied");
    assert_eq!(admin_json(admin, "/config")["config"]["server"]["workers"], 2, "effective value kept");
    assert_eq!(admin_json(admin, "/server_info")["workers"].as_array().unwrap().len(), 2);
    assert!(p.log_arrives("needs a restart", Duration::from_secs(5)), "{}", p.log_text());
}
