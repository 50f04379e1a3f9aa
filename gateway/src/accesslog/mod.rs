//! The access log: one line per request, written off the request path.
//!
//! # Shape
//!
//! Each worker owns a [`WorkerLog`]. [`WorkerLog::log`] formats an [`Entry`] into a batch buffer
//! local to the worker (no lock, no atomic read-modify-write, no allocation per line) and hands
//! full batches (64 lines or 16 KiB) to one process-wide writer thread over a channel; the worker
//! tick calls [`WorkerLog::flush`] so a line waits at most one tick. The writer writes each batch
//! with one `write` and sends the emptied buffer back to its worker.
//!
//! Each worker owns a fixed number of buffers: `ceil(buffer_lines / 64) + 1`, at least two, so at
//! most about `buffer_lines` of its lines are queued at the writer. When the writer falls behind
//! (a slow disk, a blocked pipe), no buffer comes back, and the worker drops the batch's lines
//! and counts them instead of waiting: requests are never delayed by the log. Lines lost to a
//! failed write are counted the same way. [`AccessLog::dropped`] and [`AccessLog::written`] are
//! totals; every line logged before [`AccessLog::shutdown`] ends up in exactly one of them.
//!
//! # Formats
//!
//! Times are UTC. Absent values are `null` (JSON) or `-` (Combined).
//!
//! **JSON** ([`Format::Json`]): one object per line, keys in this order:
//!
//! ```text
//! {"time":"2000-10-10T13:55:36.123Z","client":"203.0.113.7","method":"GET","path":"/api/items","query":"page=2","version":"HTTP/1.1","host":"shop.example.com","status":200,"bytes_in":143,"bytes_out":5120,"duration_us":12345,"upstream":"10.0.0.2:8080","upstream_duration_us":10001,"route":"api","cluster":"backend","request_id":"4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e","user_agent":"curl/8.5.0","referer":null}
//! ```
//!
//! Durations are whole microseconds. Strings are JSON-escaped (`\"`, `\\`, `\n`, `\r`, `\t`,
//! other control characters and DEL as `\u00XX`); valid UTF-8 passes through, and each byte that
//! is not valid UTF-8 is written as `\u00XX` of that byte (its Latin-1 reading), so its value is
//! kept and every line is valid JSON.
//!
//! **Combined** ([`Format::Combined`]): nginx's `combined` format, then `key=value` fields:
//!
//! ```text
//! $client - - [$time] "$method $path[?$query] HTTP/1.$minor" $status $bytes_out "$referer" "$user_agent" rt=$duration urt=$upstream_duration in=$bytes_in host="$host" route="$route" cluster="$cluster" upstream=$upstream rid=$request_id
//! 203.0.113.7 - - [10/Oct/2000:13:55:36 +0000] "GET /api/items?page=2 HTTP/1.1" 200 5120 "-" "curl/8.5.0" rt=0.012 urt=0.010 in=143 host="shop.example.com" route="api" cluster="backend" upstream=10.0.0.2:8080 rid=4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e
//! ```
//!
//! `rt` and `urt` are seconds with millisecond resolution, like nginx's `$request_time`. As in
//! nginx, every byte outside printable ASCII, and `"` and `\`, is written as `\xHH` (`\x22`,
//! `\x5C`, `\x0A`, ...); in the unquoted `rid` a space is `\x20` too. A line therefore never
//! holds a raw newline or an unbalanced quote, whatever the client sent.
//!
//! # Request ids
//!
//! [`RequestIds`] generates ids per worker; [`valid_request_id`] decides whether a client's
//! `x-request-id` is kept.

mod clock;
mod escape;
mod format;
mod request_id;
mod worker;
mod writer;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

pub use format::{Entry, Format};
pub use request_id::{valid_request_id, RequestId, RequestIds, MAX_CLIENT_REQUEST_ID, REQUEST_ID_LEN};
pub use worker::WorkerLog;

use crate::stats::Counter;
use worker::BATCH_LINES;
use writer::{Msg, Output, Writer};

/// A sensible per-worker bound for [`AccessLogConfig::buffer_lines`].
pub const DEFAULT_BUFFER_LINES: usize = 4096;

/// Where lines are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stdout,
    Stderr,
    /// Opened for appending (created with mode 0640 if missing); reopened by
    /// [`AccessLog::reopen`], for rotation.
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogConfig {
    pub format: Format,
    pub target: Target,
    /// How many of one worker's lines may wait for the writer before that worker drops lines
    /// (rounded up to whole batches of 64).
    pub buffer_lines: usize,
}

/// The process-wide writer: one background thread named `accesslog`.
pub struct AccessLog {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    format: Format,
    buffers_per_worker: usize,
    next_handle: AtomicU64,
    stats: AccessLogStats,
}

