//! End-to-end: the real `gateway` binary: `check`, `--version`, startup and graceful drain on
//! SIGTERM with a request in flight.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_gateway");

/// A config file in a private temp directory, removed (with the directory) on drop.
struct TempConfig {
    _dir: common::process::TempDir,
    path: std::path::PathBuf,
}

impl std::ops::Deref for TempConfig {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempConfig {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

fn temp_file(name: &str, text: &str) -> TempConfig {
    let dir = common::process::TempDir::new(name);
    let path = dir.path("gateway.toml");
    std::fs::write(&path, text).unwrap();
    TempConfig { _dir: dir, path }
}

#[test]
fn check_accepts_a_good_file_with_a_summary() {
    let path = temp_file("good", &config("auto", "127.0.0.1:9".parse().unwrap(), "", ""));
    let out = Command::new(BIN).args(["check", "--config"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(": ok: 1 listener, 1 route, 1 cluster (1 endpoint)"), "{stdout}");
    // The retry and timeout table: title, header and the one proxying route.
    assert!(stdout.contains("route    timeout  tries  per-try       backoff  worst case  verdict\ndefault  2s       3      adaptive<=1s  75ms     <= timeout  ok\n"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4);
}

#[test]
fn check_fails_a_route_whose_tries_cannot_fit_its_timeout() {
    let routes = r#"
[[routes]]
name = "tight"
match = { path_prefix = "/t" }
cluster = "origin"
timeout = "1s"
retry = { retry_on = ["5xx"], num_retries = 2, per_try_timeout = "400ms" }
"#;
    let path = temp_file("tight", &config("auto", "127.0.0.1:9".parse().unwrap(), "", routes));
    let out = Command::new(BIN).args(["check", "--config"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("tight    1s       3      400ms         75ms     1275ms      DOES NOT FIT"), "{stdout}");
    assert!(
        stderr.contains(
            "route \"tight\": 3 tries of up to 400ms plus 75ms of backoff need 1275ms, more than its timeout 1s"
        ),
        "{stderr}"
    );
}

#[test]
fn check_lists_every_error_with_line_and_exits_1() {
    let text = r#"
[server]
workers = 0
drain_timeout = "soon"

[[listeners]]
name = "a"
address = "127.0.0.1:notaport"

[[routes]]
name = "r"
cluster = "nope"

[[clusters]]
name = "c"
endpoints = []
"#;
    let path = temp_file("bad", text);
    let out = Command::new(BIN).args(["check", "--config"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "gateway.toml:3: server.workers",
        "gateway.toml:4: server.drain_timeout",
        "gateway.toml:8: listeners[0].address",
        "gateway.toml:12: routes[0].cluster",
        "gateway.toml:16: clusters[0].endpoints",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    let missing = Command::new(BIN).args(["check", "--config", "/nonexistent/gw.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
}

#[test]
fn version_is_printed() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("gateway {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn every_example_config_passes_check() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../packaging/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = Command::new(BIN).args(["check", "--config"]).arg(&path).output().unwrap();
            assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
            n += 1;
        }
    }
    assert!(n >= 2);
}

/// A running gateway process and the listener address it logged.
struct Proc {
    child: Child,
    addr: SocketAddr,
    log: std::sync::mpsc::Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Never leave a gateway behind when a test fails half-way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(config: &str, name: &str) -> Proc {
    let path = temp_file(name, config);
    let mut child = Command::new(BIN)
        .args(["run", "--allow-root", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut addr = None;
    let mut workers = 0;
    while Instant::now() < deadline && (addr.is_none() || workers == 0) {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) else { continue };
        if line.contains("listener bound") {
            let a = line.split("address=").nth(1).unwrap().split_whitespace().next().unwrap();
            addr = Some(a.parse().unwrap());
        }
        if line.contains("worker started") {
            assert!(line.contains("driver=") && line.contains("core="), "{line}");
            workers += 1;
        }
    }
    Proc { child, addr: addr.expect("gateway logged its listener"), log: rx }
}

#[test]
fn sigterm_drains_in_flight_requests_then_exits_0() {
    let o = origin();
    let toml = config("auto", o.addr(), "", "").replace("log_level = \"warn\"", "log_level = \"info\"");
    let mut p = spawn(&toml, "drain");
    // An idle keep-alive connection, and a request in flight.
    let mut idle = connect(p.addr);
    idle.write_all(b"GET /bytes/1 HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let mut idle_r = BufReader::new(idle);
    assert_eq!(read_response(&mut idle_r, false).unwrap().status, 200);
    let addr = p.addr;
    let in_flight = std::thread::spawn(move || get(addr, "/delay/1500"));
    assert!(wait_until(Duration::from_secs(5), || o.received().iter().any(|r| r.target == "/delay/1500")
        || o.requests() >= 1));
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    send_signal(p.child.id(), "TERM");
    // The in-flight request completes normally.
    let resp = in_flight.join().unwrap();
    assert_eq!(resp.status, 200, "in-flight request completed");
    // The idle connection is closed.
    assert!(is_closed(&mut idle_r), "idle keep-alive connection closed on drain");
    // The process exits 0 once drained, well before the drain timeout.
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(sent.elapsed() < Duration::from_secs(8), "gateway did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
    // New connections are refused after exit.
    assert!(std::net::TcpStream::connect(addr).is_err());
    let logs: Vec<String> = p.log.try_iter().collect();
    assert!(logs.iter().any(|l| l.contains("draining")), "{logs:?}");
}

#[test]
fn the_gateway_runs_without_transparent_huge_pages() {
    // Its memory grows by 4 KiB pages, not 2 MiB ones (idle connections: `main.rs`).
    let o = origin();
    let p = spawn(&config("auto", o.addr(), "", ""), "thp");
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.child.id())).unwrap();
    let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
        eprintln!("SKIPPED: this kernel's /proc/PID/status has no THP_enabled line");
        return;
    };
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

fn send_signal(pid: u32, sig: &str) {
    let status = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success());
}

#[test]
fn drain_delay_keeps_accepting_while_not_ready() {
    let o = origin();
    let toml = config("auto", o.addr(), "drain_delay = \"800ms\"", "")
        .replace("log_level = \"warn\"", "log_level = \"info\"")
        .replace("admin = false", "admin = { address = \"127.0.0.1:0\" }");
    let mut p = spawn(&toml, "drain-delay");
    let sent = Instant::now();
    send_signal(p.child.id(), "TERM");
    std::thread::sleep(Duration::from_millis(200));
    // Still accepting new connections during the delay (load balancers see /ready = 503).
    assert_eq!(get(p.addr, "/bytes/3").status, 200, "served during drain_delay");
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(sent.elapsed() < Duration::from_secs(8), "gateway did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    assert!(sent.elapsed() >= Duration::from_millis(750), "the delay was observed: {:?}", sent.elapsed());
}

/// The readiness probe through the real binary's admin port while other clients hold 64 idle
/// connections and 16 half-sent requests on it (`admin/tests/starvation.rs` has the rest).
#[test]
fn admin_ready_is_answered_while_idle_connections_are_held() {
    use std::io::Read;
    let toml = config("auto", "127.0.0.1:9".parse().unwrap(), "", "")
        .replace("admin = false", "admin = { address = \"127.0.0.1:0\" }");
    let path = temp_file("admin-starve", &toml);
    let p = common::process::GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap();
    let idle: Vec<_> = (0..64).map(|_| std::net::TcpStream::connect(admin).unwrap()).collect();
    let half: Vec<_> = (0..16)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(admin).unwrap();
            s.write_all(b"GET /ready HTTP/1.1\r\nhost: a").unwrap();
            s
        })
        .collect();
    for _ in 0..10 {
        let started = Instant::now();
        let mut s = std::net::TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        s.write_all(b"GET /ready HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
        // Far under the probe's 1 s timeout; not a benchmark.
        assert!(started.elapsed() < Duration::from_millis(500), "/ready took {:?}", started.elapsed());
    }
    drop((idle, half));
}

/// `gateway drain` (the Kubernetes preStop hook): a wrong token is refused with the reason and
/// changes nothing; a config without an admin port says so; the right token drains the gateway
/// and `--wait` returns once it has exited.
#[test]
fn drain_subcommand_drains_through_the_admin_port_and_waits_for_the_exit() {
    let o = origin();
    let with_token = |token: &str| {
        config("auto", o.addr(), "", "")
            .replace("admin = false", &format!("admin = {{ address = \"127.0.0.1:0\", token = \"{token}\" }}"))
            .replace("log_level = \"warn\"", "log_level = \"info\"")
    };
    let path = temp_file("drain-cmd", &with_token("s3cret"));
    let mut p = common::process::GatewayProcess::start(&path, true);
    let admin = p.admin.unwrap().to_string();
    let drain = |config: &std::path::Path, extra: &[&str]| {
        Command::new(BIN).arg("drain").arg("--config").arg(config).args(extra).output().unwrap()
    };

    let wrong = temp_file("drain-cmd-wrong", &with_token("guess"));
    let out = drain(&wrong, &["--admin", &admin]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("answered 401") && stderr.contains("admin token"), "{stderr}");
    let none = temp_file("drain-cmd-none", &config("auto", o.addr(), "", ""));
    let out = drain(&none, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no admin port"), "{stderr}");
    let out = drain(&path, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("port 0: pass the bound address with --admin"));
    assert_eq!(get(p.listener, "/bytes/3").status, 200, "still serving");

    let out = drain(&path, &["--admin", &admin, "--wait"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("drained and exited"), "{stdout}");
    let status = p.wait_exit(Duration::from_secs(2)).expect("exited when drain --wait returned");
    assert!(status.success(), "{status}");
    assert!(p.log_contains("drain requested through the admin port"), "{}", p.log_text());
}
