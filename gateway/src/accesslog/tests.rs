//! The whole pipeline: workers, writer thread, outputs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

/// An output whose writes block until the test opens it, recording what was written.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<GateState>, Condvar)>);

#[derive(Default)]
struct GateState {
    open: bool,
    writes: u64,
    data: Vec<u8>,
}

impl Gate {
    fn open(&self) {
        self.0 .0.lock().unwrap().open = true;
        self.0 .1.notify_all();
    }

    /// Waits (bounded) until the writer is inside its first write.
    fn wait_for_first_write(&self) {
        let (m, cv) = &*self.0;
        let (st, timeout) =
            cv.wait_timeout_while(m.lock().unwrap(), Duration::from_secs(30), |st| st.writes == 0).unwrap();
        assert!(!timeout.timed_out() && st.writes > 0, "writer never started writing");
    }

    fn lines(&self) -> Vec<String> {
        let data = self.0 .0.lock().unwrap().data.clone();
        String::from_utf8(data).unwrap().lines().map(str::to_owned).collect()
    }
}

impl Write for Gate {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (m, cv) = &*self.0;
        let mut st = m.lock().unwrap();
        st.writes += 1;
        cv.notify_all();
        let mut st = cv.wait_while(st, |st| !st.open).unwrap();
        st.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn gated(format: Format, buffer_lines: usize) -> (AccessLog, Gate) {
    let gate = Gate::default();
    let log = AccessLog::start_with(format, buffer_lines, Output::Test(Box::new(gate.clone()))).unwrap();
    (log, gate)
}

/// Logs `n` entries whose path is `/seq/<i>` and whose id is `<worker>-<i>`.
fn log_n(w: &mut WorkerLog, worker: usize, n: usize) {
    let mut path = Vec::new();
    let mut rid = Vec::new();
    for i in 0..n {
        path.clear();
        write!(path, "/seq/{i}").unwrap();
        rid.clear();
        write!(rid, "{worker}-{i}").unwrap();
        w.log(&Entry {
            start: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + i as u64),
            client: "198.51.100.4".parse().unwrap(),
            method: b"GET",
            path: &path,
            query: None,
            version: "HTTP/1.1",
            host: Some(b"example.com"),
            status: 200,
            bytes_in: 80,
            bytes_out: 1000,
            duration: Duration::from_micros(250),
            upstream: None,
            upstream_duration: None,
            route: Some("r"),
            cluster: None,
            request_id: &rid,
            user_agent: Some(b"t"),
            referer: None,
        });
    }
}

fn temp_path(name: &str) -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    std::env::temp_dir().join(format!("gateway-accesslog-{}-{nanos}-{name}", std::process::id()))
}

#[test]
fn stuck_writer_drops_and_counts_and_never_blocks_the_worker() {
    let (log, gate) = gated(Format::Json, 256);
    let stats = log.stats();
    let mut w = log.worker_handle(7);
    // Log from another thread; a blocking log() would show up as a missing "done" (bounded wait,
    // not a timing assertion).
    let (done_tx, done_rx) = mpsc::channel();
    let logger = std::thread::spawn(move || {
        log_n(&mut w, 7, 10_000);
        w.flush();
        drop(w);
        done_tx.send(()).unwrap();
    });
    done_rx.recv_timeout(Duration::from_secs(60)).expect("log() blocked on a stuck writer");
    logger.join().unwrap();
    gate.wait_for_first_write();

    // At most 4 batches (64 lines or 16 KiB each) may wait at the writer; every other line was
    // dropped, and nothing was written yet.
    let dropped = stats.dropped();
    assert_eq!(stats.written(), 0);
    assert!((10_000 - 256..10_000).contains(&dropped), "{dropped}");
    assert_eq!(stats.dropped_by_worker(), vec![(7, dropped)]);

    gate.open();
    log.shutdown();
    assert_eq!(stats.dropped(), dropped, "the queued lines were written, not dropped");
    assert_eq!(stats.written() + stats.dropped(), 10_000);
    let lines = gate.lines();
    assert_eq!(lines.len() as u64, stats.written());
    for (i, l) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["path"], format!("/seq/{i}"), "the first batches are the ones kept, in order");
    }
}

