//! The systemd unit and the Debian package: the unit's directives, `systemd-analyze verify` and
//! `security` on it, the `.deb` built by `packaging/deb/build.sh` (contents, control files,
//! maintainer scripts), its install, upgrade, remove and purge in a scratch root, the
//!
//! unit's `ExecStartPre` refusing a broken config, its `ExecReload` validating before it signals,
//! and the packaged logrotate file rotating a real gateway's access log.
//!
//! The tests that need `systemd-analyze`, `dpkg-deb`, `dpkg` or `logrotate` print why they are
//! skipped (or, for logrotate, do its rename and signal by hand) and pass when the tool is
//! missing, so `cargo test` needs only Rust on a fresh machine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::process::GatewayProcess;

const BIN: &str = env!("CARGO_BIN_EXE_gateway");
const UNIT: &str = "systemd/gateway.service";
const CONFIG: &str = "/etc/gateway/gateway.toml";

#[test]
fn unit_declares_the_service_contract() {
    let unit = read(UNIT);
    for (key, value) in [
        ("Type", "notify"),
        ("NotifyAccess", "all"),
        ("RuntimeDirectory", "gateway"),
        ("ExecStartPre", "/usr/bin/gateway check --config /etc/gateway/gateway.toml"),
        ("ExecStart", "/usr/bin/gateway run --config /etc/gateway/gateway.toml"),
        ("KillSignal", "SIGTERM"),
        ("Restart", "on-failure"),
        ("User", "gateway"),
        ("Group", "gateway"),
        ("AmbientCapabilities", "CAP_NET_BIND_SERVICE"),
        ("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("SystemCallArchitectures", "native"),
        ("SystemCallErrorNumber", "EPERM"),
        ("LimitNOFILE", "1048576"),
        ("LimitMEMLOCK", "infinity"),
        ("ReadOnlyPaths", "/etc/gateway"),
    ] {
        assert_eq!(values(&unit, key), [value], "{key}=");
    }
    // Validate, then signal (systemd runs the lines in order and stops at a failing one).
    assert_eq!(
        values(&unit, "ExecReload"),
        ["/usr/bin/gateway check --config /etc/gateway/gateway.toml", "/bin/kill -HUP $MAINPID"]
    );
    assert_eq!(values(&unit, "EnvironmentFile"), ["-/etc/default/gateway"]);
    let filter = values(&unit, "SystemCallFilter").join(" ");
    for call in ["@system-service", "io_uring_setup", "io_uring_enter", "io_uring_register"] {
        assert!(filter.split_whitespace().any(|c| c == call), "SystemCallFilter lacks {call}: {filter}");
    }
    // systemd must wait longer than the drain the packaged config allows, or it SIGKILLs
    // requests the gateway was still finishing.
    let packaged = gateway_config::load(&repo().join("packaging/examples/quickstart.toml")).unwrap();
    let stop = timespan(&values(&unit, "TimeoutStopSec")[0]);
    assert!(stop > packaged.server.drain_timeout, "TimeoutStopSec {stop:?} <= drain_timeout");
    // The unit starts it as User=gateway with CAP_NET_BIND_SERVICE: nothing to switch, and a
    // server.user naming another user would be refused.
    assert_eq!(values(&unit, "User"), ["gateway"]);
    assert_eq!(values(&unit, "AmbientCapabilities"), ["CAP_NET_BIND_SERVICE"]);
    assert_eq!(packaged.server.user, None);
    let watchdog = timespan(&values(&unit, "WatchdogSec")[0]);
    assert!(watchdog >= Duration::from_secs(10), "WatchdogSec {watchdog:?}");
}

/// The crash-loop guard: systemd runs `ExecStartPre` before every start and restart, and a
/// config that does not validate, or names TLS files that cannot be read, fails it (exit 1).
#[test]
fn exec_start_pre_refuses_a_broken_config() {
    let dir = Scratch::new("execstartpre");
    let run = |config: &Path| -> Output {
        let line = values(&read(UNIT), "ExecStartPre")[0].replace(CONFIG, config.to_str().unwrap());
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("/usr/bin/gateway"));
        Command::new(BIN).args(words).output().unwrap()
    };

    let good = repo().join("packaging/examples/quickstart.toml");
    let out = run(&good);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let broken = dir.0.join("broken.toml");
    let text = read("packaging/examples/quickstart.toml").replace("[server]", "[server]\nworkers = 0");
    std::fs::write(&broken, text).unwrap();
    let out = run(&broken);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.toml:12: server.workers:"), "{stderr}");

    let no_key = dir.0.join("no-key.toml");
    std::fs::write(
        &no_key,
        "[[listeners]]\nname = \"tls\"\naddress = \"127.0.0.1:8443\"\n[listeners.tls]\n\
         certificates = [{ cert = \"missing.pem\", key = \"missing.key\" }]\n\
         [[routes]]\nname = \"r\"\ndirect_response = { status = 200 }\n",
    )
    .unwrap();
    let out = run(&no_key);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.pem"), "{out:?}");
}

