//! The real `gateway` binary as a child process, with the addresses it logged.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_gateway");

/// A private temp directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gw-test-{}-{name}-{}", std::process::id(), nanos()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Spawns `command`, trying again while the kernel finds its executable busy (`ETXTBSY`).
///
/// A test that copies the gateway binary and then starts the copy races every other test thread
/// of its process that starts a child meanwhile: a child forked while the copy was open for
/// writing holds that descriptor until it executes its own program (descriptors are
/// close-on-exec, but only at the exec), and until then the copy cannot be executed. Seen under
/// load as `spawn gateway: ... "Text file busy"` in `privileges.rs`. The window ends when that
/// child executes, so a short wait is enough (cargo retries the same way).
pub fn spawn_unbusy(command: &mut Command) -> std::io::Result<Child> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match command.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            spawned => return spawned,
        }
    }
}

/// A running gateway process; killed on drop.
pub struct GatewayProcess {
    pub child: Child,
    /// Every stderr line so far.
    pub log: Arc<Mutex<Vec<String>>>,
    /// First bound address per listener name, from the log.
    pub listener: SocketAddr,
    pub admin: Option<SocketAddr>,
}

impl GatewayProcess {
    /// Starts `gateway run --config path --allow-root` (the tests may run as root; the flag
    /// changes nothing otherwise) and waits for its listener (and admin, when `expect_admin`)
    /// to be logged.
    pub fn start(path: &Path, expect_admin: bool) -> Self {
        Self::start_with(path, expect_admin, &["--allow-root"])
    }

    /// As [`GatewayProcess::start`], with `extra` arguments after `run --config path`.
    pub fn start_with(path: &Path, expect_admin: bool, extra: &[&str]) -> Self {
        Self::start_binary(Path::new(BIN), path, expect_admin, extra)
    }

    /// As [`GatewayProcess::start_with`], running the gateway binary at `bin`.
    pub fn start_binary(bin: &Path, path: &Path, expect_admin: bool, extra: &[&str]) -> Self {
        Self::start_logging(bin, path, expect_admin, extra, "info")
    }

    /// As [`GatewayProcess::start_binary`], with `RUST_LOG` set to `rust_log`.
    pub fn start_logging(bin: &Path, path: &Path, expect_admin: bool, extra: &[&str], rust_log: &str) -> Self {
        let mut command = Command::new(bin);
        command.args(["run", "--config"]).arg(path).args(extra).env("RUST_LOG", rust_log);
        let mut child = spawn_unbusy(command.stderr(Stdio::piped()).stdout(Stdio::null())).expect("spawn gateway");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("log").push(line);
            }
        });
        let mut p = Self { child, log, listener: "0.0.0.0:0".parse().expect("addr"), admin: None };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let listener = p.logged_addr("listener bound");
            let admin = p.logged_addr("admin listening");
            let started = p.log_contains("worker started");
            if let (Some(l), true) = (listener, started) {
                if !expect_admin || admin.is_some() {
                    p.listener = l;
                    p.admin = admin;
                    return p;
                }
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("gateway exited during startup ({status}):\n{}", p.log_text());
            }
            assert!(Instant::now() < deadline, "gateway did not start:\n{}", p.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn logged_addr(&self, marker: &str) -> Option<SocketAddr> {
        let log = self.log.lock().expect("log");
        log.iter()
            .find(|l| l.contains(marker))
            .and_then(|l| l.split("address=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
    }

    pub fn log_contains(&self, needle: &str) -> bool {
        self.log.lock().expect("log").iter().any(|l| l.contains(needle))
    }

    /// Whether a log line containing `needle` arrives within `limit` (the log is read by a
    /// thread: a line the gateway has just written may not be in yet).
    pub fn log_arrives(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.log_contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log_count(&self, needle: &str) -> usize {
        self.log.lock().expect("log").iter().filter(|l| l.contains(needle)).count()
    }

    pub fn log_text(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    pub fn signal(&self, sig: &str) {
        let status =
            Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().expect("kill");
        assert!(status.success());
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds since the Unix epoch, to the millisecond: puts a client's failure beside the
/// gateway's log lines (which carry UTC times).
#[allow(dead_code)]
pub fn wall_clock() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("[unix {}.{:03}]", t.as_secs(), t.subsec_millis())
}
