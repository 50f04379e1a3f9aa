//! The writer thread: receives batches from every worker, writes them, returns the buffers.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

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

pub(crate) struct Writer {
    out: Output,
    shared: Arc<Shared>,
    spares: HashMap<u64, Sender<Vec<u8>>>,
    failing: bool,
}

impl Writer {
    pub(crate) fn new(out: Output, shared: Arc<Shared>) -> Self {
        Self { out, shared, spares: HashMap::new(), failing: false }
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

    fn write(&mut self, handle: u64, lines: u64, mut buf: Vec<u8>) {
        match self.out.write_all(&buf) {
            Ok(()) => {
                self.shared.written.add(lines);
                if self.failing {
                    self.failing = false;
                    tracing::info!("access log: writing again");
                }
            }
            Err(e) => {
                self.shared.failed.add(lines);
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(error = %e, "access log: write failed, dropping lines until it succeeds");
                }
            }
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
