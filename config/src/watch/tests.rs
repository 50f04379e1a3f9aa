//! Real files in a temporary directory, changed the ways operators and tools change them. The
//! periodic re-check is off (an hour) so that every call must come from an inotify event.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::resolve::{entries, Entry};
use super::{run, ConfigWatcher, Message, State};

const DEBOUNCE: Duration = Duration::from_millis(300);
const NO_RECHECK: Duration = Duration::from_secs(3600);
/// Longest wait for a call that should come.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long a call that should not come is waited for: well past the debounce.
const QUIET: Duration = Duration::from_millis(1200);

/// A fresh directory under the system temp dir, removed on drop. Its path is symlink-free.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gateway-config-watch-{}-{n}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(fs::canonicalize(&dir).unwrap())
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Watches `path`; each call sends what the file read at that moment.
fn watch(path: &Path) -> (ConfigWatcher, Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let read = path.to_owned();
    let on_change = move || {
        let _ = tx.send(fs::read_to_string(&read).unwrap_or_else(|e| format!("<unreadable: {e}>")));
    };
    let watcher = ConfigWatcher::start_with(path, DEBOUNCE, NO_RECHECK, Box::new(on_change)).unwrap();
    (watcher, rx)
}

fn expect_call(calls: &Receiver<String>) -> String {
    calls.recv_timeout(PATIENCE).expect("no call within 5 s")
}

fn expect_no_call(calls: &Receiver<String>) {
    match calls.recv_timeout(QUIET) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("expected no call, got {other:?}"),
    }
}

/// A Kubernetes ConfigMap volume: `gateway.toml -> ..data/gateway.toml`, `..data -> {stamp}`.
fn configmap(dir: &TempDir, stamp: &str, content: &str) -> PathBuf {
    fs::create_dir(dir.join(stamp)).unwrap();
    fs::write(dir.join(stamp).join("gateway.toml"), content).unwrap();
    symlink(stamp, dir.join("..data")).unwrap();
    symlink("..data/gateway.toml", dir.join("gateway.toml")).unwrap();
    dir.join("gateway.toml")
}

/// The kubelet's atomic update: new timestamped dir, `..data_tmp` renamed over `..data`, old dir
/// removed.
fn configmap_swap(dir: &TempDir, old: &str, new: &str, content: &str) {
    fs::create_dir(dir.join(new)).unwrap();
    fs::write(dir.join(new).join("gateway.toml"), content).unwrap();
    symlink(new, dir.join("..data_tmp")).unwrap();
    fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    fs::remove_dir_all(dir.join(old)).unwrap();
}

