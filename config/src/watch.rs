//! Watching the configuration file for changes of its content.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use std::{path::Path, time::Duration};
//! let watcher = gateway_config::watch::ConfigWatcher::start(
//!     Path::new("/etc/gateway/gateway.toml"),
//!     Duration::from_millis(200),
//!     || println!("configuration changed"),
//! )?;
//! // ... reload on each call; dropping `watcher` stops watching.
//! # drop(watcher);
//! # Ok(())
//! # }
//! ```
//!
//! The file is followed through each way it changes in practice: rewritten in place, replaced by
//! a rename, deleted and recreated, or reached through symlinks that are swapped (a Kubernetes
//! ConfigMap volume swaps `..data`, a symlink two hops from the path). The watcher watches the
//! directory of every entry that decides what the path reads (see `resolve`), resolves them again
//! after every event about one of them (other files of those directories are ignored), and
//! re-reads the content only when one of those entries changed. Content is compared by hash, so a
//! write of the same bytes, a `touch` or a deletion calls nothing.

mod resolve;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::hash::{DefaultHasher, Hasher};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tracing::{debug, error, warn};

use self::resolve::Entry;

/// How often the content is re-checked without any event, as a safety net for events the kernel
/// never delivered (inotify queue overflow, a directory watch that could not be added).
const RECHECK_INTERVAL: Duration = Duration::from_secs(2);

/// Most events handled between two looks at the timers.
const MAX_BATCH: usize = 1024;

/// Watches one config file and calls `on_change` (from the watcher's own thread) once per settled
/// change of the file's content: when no event about the file came for `debounce`, and the content
/// then read differs from the last content read. A missing or unreadable file has no content: its
/// disappearance calls nothing, its reappearance calls if the content differs from before.
///
/// Dropping the watcher stops watching and waits for its thread, so no call starts after the drop
/// returns (unless the drop happens inside `on_change`, which then returns first).
pub struct ConfigWatcher {
    stop: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl ConfigWatcher {
    /// Starts watching `path`, which need not exist yet; a relative path is taken relative to the
    /// current directory now. The content at start is the baseline: `on_change` is not called for
    /// it. Fails only when the platform's watcher or the thread cannot be created.
    pub fn start(path: &Path, debounce: Duration, on_change: impl Fn() + Send + 'static) -> io::Result<ConfigWatcher> {
        Self::start_with(path, debounce, RECHECK_INTERVAL, Box::new(on_change))
    }

    fn start_with(
        path: &Path,
        debounce: Duration,
        recheck: Duration,
        on_change: Box<dyn Fn() + Send>,
    ) -> io::Result<ConfigWatcher> {
        let path = std::path::absolute(path)?;
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let watcher = notify::recommended_watcher(move |event| {
            // Fails only once the loop has ended, when nobody is interested any more.
            let _ = events.send(Message::Event(event));
        })
        .map_err(into_io_error)?;
        let mut state = State::new(path, watcher);
        state.sync_watches();
        let thread = thread::Builder::new()
            .name("config-watch".to_owned())
            .spawn(move || run(state, &rx, debounce, recheck, &*on_change))?;
        Ok(ConfigWatcher { stop: tx, thread: Some(thread) })
    }
}

impl Drop for ConfigWatcher {
    fn drop(&mut self) {
        // Fails only if the thread already ended.
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            if thread.thread().id() != thread::current().id() && thread.join().is_err() {
                warn!("config watcher thread panicked");
            }
        }
    }
}

enum Message {
    Event(notify::Result<Event>),
    Stop,
}

/// The loop of the watcher's thread: wakes for events, for the debounce deadline and for the
/// periodic re-check, never otherwise. Timers are checked on every wake, so a stream of events
/// about other files cannot starve them.
fn run(mut state: State, rx: &Receiver<Message>, debounce: Duration, recheck: Duration, on_change: &dyn Fn()) {
    let mut deadline: Option<Instant> = None;
    let mut next_check = Instant::now() + recheck;
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            deadline = None;
            state.sync_watches();
            if state.take_change() {
                call(on_change);
            }
        }
        if next_check <= now {
            next_check = now + recheck;
            // A pending deadline re-reads soon anyway.
            if deadline.is_none() && (state.sync_watches() || state.peek_change()) {
                debug!(path = %state.path.display(), "config file changed without an event");
                deadline = Some(now + debounce);
            }
        }
        let wake = deadline.map_or(next_check, |d| d.min(next_check));
        let message = match rx.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // Handle what is queued at once: one re-resolution for a burst of events. Bounded, so
        // that a flood still lets the timers run.
        let mut batch = Batch::default();
        let mut first = Some(message);
        for _ in 0..MAX_BATCH {
            let message = match first.take().map_or_else(|| rx.try_recv(), Ok) {
                Ok(message) => message,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            };
            match message {
                Message::Event(event) => state.note(event, &mut batch),
                Message::Stop => return,
            }
        }
        if batch.relevant {
            // The entries may have moved (a symlink swapped): watch where they are now.
            state.sync_watches();
            deadline = Some(Instant::now() + debounce);
        }
    }
}

/// Calls `on_change`, keeping the watcher alive if it panics.
fn call(on_change: &dyn Fn()) {
    if catch_unwind(AssertUnwindSafe(on_change)).is_err() {
        error!("config change callback panicked; watching goes on");
    }
}

#[derive(Default)]
struct Batch {
    /// Some event was about an entry that decides the content, or a watched directory.
    relevant: bool,
}

