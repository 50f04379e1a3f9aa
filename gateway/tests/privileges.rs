//! The real binary started as root: refused without `server.user` or `--allow-root`; with
//! `server.user = "nobody"` every thread runs as nobody once the sockets are bound, and it
//! still serves, reloads on SIGHUP and hands over to a successor on SIGUSR2. Tests that need
//! root say so and pass without checking anything when not run as root.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::process::{GatewayProcess, TempDir, BIN};
use common::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A config with a direct route answering `body` at `/`, a proxy route to `origin` at `/o`,
/// two workers, SIGHUP as the only reload trigger and `server_extra` in `[server]`.
fn write_config(path: &Path, origin: SocketAddr, body: &str, server_extra: &str) {
    let text = format!(
        r#"
[server]
workers = 2
io_driver = "io_uring"
admin = {{ address = "127.0.0.1:0" }}
drain_timeout = "3s"
watch = false
{server_extra}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "hello"
match = {{ path = "/" }}
direct_response = {{ status = 200, body = "{body}" }}

[[routes]]
name = "o"
match = {{ path_prefix = "/o" }}
cluster = "origin"
timeout = "2s"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
"#
    );
    std::fs::write(path, text).unwrap();
}

/// `(Uid line, Gid line, Groups line)` of every thread of `pid`.
fn thread_ids(pid: u32) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
        let line = |key: &str| status.lines().find(|l| l.starts_with(key)).unwrap_or_default().to_owned();
        out.push((line("Uid:"), line("Gid:"), line("Groups:")));
    }
    out
}

/// Every thread's real, effective, saved and fs uid and gid are `id`; after a switch the only
/// supplementary group is `id` too.
fn assert_all_threads_are(pid: u32, id: u32, switched: bool) {
    let threads = thread_ids(pid);
    assert!(threads.len() >= 3, "main thread and two workers at least: {threads:?}");
    let uid = format!("Uid:\t{id}\t{id}\t{id}\t{id}");
    let gid = format!("Gid:\t{id}\t{id}\t{id}\t{id}");
    for (u, g, groups) in &threads {
        assert_eq!((u.as_str(), g.as_str()), (uid.as_str(), gid.as_str()), "every thread of {pid}: {threads:?}");
        if switched {
            assert_eq!(groups.split_whitespace().skip(1).collect::<Vec<_>>(), [id.to_string()], "{threads:?}");
        }
    }
}