impl AccessLog {
    /// Opens the target and starts the writer thread.
    pub fn start(cfg: AccessLogConfig) -> std::io::Result<AccessLog> {
        let out = Output::open(&cfg.target)?;
        Self::start_with(cfg.format, cfg.buffer_lines, out)
    }

    fn start_with(format: Format, buffer_lines: usize, out: Output) -> std::io::Result<AccessLog> {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        let writer = Writer::new(out, Arc::clone(&shared));
        let thread = std::thread::Builder::new().name("accesslog".into()).spawn(move || writer.run(rx))?;
        let batches = buffer_lines.div_ceil(BATCH_LINES as usize);
        Ok(AccessLog {
            tx,
            thread: Some(thread),
            format,
            buffers_per_worker: batches + 1,
            next_handle: AtomicU64::new(0),
            stats: AccessLogStats { shared },
        })
    }

    /// A handle for one worker, to be moved to (or created on) that worker's thread. `worker`
    /// labels its drop counter in [`AccessLogStats::dropped_by_worker`].
    pub fn worker_handle(&self, worker: usize) -> WorkerLog {
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        let (spares_tx, spares_rx) = mpsc::channel();
        // Never blocks (unbounded); fails only after shutdown, and then every line is dropped
        // and counted anyway.
        let _ = self.tx.send(Msg::Register { handle, spares: spares_tx });
        let dropped = Arc::new(WorkerCounter::default());
        self.stats.shared.workers.lock().unwrap_or_else(PoisonError::into_inner).push((worker, Arc::clone(&dropped)));
        WorkerLog::new(self.format, handle, self.tx.clone(), spares_rx, self.buffers_per_worker, dropped)
    }

    /// Lines dropped so far, over all workers (writer behind, or write failed).
    pub fn dropped(&self) -> u64 {
        self.stats.dropped()
    }

    /// Lines written so far.
    pub fn written(&self) -> u64 {
        self.stats.written()
    }

    /// A cheap, cloneable reader of the counters, for the admin thread.
    pub fn stats(&self) -> AccessLogStats {
        self.stats.clone()
    }

    /// Asks the writer to reopen its file (after the old one was renamed for rotation). Lines
    /// handed over before this call go to the old file. Does nothing for stdout and stderr;
    /// if the file cannot be opened, the writer warns and keeps the old one.
    pub fn reopen(&self) {
        let _ = self.tx.send(Msg::Reopen);
    }

    /// Writes every batch handed over before this call, then stops the writer thread and waits
    /// for it. Call it after the workers have flushed or dropped their [`WorkerLog`]s; lines they
    /// log afterwards are dropped and counted.
    pub fn shutdown(mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("access log writer panicked");
            }
        }
    }
}

impl Drop for AccessLog {
    /// Without [`AccessLog::shutdown`], the writer is told to stop but not waited for, so a
    /// blocked output cannot hang the process on exit.
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.tx.send(Msg::Shutdown);
        }
    }
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("format", &self.format)
            .field("buffers_per_worker", &self.buffers_per_worker)
            .field("written", &self.written())
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

/// Reads the access log's counters from any thread; stays valid after shutdown.
#[derive(Debug, Clone)]
pub struct AccessLogStats {
    shared: Arc<Shared>,
}

impl AccessLogStats {
    /// Lines dropped: by workers whose writer was behind, plus lines whose write failed.
    pub fn dropped(&self) -> u64 {
        self.shared.failed.value() + self.dropped_by_worker().iter().map(|(_, n)| n).sum::<u64>()
    }

    /// Lines written to the target.
    pub fn written(&self) -> u64 {
        self.shared.written.value()
    }

    /// Writes the target refused (disk full, I/O error); their lines count as dropped.
    pub fn write_errors(&self) -> u64 {
        self.shared.write_errors.value()
    }

    /// Lines each worker handle dropped because the writer was behind, labelled by the
    /// `worker` passed to [`AccessLog::worker_handle`].
    pub fn dropped_by_worker(&self) -> Vec<(usize, u64)> {
        let workers = self.shared.workers.lock().unwrap_or_else(PoisonError::into_inner);
        workers.iter().map(|(w, c)| (*w, c.0.value())).collect()
    }
}

/// Counters shared by the writer, the workers and readers. The writer thread is the only writer
/// of `written` and `failed`; each worker the only writer of its own counter.
#[derive(Debug, Default)]
struct Shared {
    written: Counter,
    failed: Counter,
    /// Failed writes (batches), each losing its lines.
    write_errors: Counter,
    /// Locked only when a handle is created and when counters are read, never per request.
    workers: Mutex<Vec<(usize, Arc<WorkerCounter>)>>,
}

/// A worker's drop counter on its own cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct WorkerCounter(Counter);