struct State {
    path: PathBuf,
    watcher: RecommendedWatcher,
    /// Entries that decide what `path` reads, as last resolved.
    entries: Vec<Entry>,
    /// Directories watched, with the identity they had when the watch was added.
    watched: HashMap<PathBuf, Option<DirId>>,
    /// Directories whose watch failed, warned about once until it succeeds.
    failed: HashSet<PathBuf>,
    /// Hash of the last content read; `None` until the file was first readable.
    last: Option<u64>,
    /// Kind of the last read error warned about, so a lasting error warns once.
    read_error: Option<io::ErrorKind>,
}

impl State {
    fn new(path: PathBuf, watcher: RecommendedWatcher) -> State {
        let mut state = State {
            path,
            watcher,
            entries: Vec::new(),
            watched: HashMap::new(),
            failed: HashSet::new(),
            last: None,
            read_error: None,
        };
        state.last = state.read_hash();
        state
    }

    /// Folds one event into `batch`.
    fn note(&mut self, event: notify::Result<Event>, batch: &mut Batch) {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                warn!(path = %self.path.display(), error = %e, "config watcher error; re-checking");
                batch.relevant = true;
                return;
            }
        };
        // Opening and reading change nothing, and our own reads cause them.
        if matches!(
            event.kind,
            EventKind::Access(AccessKind::Open(_) | AccessKind::Read | AccessKind::Close(AccessMode::Read))
        ) {
            return;
        }
        // No paths (a queue overflow asks for a rescan): anything may have changed.
        let mut relevant = event.need_rescan() || event.paths.is_empty();
        for path in &event.paths {
            // The watched directory itself was moved, deleted or touched: its inotify watch may
            // be gone with it, so add it again when it is still wanted.
            if self.watched.remove(path).is_some() {
                // Fails when the kernel already dropped the watch with the directory.
                let _ = self.watcher.unwatch(path);
                relevant = true;
            }
            if self.entries.iter().any(|e| path.parent() == Some(&e.dir) && path.file_name() == Some(&e.name)) {
                relevant = true;
            }
        }
        // Other files of a watched directory (a log written next to the config) change nothing:
        // not even a debug line, which would be another write to such a log, and another event.
        if !relevant {
            return;
        }
        debug!(?event, "config watch event");
        batch.relevant = true;
    }

    /// Resolves the path again and makes the watched directories those of its entries. Returns
    /// whether the entries changed, which may change the content read.
    fn sync_watches(&mut self) -> bool {
        let entries = resolve::entries(&self.path);
        let mut wanted: HashMap<PathBuf, Option<DirId>> = HashMap::new();
        for entry in &entries {
            if let Ok(meta) = fs::metadata(&entry.dir) {
                if meta.is_dir() {
                    wanted.insert(entry.dir.clone(), dir_id(&meta));
                }
            }
        }
        let stale: Vec<PathBuf> =
            self.watched.iter().filter(|&(dir, id)| wanted.get(dir) != Some(id)).map(|(dir, _)| dir.clone()).collect();
        for dir in stale {
            self.watched.remove(&dir);
            // Fails when the kernel already dropped the watch with the directory.
            if let Err(e) = self.watcher.unwatch(&dir) {
                debug!(dir = %dir.display(), error = %e, "config watch already gone");
            }
        }
        for (dir, id) in wanted {
            if self.watched.contains_key(&dir) {
                continue;
            }
            match self.watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    debug!(dir = %dir.display(), "watching config directory");
                    self.failed.remove(&dir);
                    self.watched.insert(dir, id);
                }
                Err(e) => {
                    if self.failed.insert(dir.clone()) {
                        warn!(dir = %dir.display(), error = %e, "cannot watch config directory; re-checking every {RECHECK_INTERVAL:?}");
                    }
                }
            }
        }
        let changed = entries != self.entries;
        self.entries = entries;
        changed
    }

    /// Whether the readable content differs from the last content read, which it becomes.
    fn take_change(&mut self) -> bool {
        match self.read_hash() {
            Some(hash) if self.last != Some(hash) => {
                self.last = Some(hash);
                true
            }
            _ => false,
        }
    }

    /// Whether the readable content differs from the last content read, without taking it.
    fn peek_change(&mut self) -> bool {
        self.read_hash().is_some_and(|hash| self.last != Some(hash))
    }

    fn read_hash(&mut self) -> Option<u64> {
        match fs::read(&self.path) {
            Ok(bytes) => {
                self.read_error = None;
                let mut hasher = DefaultHasher::new();
                hasher.write(&bytes);
                Some(hasher.finish())
            }
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound && self.read_error != Some(e.kind()) {
                    warn!(path = %self.path.display(), error = %e, "cannot read config file");
                } else {
                    debug!(path = %self.path.display(), error = %e, "config file not readable");
                }
                self.read_error = Some(e.kind());
                None
            }
        }
    }
}

/// Device and inode: a directory replaced at the same path has another.
type DirId = (u64, u64);

#[cfg(unix)]
fn dir_id(meta: &fs::Metadata) -> Option<DirId> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn dir_id(_meta: &fs::Metadata) -> Option<DirId> {
    None
}

fn into_io_error(e: notify::Error) -> io::Error {
    match e.kind {
        notify::ErrorKind::Io(e) => e,
        _ => io::Error::other(e),
    }
}

#[cfg(test)]
mod tests;
