//! Faults of the machine rather than of peers: running out of file descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::process::{TempDir, BIN};
use common::*;

/// With a small descriptor limit, connections beyond it make accept fail with EMFILE: the worker
/// backs off (it does not spin), keeps serving the connections it has, and accepts again once
/// descriptors are free.
#[test]
fn accept_backs_off_on_emfile_and_recovers() {
    let o = origin();
    let dir = TempDir::new("emfile");
    let path = dir.path("gateway.toml");
    std::fs::write(&path, config("auto", o.addr(), "", "").replace("log_level = \"warn\"", "log_level = \"info\""))
        .unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["run", "--allow-root", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe and only affects the child.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&log);
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let addr: std::net::SocketAddr = loop {
        let found =
            log.lock().unwrap().iter().filter(|l| l.contains("listener bound")).find_map(|l| {
                l.split("address=").nth(1)?.split_whitespace().next()?.parse::<std::net::SocketAddr>().ok()
            });
        if let Some(a) = found {
            break a;
        }
        assert!(child.try_wait().unwrap().is_none(), "gateway exited:\n{}", log.lock().unwrap().join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    // Hold far more connections than descriptors the gateway has left.
    let held: Vec<_> = (0..120).filter_map(|_| std::net::TcpStream::connect(addr).ok()).collect();
    assert!(
        wait_until(Duration::from_secs(5), || log.lock().unwrap().iter().any(|l| l.contains("accept failed"))),
        "EMFILE reached:\n{}",
        log.lock().unwrap().join("\n")
    );
    // Backing off: a few failures per second per worker, not a spin.
    let before = log.lock().unwrap().iter().filter(|l| l.contains("accept failed")).count();
    std::thread::sleep(Duration::from_secs(1));
    let after = log.lock().unwrap().iter().filter(|l| l.contains("accept failed")).count();
    assert!(after - before <= 100, "accept failures in 1 s: {}", after - before);
    assert!(child.try_wait().unwrap().is_none(), "the gateway is still running");
    // Free the descriptors: new clients are served again.
    drop(held);
    let started = Instant::now();
    let served = wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok_and(|mut s| {
            use std::io::Write;
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            s.write_all(b"GET /bytes/2 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n").is_ok()
                && read_response(&mut BufReader::new(s), false).is_ok_and(|r| r.status == 200)
        })
    });
    assert!(served, "served again after {:?}:\n{}", started.elapsed(), log.lock().unwrap().join("\n"));
    let _ = child.kill();
    let _ = child.wait();
}