#[test]
fn shutdown_writes_everything_queued() {
    let (log, gate) = gated(Format::Combined, 4096);
    let stats = log.stats();
    let mut w = log.worker_handle(0);
    log_n(&mut w, 0, 1000);
    drop(w); // flushes the partial last batch
    gate.wait_for_first_write();
    assert_eq!(stats.written(), 0, "the writer is stuck in its first write");
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || gate.open())
    };
    log.shutdown();
    opener.join().unwrap();
    assert_eq!((stats.written(), stats.dropped()), (1000, 0));
    let lines = gate.lines();
    assert_eq!(lines.len(), 1000);
    for (i, l) in lines.iter().enumerate() {
        assert!(l.contains(&format!("\"GET /seq/{i} HTTP/1.1\" 200 1000 ")), "{l}");
        assert!(l.ends_with(&format!(" rid=0-{i}")), "{l}");
    }
}

#[test]
fn flush_hands_over_a_partial_batch() {
    let (log, gate) = gated(Format::Json, 4096);
    gate.open();
    let stats = log.stats();
    let mut w = log.worker_handle(0);
    log_n(&mut w, 0, 3);
    w.flush();
    // Bounded wait for the writer: the handle is still alive, so only flush() can have sent them.
    for _ in 0..3000 {
        if stats.written() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(stats.written(), 3);
    drop(w);
    log.shutdown();
}

#[test]
fn lines_logged_after_shutdown_are_dropped_and_counted() {
    let (log, gate) = gated(Format::Json, 64);
    gate.open();
    let stats = log.stats();
    let mut w = log.worker_handle(1);
    log.shutdown();
    log_n(&mut w, 1, 500);
    w.flush();
    assert_eq!((stats.written(), stats.dropped()), (0, 500));
}

#[test]
fn file_target_from_many_workers_is_valid_json() {
    let path = temp_path("many.log");
    let log = AccessLog::start(AccessLogConfig {
        format: Format::Json,
        target: Target::File(path.clone()),
        buffer_lines: DEFAULT_BUFFER_LINES,
    })
    .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|worker| {
            let mut w = log.worker_handle(worker);
            std::thread::spawn(move || log_n(&mut w, worker, 1000))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    log.shutdown();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut ids = std::collections::HashSet::new();
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(ids.insert(v["request_id"].as_str().unwrap().to_owned()));
    }
    assert_eq!(ids.len(), 4000, "no line lost (each worker queued at most 1000 < 4096)");
}

#[test]
fn reopen_after_rename_writes_to_the_new_file() {
    let path = temp_path("rotate.log");
    let rotated = path.with_extension("log.1");
    let log = AccessLog::start(AccessLogConfig {
        format: Format::Combined,
        target: Target::File(path.clone()),
        buffer_lines: 4096,
    })
    .unwrap();
    let stats = log.stats();
    let mut w = log.worker_handle(0);
    log_n(&mut w, 0, 100);
    w.flush();
    std::fs::rename(&path, &rotated).unwrap();
    log.reopen();
    log_n(&mut w, 1, 50);
    drop(w);
    log.shutdown();

    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&rotated).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(old.lines().count(), 100);
    assert!(old.lines().all(|l| l.contains(" rid=0-")));
    assert_eq!(new.lines().count(), 50);
    assert!(new.lines().all(|l| l.contains(" rid=1-")));
    assert_eq!((stats.written(), stats.dropped()), (150, 0));
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::metadata(&rotated).map(|m| assert_eq!(m.permissions().mode() & 0o777, 0o640));
}

#[test]
fn a_full_disk_counts_every_lost_line_and_failed_write() {
    // /dev/full: every write fails with ENOSPC (and reopening it changes nothing).
    let log = AccessLog::start(AccessLogConfig {
        format: Format::Json,
        target: Target::File(PathBuf::from("/dev/full")),
        buffer_lines: 4096,
    })
    .unwrap();
    let stats = log.stats();
    let mut w = log.worker_handle(0);
    for round in 0..3 {
        log_n(&mut w, round, 100);
        w.flush();
    }
    drop(w);
    log.shutdown();
    assert_eq!((stats.written(), stats.dropped()), (0, 300));
    // At least two failed writes per round (100 lines never fit one batch of 64), each counted
    // once, not per line.
    let errors = stats.write_errors();
    assert!((6..300).contains(&errors), "{errors} failed writes");
}

#[test]
fn start_fails_cleanly_for_an_unopenable_file() {
    let err = AccessLog::start(AccessLogConfig {
        format: Format::Json,
        target: Target::File(temp_path("no-such-dir").join("access.log")),
        buffer_lines: 16,
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("access log"), "{err}");
}

#[test]
fn handles_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<AccessLog>();
    send_sync::<AccessLogStats>();
    send::<WorkerLog>();
}
