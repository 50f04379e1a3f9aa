//! The writer thread: receives batches from every worker, writes them, returns the buffers.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::worker::BATCH_CAPACITY;
use super::{Shared, Target};

/// What workers and the [`super::AccessLog`] send to the writer. The channel is unbounded;
/// memory is bounded by each worker's fixed set of batch buffers.
pub(crate) enum Msg {
    /// A new worker handle; emptied buffers go back through `spares`.
    Register {
        handle: u64,
        spares: Sender<Vec<u8>>,
    },
    Unregister {
        handle: u64,
    },
    Batch {
        handle: u64,
        lines: u64,
        buf: Vec<u8>,
    },
    /// Reopen the file (log rotation). Ordered with batches: what was sent before goes to the
    /// old file.
    Reopen,
    /// Write what is queued, then stop.
    Shutdown,
}

/// Where lines go.
pub(crate) enum Output {
    Stdout(io::Stdout),
    Stderr(io::Stderr),
    File {
        path: PathBuf,
        file: File,
    },
    #[cfg(test)]
    Test(Box<dyn Write + Send>),
}

impl Output {
    pub(crate) fn open(target: &Target) -> io::Result<Self> {
        Ok(match target {
            Target::Stdout => Self::Stdout(io::stdout()),
            Target::Stderr => Self::Stderr(io::stderr()),
            Target::File(path) => Self::File { path: path.clone(), file: open_append(path)? },
        })
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Self::Stdout(s) => {
                let mut s = s.lock();
                s.write_all(buf)?;
                s.flush()
            }
            Self::Stderr(s) => s.lock().write_all(buf),
            Self::File { file, .. } => file.write_all(buf),
            #[cfg(test)]
            Self::Test(w) => w.write_all(buf),
        }
    }

    /// Opens the path again; on failure the old file stays in use.
    fn reopen(&mut self) -> io::Result<()> {
        if let Self::File { path, file } = self {
            *file = open_append(path)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Stdout(s) => s.flush(),
            Self::Stderr(s) => s.flush(),
            Self::File { file, .. } => file.flush(),
            #[cfg(test)]
            Self::Test(w) => w.flush(),
        }
    }
}

/// Appends, creating the file (mode 0640: lines carry client addresses) if needed.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("access log {}: {e}", path.display())))
}

/// While writes fail, a reminder is logged at most this often (never once per line).
const WARN_PERIOD: Duration = Duration::from_secs(60);

/// While writes to a file fail, the path is opened again at most this often, so a file that
/// was replaced, or a volume that was remounted or freed, is picked up without a reload.
const REOPEN_PERIOD: Duration = Duration::from_secs(1);

pub(crate) struct Writer {
    out: Output,
    shared: Arc<Shared>,
    spares: HashMap<u64, Sender<Vec<u8>>>,
    /// `Some` while writes fail: when the last warning was logged and lines lost since.
    failing: Option<(Instant, u64)>,
    last_reopen: Option<Instant>,
}

impl Writer {
    pub(crate) fn new(out: Output, shared: Arc<Shared>) -> Self {
        Self { out, shared, spares: HashMap::new(), failing: None, last_reopen: None }
    }

    /// Runs until [`Msg::Shutdown`] (after writing everything queued before it) or until every
    /// sender is gone.
    pub(crate) fn run(mut self, rx: Receiver<Msg>) {
        while let Ok(msg) = rx.recv() {
            if !self.handle(msg) {
                while let Ok(msg) = rx.try_recv() {
                    self.handle(msg);
                }
                break;
            }
        }
        if let Err(e) = self.out.flush() {
            tracing::warn!(error = %e, "access log: final flush failed");
        }
    }

    /// Handles one message; `false` on shutdown.
    fn handle(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Register { handle, spares } => {
                self.spares.insert(handle, spares);
            }
            Msg::Unregister { handle } => {
                self.spares.remove(&handle);
            }
            Msg::Batch { handle, lines, buf } => self.write(handle, lines, buf),
            Msg::Reopen => match self.out.reopen() {
                Ok(()) => tracing::info!("access log reopened"),
                Err(e) => tracing::warn!(error = %e, "access log: reopen failed, still writing to the old file"),
            },
            Msg::Shutdown => return false,
        }
        true
    }

    /// Counts a failed write of `lines` lines; warns on the first failure and then at most once
    /// per [`WARN_PERIOD`]; reopens a file at most once per [`REOPEN_PERIOD`].
    fn failed(&mut self, lines: u64, e: &io::Error) {
        self.shared.failed.add(lines);
        self.shared.write_errors.inc();
        let now = Instant::now();
        match &mut self.failing {
            None => {
                tracing::warn!(error = %e, "access log: write failed, dropping lines until it succeeds");
                self.failing = Some((now, 0));
            }
            Some((warned, lost)) => {
                *lost += lines;
                if now.duration_since(*warned) >= WARN_PERIOD {
                    tracing::warn!(error = %e, lost = *lost, "access log: writes still failing");
                    *warned = now;
                    *lost = 0;
                }
            }
        }
        if matches!(self.out, Output::File { .. })
            && self.last_reopen.is_none_or(|t| now.duration_since(t) >= REOPEN_PERIOD)
        {
            self.last_reopen = Some(now);
            if let Err(e) = self.out.reopen() {
                tracing::debug!(error = %e, "access log: reopen after a failed write failed");
            }
        }
    }

    fn write(&mut self, handle: u64, lines: u64, mut buf: Vec<u8>) {
        match self.out.write_all(&buf) {
            Ok(()) => {
                self.shared.written.add(lines);
                if let Some((_, lost)) = self.failing.take() {
                    tracing::info!(lost_since_last_warning = lost, "access log: writing again");
                }
            }
            Err(e) => self.failed(lines, &e),
        }
        buf.clear();
        if buf.capacity() > 4 * BATCH_CAPACITY {
            buf.shrink_to(BATCH_CAPACITY);
        }
        if let Some(tx) = self.spares.get(&handle) {
            if tx.send(buf).is_err() {
                self.spares.remove(&handle);
            }
        }
    }
}