/// `systemctl reload` as systemd runs it: the `ExecReload` lines in order against a running
/// gateway, stopping at the first that fails. A broken file fails the reload and is never
/// signalled; a good one is applied.
#[test]
fn exec_reload_validates_before_it_signals() {
    let dir = Scratch::new("execreload");
    let config = dir.0.join("gateway.toml");
    let text = served_config(&dir, 200);
    std::fs::write(&config, &text).unwrap();
    let gw = GatewayProcess::start(&config, false);
    assert_eq!(status_of(gw.listener, "/"), 200);
    let reload = || -> bool {
        for line in values(&read(UNIT), "ExecReload") {
            let line = line.replace(CONFIG, config.to_str().unwrap()).replace("$MAINPID", &gw.child.id().to_string());
            let mut words = line.split_whitespace();
            let program = match words.next().unwrap() {
                "/usr/bin/gateway" => BIN,
                // Where /bin/kill is missing, the one on the PATH.
                "/bin/kill" if !Path::new("/bin/kill").exists() => "kill",
                other => other,
            };
            let out = Command::new(program).args(words).output().unwrap();
            if !out.status.success() {
                println!("{line}: {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
                return false;
            }
        }
        true
    };

    std::fs::write(&config, text.replace("[server]", "[server]\nworkers = 0")).unwrap();
    assert!(!reload(), "a file that fails `gateway check` fails the reload");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!gw.log_contains("SIGHUP"), "the gateway was signalled:\n{}", gw.log_text());
    assert_eq!(status_of(gw.listener, "/"), 200);

    std::fs::write(&config, served_config(&dir, 204)).unwrap();
    assert!(reload(), "a good file reloads");
    assert!(gw.log_arrives("SIGHUP", Duration::from_secs(5)), "{}", gw.log_text());
    assert!(wait_for(|| status_of(gw.listener, "/") == 204), "the new config was not applied");
}

/// The packaged logrotate file rotates a real gateway's access log, and the gateway writes the
/// next lines to the new file. With logrotate installed (and as root, for its `su`) logrotate
/// itself runs the file, pointed at a scratch directory and with the postrotate signal sent to
/// this gateway; without it the test does the rename and the signal by hand.
#[test]
fn logrotate_rotates_the_access_log_and_the_gateway_reopens_it() {
    let shipped = read("packaging/deb/logrotate");
    let postrotate = "systemctl kill --signal=HUP --kill-whom=main gateway.service >/dev/null 2>&1 || true";
    for line in ["/var/log/gateway/*.log {", "su gateway gateway", "create 0640 gateway gateway", postrotate] {
        assert!(shipped.lines().any(|l| l.trim() == line), "{line:?} missing from packaging/deb/logrotate");
    }

    let dir = Scratch::new("logrotate");
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, served_config(&dir, 200)).unwrap();
    let gw = GatewayProcess::start(&config, false);
    let log = dir.0.join("access.log");
    assert_eq!(status_of(gw.listener, "/before-rotation"), 200);
    assert!(wait_for(|| std::fs::read_to_string(&log).unwrap_or_default().contains("/before-rotation")));

    let pid = gw.child.id().to_string();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if tool("logrotate", &["--version"]) && root {
        let local = shipped
            .replace("/var/log/gateway/", &format!("{}/", dir.0.display()))
            .replace("su gateway gateway", "su root root")
            .replace("create 0640 gateway gateway", "create 0640 root root")
            .replace(postrotate, &format!("kill -HUP {pid}"));
        let conf = dir.0.join("logrotate.conf");
        std::fs::write(&conf, local).unwrap();
        let out = Command::new("logrotate")
            .arg("--force")
            .arg("--state")
            .arg(dir.0.join("state"))
            .arg(&conf)
            .output()
            .unwrap();
        assert!(out.status.success(), "logrotate: {}", String::from_utf8_lossy(&out.stderr));
    } else {
        println!("logrotate not found or not root: renaming and signalling as its postrotate would");
        std::fs::rename(&log, dir.0.join("access.log.1")).unwrap();
        assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    }
    assert!(gw.log_arrives("access log reopened", Duration::from_secs(5)), "{}", gw.log_text());
    assert_eq!(status_of(gw.listener, "/after-rotation"), 200);
    assert!(wait_for(|| std::fs::read_to_string(&log).unwrap_or_default().contains("/after-rotation")));
    let rotated = read_abs(&dir.0.join("access.log.1"));
    assert!(rotated.contains("/before-rotation") && !rotated.contains("/after-rotation"), "{rotated}");
    assert!(!read_abs(&log).contains("/before-rotation"));
}