/// A directory `nobody` may write into (the upgrade socket's), inside `dir`.
fn nobody_dir(dir: &TempDir) -> PathBuf {
    let run = dir.path("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(NOBODY), Some(NOBODY)).unwrap();
    run
}

#[test]
fn root_without_user_or_allow_root_is_refused_with_both_fixes() {
    if !is_root() {
        eprintln!("skipped: not running as root");
        return;
    }
    let dir = TempDir::new("priv-refuse");
    let path = dir.path("gateway.toml");
    write_config(&path, "127.0.0.1:9".parse().unwrap(), "hi", "");
    let out = Command::new(BIN).args(["run", "--config"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to run as root"), "{stderr}");
    assert!(stderr.contains("server.user") && stderr.contains("--allow-root"), "names both fixes: {stderr}");
    assert!(!stderr.contains("listener bound"), "nothing was bound: {stderr}");
    // `check` validates only; it runs as root.
    let check = Command::new(BIN).args(["check", "--config"]).arg(&path).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}

#[test]
fn root_as_target_user_and_unknown_users_are_refused() {
    if !is_root() {
        eprintln!("skipped: not running as root");
        return;
    }
    let dir = TempDir::new("priv-bad-user");
    let path = dir.path("gateway.toml");
    for (user, message) in [("root", "is root (uid 0)"), ("no-such-user-gw", "no such user \"no-such-user-gw\"")] {
        write_config(&path, "127.0.0.1:9".parse().unwrap(), "hi", &format!("user = \"{user}\""));
        let out = Command::new(BIN).args(["run", "--allow-root", "--config"]).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}

#[test]
fn allow_root_runs_as_root_and_serves() {
    let o = origin();
    let dir = TempDir::new("priv-allow-root");
    let path = dir.path("gateway.toml");
    write_config(&path, o.addr(), "hi", "");
    let p = GatewayProcess::start_with(&path, true, &["--allow-root"]);
    assert_eq!(get(p.listener, "/").text(), "hi");
    if is_root() {
        assert!(p.log_contains("running as root (--allow-root)"), "{}", p.log_text());
        assert_all_threads_are(p.child.id(), 0, false);
    }
}

#[test]
fn user_nobody_switches_every_thread_serves_and_reloads() {
    if !is_root() {
        eprintln!("skipped: not running as root");
        return;
    }
    let o = origin();
    let dir = TempDir::new("priv-nobody");
    let path = dir.path("gateway.toml");
    let socket = nobody_dir(&dir).join("upgrade.sock");
    let extra = format!("user = \"nobody\"\ngroup = \"nogroup\"\nupgrade_socket = \"{}\"", socket.display());
    write_config(&path, o.addr(), "v1", &extra);
    // The successor started on SIGUSR2 runs as nobody, who must be able to execute the binary:
    // the build directory may not be reachable for it (a checkout in a 0700 directory).
    let bin = dir.path("gateway");
    std::fs::copy(BIN, &bin).unwrap();
    let mut p = GatewayProcess::start_binary(&bin, &path, true, &[]);
    assert!(p.log_contains("switched to an unprivileged user"), "{}", p.log_text());
    assert_all_threads_are(p.child.id(), NOBODY, true);
    // Served: direct and proxied, and the admin port.
    assert_eq!(get(p.listener, "/").text(), "v1");
    assert_eq!(get(p.listener, "/o/bytes/10").status, 200);
    assert_eq!(get(p.admin.unwrap(), "/healthz").status, 200);
    // SIGHUP re-reads the file as nobody.
    write_config(&path, o.addr(), "v2", &extra);
    p.signal("HUP");
    assert!(wait_until(Duration::from_secs(5), || get(p.listener, "/").text() == "v2"), "{}", p.log_text());
    // No capability is kept: a reload that adds a listener on a port below 1024 fails with the
    // bind error and the running config keeps serving.
    let v2 = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{v2}\n[[listeners]]\nname = \"low\"\naddress = \"127.0.0.1:1\"\n")).unwrap();
    p.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(5), || p.log_contains("cannot bind 127.0.0.1:1: Permission denied")),
        "{}",
        p.log_text()
    );
    assert_eq!(get(p.listener, "/").text(), "v2");
    std::fs::write(&path, v2).unwrap();
    // SIGUSR2: the successor runs as nobody (not root, so no flag is needed), takes over on the
    // upgrade socket nobody created, and serves; the old process exits.
    p.signal("USR2");
    assert!(
        wait_until(Duration::from_secs(10), || p.log_contains("the new process serves")),
        "handover:\n{}",
        p.log_text()
    );
    let status = p.wait_exit(Duration::from_secs(8)).expect("the old process exits");
    assert!(status.success(), "{status}");
    let successor = p
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("serving") && l.contains("pid="))
        .filter_map(|l| l.split("pid=").nth(1)?.split_whitespace().next()?.parse::<u32>().ok())
        .find(|pid| *pid != p.child.id());
    let successor = successor.unwrap_or_else(|| panic!("successor pid logged:\n{}", p.log_text()));
    let served = get(p.listener, "/").text();
    let ids = thread_ids(successor);
    let _ = Command::new("kill").arg(successor.to_string()).status();
    assert_eq!(served, "v2");
    assert!(p.log_contains("is the user the gateway runs as: nothing to switch"), "{}", p.log_text());
    assert!(ids.iter().all(|(u, _, _)| u == &format!("Uid:\t{NOBODY}\t{NOBODY}\t{NOBODY}\t{NOBODY}")), "{ids:?}");
}

#[test]
fn a_successor_the_dropped_user_cannot_execute_is_an_error_and_the_gateway_keeps_serving() {
    if !is_root() {
        eprintln!("skipped: not running as root");
        return;
    }
    let o = origin();
    let dir = TempDir::new("priv-noexec");
    let path = dir.path("gateway.toml");
    let socket = nobody_dir(&dir).join("upgrade.sock");
    let extra = format!("user = \"nobody\"\ngroup = \"nogroup\"\nupgrade_socket = \"{}\"", socket.display());
    write_config(&path, o.addr(), "v1", &extra);
    // The binary sits in a directory only root may enter: root starts it, nobody cannot exec it.
    let private = dir.path("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let bin = private.join("gateway");
    std::fs::copy(BIN, &bin).unwrap();
    let mut p = GatewayProcess::start_binary(&bin, &path, true, &[]);
    assert!(p.log_contains("switched to an unprivileged user"), "{}", p.log_text());
    p.signal("USR2");
    assert!(
        wait_until(Duration::from_secs(5), || p.log_contains("SIGUSR2: cannot start the successor")),
        "{}",
        p.log_text()
    );
    assert!(!p.log_contains("fatal runtime error"), "{}", p.log_text());
    assert_eq!(get(p.listener, "/").text(), "v1", "the running gateway keeps serving");
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(8)).is_some_and(|s| s.success()));
}