#[test]
fn in_place_rewrite_in_three_writes_calls_once_with_the_whole_content() {
    let dir = TempDir::new("in-place");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let (_watcher, calls) = watch(&path);

    let mut file = OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
    for part in ["b = 2\n", "c = 3\n", "d = 4\n"] {
        file.write_all(part.as_bytes()).unwrap();
        file.flush().unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    drop(file);

    assert_eq!(expect_call(&calls), "b = 2\nc = 3\nd = 4\n");
    expect_no_call(&calls);
}

#[test]
fn same_bytes_or_touch_calls_nothing() {
    let dir = TempDir::new("same");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let (_watcher, calls) = watch(&path);

    fs::write(&path, "a = 1\n").unwrap();
    File::options().write(true).open(&path).unwrap().set_modified(SystemTime::now()).unwrap();
    expect_no_call(&calls);

    // Still watching: a real change after them is seen.
    fs::write(&path, "a = 2\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 2\n");
}

#[test]
fn temp_file_renamed_over_calls_once() {
    let dir = TempDir::new("rename");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let (_watcher, calls) = watch(&path);

    fs::write(dir.join(".gateway.toml.swp"), "a = 2\n").unwrap();
    fs::rename(dir.join(".gateway.toml.swp"), &path).unwrap();

    assert_eq!(expect_call(&calls), "a = 2\n");
    expect_no_call(&calls);
}

#[test]
fn delete_calls_nothing_and_recreate_calls_once() {
    let dir = TempDir::new("recreate");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let (_watcher, calls) = watch(&path);

    fs::remove_file(&path).unwrap();
    expect_no_call(&calls);

    fs::write(&path, "a = 2\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 2\n");
    expect_no_call(&calls);
}

#[test]
fn configmap_swaps_call_once_each() {
    let dir = TempDir::new("configmap");
    let path = configmap(&dir, "..2026_11_30_12_00_00.123", "a = 1\n");
    let (_watcher, calls) = watch(&path);

    configmap_swap(&dir, "..2026_11_30_12_00_00.123", "..2026_11_30_12_05_00.456", "a = 2\n");
    assert_eq!(expect_call(&calls), "a = 2\n");
    expect_no_call(&calls);

    configmap_swap(&dir, "..2026_11_30_12_05_00.456", "..2026_11_30_12_10_00.789", "a = 3\n");
    assert_eq!(expect_call(&calls), "a = 3\n");
    expect_no_call(&calls);
}

#[test]
fn symlink_target_in_another_directory_edited_in_place_calls_once() {
    let dir = TempDir::new("target-dir");
    fs::create_dir(dir.join("real")).unwrap();
    fs::create_dir(dir.join("etc")).unwrap();
    fs::write(dir.join("real/gateway.toml"), "a = 1\n").unwrap();
    symlink("../real/gateway.toml", dir.join("etc/gateway.toml")).unwrap();
    let (_watcher, calls) = watch(&dir.join("etc/gateway.toml"));

    // Only the target's directory sees this write.
    fs::write(dir.join("real/gateway.toml"), "a = 2\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 2\n");
    expect_no_call(&calls);
}

#[test]
fn missing_file_at_start_calls_once_when_created() {
    let dir = TempDir::new("missing-file");
    let path = dir.join("gateway.toml");
    let (_watcher, calls) = watch(&path);

    fs::write(&path, "a = 1\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 1\n");
    expect_no_call(&calls);
}

#[test]
fn missing_directory_at_start_calls_once_when_file_created() {
    let dir = TempDir::new("missing-dir");
    let path = dir.join("conf.d/gateway.toml");
    let (_watcher, calls) = watch(&path);

    fs::create_dir(dir.join("conf.d")).unwrap();
    // Past the debounce: the write is seen through the new directory's own watch.
    thread::sleep(DEBOUNCE * 2);
    fs::write(&path, "a = 1\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 1\n");
    expect_no_call(&calls);
}

#[test]
fn drop_stops_callbacks_and_ends_the_thread() {
    let dir = TempDir::new("drop");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let (watcher, calls) = watch(&path);
    fs::write(&path, "a = 2\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 2\n");

    // The re-check is an hour away: the drop returns only if the stop wakes the thread.
    let (dropped, done) = mpsc::channel();
    thread::spawn(move || {
        drop(watcher);
        dropped.send(()).unwrap();
    });
    done.recv_timeout(PATIENCE).expect("drop did not return within 5 s");
    fs::write(&path, "a = 3\n").unwrap();
    // The thread ended and dropped the callback with its sender: no call can come any more.
    assert_eq!(calls.recv_timeout(QUIET), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn panicking_callback_does_not_stop_watching() {
    let dir = TempDir::new("panic");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let on_change = move || {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("first reload fails");
        }
    };
    let _watcher = ConfigWatcher::start_with(&path, DEBOUNCE, NO_RECHECK, Box::new(on_change)).unwrap();

    fs::write(&path, "a = 2\n").unwrap();
    wait_for(|| count.load(Ordering::SeqCst) == 1);
    fs::write(&path, "a = 3\n").unwrap();
    wait_for(|| count.load(Ordering::SeqCst) == 2);
}

#[test]
fn periodic_recheck_finds_a_change_whose_events_were_lost() {
    let dir = TempDir::new("recheck");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    // A watcher whose events all go nowhere, as if the kernel's queue had overflowed.
    let watcher = notify::recommended_watcher(|_| {}).unwrap();
    let mut state = State::new(path.clone(), watcher);
    state.sync_watches();
    let (stop, rx) = mpsc::channel();
    let (tx, calls) = mpsc::channel();
    let read = path.clone();
    let on_change = move || tx.send(fs::read_to_string(&read).unwrap()).unwrap();
    let thread = thread::spawn(move || run(state, &rx, DEBOUNCE, Duration::from_millis(200), &on_change));

    fs::write(&path, "a = 2\n").unwrap();
    assert_eq!(expect_call(&calls), "a = 2\n");
    expect_no_call(&calls);

    stop.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

/// Writes to another file of the config's directory (a log written next to it) are not events:
/// no re-resolution, no debug line. At debug level such a line, written to that log, was
/// another event: the gateway logged its own log's writes in a loop (263,000 lines in 15 s).
#[test]
fn other_files_of_the_directory_are_not_events() {
    use notify::event::{CreateKind, DataChange, ModifyKind};
    use notify::{Event, EventKind};
    let dir = TempDir::new("others");
    let path = dir.join("gateway.toml");
    fs::write(&path, "a = 1\n").unwrap();
    let watcher = notify::recommended_watcher(|_| {}).unwrap();
    let mut state = State::new(path.clone(), watcher);
    state.sync_watches();
    let modify = EventKind::Modify(ModifyKind::Data(DataChange::Any));
    let event = |kind: EventKind, paths: Vec<PathBuf>| Ok(Event { kind, paths, attrs: Default::default() });
    // Every debug line the watcher writes, captured.
    let log = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = Arc::clone(&log);
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || Captured(Arc::clone(&sink)))
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let mut note = |e| {
        let mut batch = super::Batch::default();
        tracing::dispatcher::with_default(&dispatch, || state.note(e, &mut batch));
        let lines = std::mem::take(&mut *log.lock().unwrap());
        (batch.relevant, !lines.is_empty())
    };
    assert_eq!(note(event(modify, vec![dir.join("gateway.log")])), (false, false));
    assert_eq!(note(event(EventKind::Create(CreateKind::File), vec![dir.join("gateway.toml.bak")])), (false, false));
    assert_eq!(note(event(modify, vec![path.clone()])), (true, true));
    assert_eq!(note(event(EventKind::Create(CreateKind::File), vec![path])), (true, true));
    // The directory itself (moved, deleted), or no path at all (a rescan): anything may have
    // changed.
    assert_eq!(note(event(modify, vec![dir.0.clone()])), (true, true));
    assert_eq!(note(event(modify, vec![])), (true, true));
}

/// A writer into a shared buffer.
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn wait_for(condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < PATIENCE, "condition not met within 5 s");
        thread::sleep(Duration::from_millis(10));
    }
}

