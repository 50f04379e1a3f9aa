//! The worker side: format into a local batch, hand full batches to the writer, drop (and
//! count) when this worker's buffers are all still queued.

use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;

use super::clock::Clock;
use super::format::{self, Entry, Format};
use super::writer::Msg;
use super::WorkerCounter;

/// Lines per batch: a batch is handed over when it holds this many lines...
pub(crate) const BATCH_LINES: u64 = 64;
/// ...or this many bytes, whichever comes first.
pub(crate) const BATCH_BYTES: usize = 16 * 1024;
/// Initial capacity of a batch buffer: the byte threshold plus room for one long line.
pub(crate) const BATCH_CAPACITY: usize = BATCH_BYTES + 4 * 1024;

/// One worker's access log. Lives on the worker thread; [`WorkerLog::log`] never blocks, never
/// locks and allocates only when a batch buffer is first created.
///
/// Flow control: the worker owns a fixed number of batch buffers (enough for the configured
/// `buffer_lines`, at least two). A full batch is sent to the writer in exchange for a buffer
/// the writer has emptied and returned; when none has come back and all are allocated, the
/// writer is behind, and the batch's lines are dropped and counted instead.
pub struct WorkerLog {
    format: Format,
    handle: u64,
    tx: Sender<Msg>,
    spares: Receiver<Vec<u8>>,
    owned: usize,
    max_owned: usize,
    batch: Vec<u8>,
    lines: u64,
    dropped: Arc<WorkerCounter>,
    clock: Clock,
}

impl WorkerLog {
    pub(crate) fn new(
        format: Format,
        handle: u64,
        tx: Sender<Msg>,
        spares: Receiver<Vec<u8>>,
        max_owned: usize,
        dropped: Arc<WorkerCounter>,
    ) -> Self {
        Self {
            format,
            handle,
            tx,
            spares,
            owned: 1,
            max_owned: max_owned.max(2),
            batch: Vec::with_capacity(BATCH_CAPACITY),
            lines: 0,
            dropped,
            clock: Clock::default(),
        }
    }

    /// Formats one line into the current batch; hands the batch over when it is full.
    pub fn log(&mut self, e: &Entry<'_>) {
        match self.format {
            Format::Json => format::json(&mut self.batch, e, &mut self.clock),
            Format::Combined => format::combined(&mut self.batch, e, &mut self.clock),
        }
        self.lines += 1;
        if self.lines >= BATCH_LINES || self.batch.len() >= BATCH_BYTES {
            self.hand_over();
        }
    }

    /// Hands a partial batch to the writer. Call it periodically (the worker's tick) so that
    /// lines do not wait for a batch to fill.
    pub fn flush(&mut self) {
        if self.lines > 0 {
            self.hand_over();
        }
    }

    /// Lines this worker has dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.0.value()
    }

    fn hand_over(&mut self) {
        let lines = std::mem::take(&mut self.lines);
        let Some(next) = self.spare() else {
            self.batch.clear();
            self.dropped.0.add(lines);
            return;
        };
        let buf = std::mem::replace(&mut self.batch, next);
        if self.tx.send(Msg::Batch { handle: self.handle, lines, buf }).is_err() {
            // The writer has shut down; the message (and its buffer) is gone with it.
            self.owned -= 1;
            self.dropped.0.add(lines);
        }
    }

    fn spare(&mut self) -> Option<Vec<u8>> {
        match self.spares.try_recv() {
            Ok(buf) => return Some(buf),
            // The writer has shut down: drop without allocating.
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        if self.owned < self.max_owned {
            self.owned += 1;
            return Some(Vec::with_capacity(BATCH_CAPACITY));
        }
        None
    }
}

impl Drop for WorkerLog {
    fn drop(&mut self) {
        self.flush();
        let _ = self.tx.send(Msg::Unregister { handle: self.handle });
    }
}

impl std::fmt::Debug for WorkerLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerLog")
            .field("format", &self.format)
            .field("handle", &self.handle)
            .field("buffers", &(self.owned, self.max_owned))
            .field("pending_lines", &self.lines)
            .finish_non_exhaustive()
    }
}