#[test]
fn unit_passes_systemd_analyze_verify() {
    let Some(root) = unit_root("verify") else { return };
    let out = analyze(&root, &["verify", "--man=no"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("systemd-analyze verify: {:?}\n{text}", out.status);
    assert!(out.status.success() && text.trim().is_empty(), "systemd-analyze verify complained:\n{text}");

    // The same check fails on a misspelt directive and a bad value (it only warns, hence the
    // output check above).
    let unit = root.0.join("lib/systemd/system/gateway.service");
    let broken =
        read(UNIT).replace("LockPersonality=yes", "LockPersonalty=yes").replace("RestartSec=2s", "RestartSec=2x");
    std::fs::write(&unit, broken).unwrap();
    let out = analyze(&root, &["verify", "--man=no"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Unknown key 'LockPersonalty'") && text.contains("2x"), "{text}");
}

/// Prints the exposure score; a number to watch, not a pass/fail threshold.
#[test]
fn unit_security_exposure_is_printed() {
    let Some(root) = unit_root("security") else { return };
    let out = analyze(&root, &["security", "--offline=true", "--no-pager"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().find(|l| l.contains("Overall exposure level")) {
        Some(line) => println!("systemd-analyze security: {}", line.trim()),
        None => println!(
            "systemd-analyze security printed no score ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn deb_has_the_files_conffile_and_sound_maintainer_scripts() {
    let Some(deb) = deb() else {
        println!("skipped: dpkg-deb or bash not found (apt-get install dpkg)");
        return;
    };
    let contents = stdout(Command::new("dpkg-deb").arg("--contents").arg(deb));
    for path in [
        "./usr/bin/gateway",
        "./lib/systemd/system/gateway.service",
        "./etc/gateway/gateway.toml",
        "./etc/logrotate.d/gateway",
        "./usr/share/doc/gateway/README.md",
        "./usr/share/doc/gateway/docs/configuration.md",
        "./usr/share/doc/gateway/docs/operations.md",
        "./usr/share/doc/gateway/docs/performance.md",
        "./usr/share/doc/gateway/README.systemd.md",
        "./usr/share/doc/gateway/copyright",
        "./usr/share/doc/gateway/examples/full.toml",
        "./usr/share/doc/gateway/tuning.conf.example",
    ] {
        let line = contents.lines().find(|l| l.ends_with(&format!(" {path}")));
        let line = line.unwrap_or_else(|| panic!("{path} missing from:\n{contents}"));
        assert!(line.contains("root/root"), "{line}");
        let exec = path == "./usr/bin/gateway";
        assert!(line.starts_with(if exec { "-rwxr-xr-x" } else { "-rw-r--r--" }), "{line}");
    }

    let control = stdout(Command::new("dpkg-deb").args(["--field"]).arg(deb));
    println!("{control}");
    assert!(control.contains("Package: gateway\n"), "{control}");
    assert!(control.contains(&format!("Version: {}\n", env!("CARGO_PKG_VERSION"))), "{control}");
    let depends = control.lines().find_map(|l| l.strip_prefix("Depends: ")).unwrap();
    assert!(depends.starts_with("libc6 (>= 2."), "{depends}");

    let dir = Scratch::new("deb-control");
    let ok = Command::new("dpkg-deb").arg("--control").arg(deb).arg(&dir.0).status().unwrap();
    assert!(ok.success());
    assert_eq!(
        std::fs::read_to_string(dir.0.join("conffiles")).unwrap(),
        "/etc/gateway/gateway.toml\n/etc/logrotate.d/gateway\n"
    );
    for script in ["postinst", "prerm", "postrm"] {
        let path = dir.0.join(script);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "{script} mode {mode:o}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("#!/bin/sh\n"), "{script}");
        assert!(text.lines().any(|l| l == "set -e"), "{script} lacks set -e");
        let syntax = Command::new("sh").arg("-n").arg(&path).output().unwrap();
        assert!(syntax.status.success(), "{script}: {}", String::from_utf8_lossy(&syntax.stderr));
    }

    let tree = Scratch::new("deb-tree");
    assert!(Command::new("dpkg-deb").arg("--extract").arg(deb).arg(&tree.0).status().unwrap().success());
    // The quickstart config, with the upgrade socket the unit's RuntimeDirectory provides.
    let packaged = read_abs(&tree.0.join("etc/gateway/gateway.toml"));
    let expected = read("packaging/examples/quickstart.toml").replacen(
        "[server]\n",
        "[server]\n# Binary upgrade handover socket (SIGUSR2; see docs/operations.md \"Binary upgrade without downtime\").\nupgrade_socket = \"/run/gateway/upgrade.sock\"\n",
        1,
    );
    assert_eq!(packaged, expected);
    gateway_config::parse(&packaged, "gateway.toml").expect("the packaged config is valid");
    assert_eq!(read_abs(&tree.0.join("lib/systemd/system/gateway.service")), read(UNIT));
    assert_eq!(read_abs(&tree.0.join("etc/logrotate.d/gateway")), read("packaging/deb/logrotate"));
    let version = Command::new(tree.0.join("usr/bin/gateway")).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), format!("gateway {}", env!("CARGO_PKG_VERSION")));
}

/// What ships is what the benchmarks measure: the release profile's whole-program LTO, and the
/// profile-guided build of loadtests/bench/pgo.sh in the Debian package (by default), the
/// container image and the benchmark suite (by default). The training itself runs in CI
/// (`SMOKE=1 loadtests/bench/suite.sh`).
#[test]
fn the_shipped_builds_are_profile_guided() {
    let cargo = read("Cargo.toml");
    let release = cargo.split("\n[profile.release]\n").nth(1).unwrap().split("\n[").next().unwrap();
    let keys: Vec<&str> = release.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    assert!(keys.contains(&r#"lto = "fat""#) && keys.contains(&"codegen-units = 1"), "{release}");

    let deb = read("packaging/deb/build.sh");
    assert!(deb.contains(r#"elif [ "${PGO:-1}" = 1 ]; then"#), "the package is profile-guided unless PGO=0");
    assert!(deb.contains(r#"bin="$("$root/loadtests/bench/pgo.sh" | tail -n1)""#));

    let container = read("packaging/container/Containerfile");
    let build_stage = &container[..container.rfind("\nFROM ").unwrap()];
    assert!(build_stage.contains("loadtests/bench/pgo.sh"), "the image's binary is the profile-guided build");
    assert!(!build_stage.contains("cargo build"), "no plain build in the image");

    let suite = read("loadtests/bench/suite.sh");
    assert!(suite.contains("PGO=${PGO:-1}"), "the suite measures the shipped build unless PGO=0");

    let pgo = read("loadtests/bench/pgo.sh");
    for trained in
        ["--h1 -c64 http://", "--h1 -c64 https://", "-c16 -m32 http://", "-c16 -m32 https://", "/limited", "/dead"]
    {
        assert!(pgo.contains(trained), "pgo.sh trains {trained}");
    }
    assert!(pgo.contains("for driver in io_uring epoll"), "both drivers are trained");
}

/// dpkg --root with chrootless maintainer scripts: they act on the scratch root only (DPKG_ROOT).
#[test]
fn deb_installs_upgrades_removes_and_purges_in_a_scratch_root() {
    let Some(deb) = deb() else {
        println!("skipped: dpkg-deb or bash not found (apt-get install dpkg)");
        return;
    };
    if !tool("dpkg", &["--version"]) || !tool("useradd", &["--help"]) {
        println!("skipped: dpkg or useradd not found");
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: postinst must chown /etc/gateway and add a user, which needs root");
        return;
    }
    let root = Scratch::new("dpkg-root");
    let r = &root.0;
    for dir in ["var/lib/dpkg/updates", "var/lib/dpkg/info", "etc"] {
        std::fs::create_dir_all(r.join(dir)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\n").unwrap();
    std::fs::write(r.join("etc/shadow"), "root:*:19000:0:99999:7:::\n").unwrap();
    std::fs::write(r.join("etc/gshadow"), "root:*::\n").unwrap();
    let dpkg = |args: &[&str]| {
        let out = Command::new("dpkg")
            .arg(format!("--root={}", r.display()))
            .args(["--force-not-root", "--force-script-chrootless", "--force-depends"])
            .args(args)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "dpkg {args:?}:\n{text}");
        println!("dpkg {args:?}:\n{text}");
    };
    let entry = |file: &str| {
        std::fs::read_to_string(r.join("etc").join(file))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("gateway:"))
            .map(str::to_owned)
    };

    dpkg(&["--install", deb.to_str().unwrap()]);
    let user = entry("passwd").expect("postinst created the gateway user");
    assert!(user.ends_with(":/nonexistent:/usr/sbin/nologin"), "{user}");
    let gid: u32 = entry("group").expect("gateway group").split(':').nth(2).unwrap().parse().unwrap();
    let etc = std::fs::metadata(r.join("etc/gateway")).unwrap();
    assert_eq!((etc.uid(), etc.gid(), etc.mode() & 0o777), (0, gid, 0o750));
    let conf = std::fs::metadata(r.join("etc/gateway/gateway.toml")).unwrap();
    assert_eq!((conf.uid(), conf.gid(), conf.mode() & 0o777), (0, gid, 0o640));
    if tool("deb-systemd-helper", &["--help"]) {
        let wants = r.join("etc/systemd/system/multi-user.target.wants/gateway.service");
        assert_eq!(std::fs::read_link(&wants).unwrap(), Path::new("/lib/systemd/system/gateway.service"));
    }
    assert_eq!(read_abs(&r.join("etc/logrotate.d/gateway")), read("packaging/deb/logrotate"));
    let installed = r.join("usr/bin/gateway");
    let check = Command::new(&installed).args(["check", "--config"]).arg(r.join("etc/gateway/gateway.toml")).output();
    assert!(check.unwrap().status.success());

    // An upgrade (here: the same version again) keeps the operator's edit of the conffile.
    let conf_path = r.join("etc/gateway/gateway.toml");
    let edited = format!("{}# edited by the operator\n", read_abs(&conf_path));
    std::fs::write(&conf_path, &edited).unwrap();
    dpkg(&["--install", deb.to_str().unwrap()]);
    assert_eq!(read_abs(&conf_path), edited);

    dpkg(&["--remove", "gateway"]);
    assert!(!installed.exists());
    assert!(conf_path.exists(), "remove keeps the config");
    assert!(r.join("etc/logrotate.d/gateway").exists(), "remove keeps the logrotate conffile");
    assert!(entry("passwd").is_some(), "remove keeps the user");

    dpkg(&["--purge", "gateway"]);
    assert!(!r.join("etc/gateway").exists(), "purge deletes /etc/gateway");
    assert!(!r.join("etc/logrotate.d/gateway").exists(), "purge deletes the logrotate conffile");
    assert_eq!((entry("passwd"), entry("group")), (None, None), "purge deletes the user and group");
}

// --- helpers -------------------------------------------------------------------------------------

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(relative: &str) -> String {
    read_abs(&repo().join(relative))
}

fn read_abs(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every value of `key=` in the unit (comments and sections ignored).
fn values(unit: &str, key: &str) -> Vec<String> {
    unit.lines().filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('=')).map(|v| v.trim().to_owned()).collect()
}

/// The systemd time spans this unit uses: "45s", "2min".
fn timespan(text: &str) -> Duration {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u64 = digits.parse().unwrap_or_else(|_| panic!("time span {text:?}"));
    match &text[digits.len()..] {
        "" | "s" => Duration::from_secs(n),
        "min" => Duration::from_secs(n * 60),
        other => panic!("unit {other:?} in {text:?}"),
    }
}

/// A gateway config answering every request with `status`, with an access log in `dir` and no
/// file watcher (only signals reload it).
fn served_config(dir: &Scratch, status: u16) -> String {
    format!(
        "[server]\nworkers = 1\nadmin = false\nwatch = false\nlog_level = \"info\"\n\n\
         [server.access_log]\nformat = \"combined\"\npath = \"{}\"\n\n\
         [[listeners]]\nname = \"main\"\naddress = \"127.0.0.1:0\"\n\n\
         [[routes]]\nname = \"r\"\ndirect_response = {{ status = {status} }}\n",
        dir.0.join("access.log").display()
    )
}

/// The status of a GET of `path` on a new connection.
fn status_of(addr: std::net::SocketAddr, path: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.get(9..12).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

/// Whether `f` holds within 5 s (checked every 20 ms).
fn wait_for(f: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

fn tool(name: &str, args: &[&str]) -> bool {
    Command::new(name).args(args).output().is_ok()
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A scratch root for `systemd-analyze --root`: the host's unit directory (so the targets the
/// unit depends on resolve), the unit where the package installs it, the built gateway as
/// /usr/bin/gateway and a /bin/kill. None (and why, printed) without systemd-analyze.
fn unit_root(tag: &str) -> Option<Scratch> {
    if !tool("systemd-analyze", &["--version"]) {
        println!("skipped: systemd-analyze not found (apt-get install systemd)");
        return None;
    }
    let Some(host_units) = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .iter()
        .map(Path::new)
        .find(|p| p.join("multi-user.target").exists())
    else {
        println!("skipped: no systemd unit directory with multi-user.target on this host");
        return None;
    };
    let root = Scratch::new(tag);
    let units = root.0.join("lib/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    for entry in std::fs::read_dir(host_units).unwrap() {
        let path = entry.unwrap().path();
        // Plain copies (a symlink would resolve outside the root); masked units (-> /dev/null)
        // and directories are left out.
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            std::fs::copy(&path, units.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(repo().join(UNIT), units.join("gateway.service")).unwrap();
    for (dest, source) in [("usr/bin/gateway", Path::new(BIN)), ("bin/kill", Path::new("/bin/kill"))] {
        let dest = root.0.join(dest);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        if std::fs::hard_link(source, &dest).is_err() && std::fs::copy(source, &dest).is_err() {
            std::fs::write(&dest, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    Some(root)
}

fn analyze(root: &Scratch, args: &[&str]) -> Output {
    Command::new("systemd-analyze")
        .args(args)
        .arg(format!("--root={}", root.0.display()))
        .arg("gateway.service")
        .output()
        .unwrap()
}

/// The .deb built once per test run by packaging/deb/build.sh from the test build of the
/// binary (GATEWAY_BIN, so no release build). None without dpkg-deb or bash.
fn deb() -> Option<&'static Path> {
    static DEB: OnceLock<Option<PathBuf>> = OnceLock::new();
    let deb = DEB.get_or_init(|| {
        if !tool("dpkg-deb", &["--version"]) || !tool("bash", &["--version"]) {
            return None;
        }
        let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packaging-deb");
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = Command::new("bash")
            .arg(repo().join("packaging/deb/build.sh"))
            .env("GATEWAY_BIN", BIN)
            .env("DEB_OUT_DIR", &out_dir)
            .env("DEB_COMPRESSION", "gzip")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "build.sh failed:\n{stderr}");
        let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap());
        assert_eq!(path.parent(), Some(out_dir.as_path()));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!("gateway_{}_", env!("CARGO_PKG_VERSION"))), "{name}");
        assert!(name.ends_with(".deb"), "{name}");
        Some(path)
    });
    deb.as_deref()
}

/// A private temp directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = std::env::temp_dir().join(format!("gw-pkg-{}-{tag}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