fn entry(dir: &Path, name: &str) -> Entry {
    Entry { dir: dir.to_owned(), name: name.into() }
}

#[test]
fn entries_of_a_plain_file_are_the_file() {
    let dir = TempDir::new("entries-plain");
    fs::write(dir.join("gateway.toml"), "").unwrap();
    assert_eq!(entries(&dir.join("gateway.toml")), [entry(&dir.0, "gateway.toml")]);
}

#[test]
fn entries_of_a_configmap_are_both_links_and_the_file() {
    let dir = TempDir::new("entries-configmap");
    let path = configmap(&dir, "..2026_a", "");
    assert_eq!(
        entries(&path),
        [entry(&dir.0, "gateway.toml"), entry(&dir.0, "..data"), entry(&dir.join("..2026_a"), "gateway.toml")]
    );
}

#[test]
fn entries_of_a_missing_path_end_at_the_first_missing_entry() {
    let dir = TempDir::new("entries-missing");
    assert_eq!(entries(&dir.join("conf.d/gateway.toml")), [entry(&dir.0, "conf.d")]);
}

#[test]
fn entries_resolve_dot_dot_after_a_directory_link_physically() {
    let dir = TempDir::new("entries-dotdot");
    fs::create_dir_all(dir.join("a/b")).unwrap();
    fs::write(dir.join("a/gateway.toml"), "").unwrap();
    symlink(dir.join("a/b"), dir.join("link")).unwrap();
    assert_eq!(
        entries(&dir.join("link/../gateway.toml")),
        [entry(&dir.0, "link"), entry(&dir.join("a"), "gateway.toml")]
    );
}

#[test]
fn entries_of_a_symlink_loop_end() {
    let dir = TempDir::new("entries-loop");
    symlink("b", dir.join("a")).unwrap();
    symlink("a", dir.join("b")).unwrap();
    let found = entries(&dir.join("a"));
    assert!(found.len() <= 41, "{} entries", found.len());
    assert!(found.iter().all(|e| e.dir == dir.0));
}
