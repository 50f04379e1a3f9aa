//! Workers: one pinned OS thread per core, each running its own monoio runtime on the I/O
//! driver it could start, each owning its own SO_REUSEPORT listener sockets.

pub mod buffers;
pub mod cpus;
pub mod idle_timer;
pub mod io;
pub mod listeners;
pub mod signal;
pub mod stream;
pub mod worker;

use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use gateway_config::IoDriver;
use monoio::time::TimeDriver;
use monoio::{IoUringDriver, LegacyDriver, RuntimeBuilder};

use crate::snapshot::Snapshot;

/// What workers share with the rest of the process: the current config snapshot and the drain
/// flag. Both are read-mostly; workers never write here.
pub struct Shared {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub draining: AtomicBool,
    /// Listener sockets waiting for their workers (see `control::Handoff`).
    pub handoff: crate::control::Handoff,
    /// One per worker, advanced by the worker on every tick: proof of life for the watchdog.
    pub heartbeats: Vec<std::sync::atomic::AtomicU64>,
    /// Active health of every endpoint, written by the process's one health checker.
    pub health: crate::upstream::health::HealthRegistry,
}

/// Tells whether every worker has ticked since the previous check (a stuck worker stops
/// systemd's watchdog pings, so systemd restarts the process).
pub struct Liveness {
    shared: Arc<Shared>,
    last: Vec<u64>,
}

impl Liveness {
    pub fn new(shared: Arc<Shared>) -> Self {
        let last = vec![u64::MAX; shared.heartbeats.len()];
        Self { shared, last }
    }

    pub fn check(&mut self) -> bool {
        let mut all = true;
        for (beat, last) in self.shared.heartbeats.iter().zip(self.last.iter_mut()) {
            let now = beat.load(std::sync::atomic::Ordering::Relaxed);
            all &= now != *last;
            *last = now;
        }
        all
    }
}

/// A running worker, as reported by the worker itself once its runtime started.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerInfo {
    pub id: usize,
    /// The core the worker is pinned to, if pinning succeeded.
    pub core: Option<usize>,
    /// The I/O driver the worker really runs.
    pub driver: &'static str,
}

/// The driver names reported in logs and the admin port.
pub const DRIVER_URING_DEFER: &str = "io_uring (single_issuer+defer_taskrun)";
pub const DRIVER_URING_COOP: &str = "io_uring (coop_taskrun)";
pub const DRIVER_URING: &str = "io_uring";
pub const DRIVER_EPOLL: &str = "epoll";

/// Starts one worker per entry of `stats` and waits until every one reports
/// its driver. Fails if any worker cannot start a runtime.
pub fn spawn_workers(
    shared: &Arc<Shared>,
    driver: IoDriver,
    cores: &[usize],
    parts: Vec<worker::WorkerParts>,
) -> Result<(Vec<JoinHandle<()>>, Vec<WorkerInfo>), String> {
    let (tx, rx) = mpsc::channel::<Result<WorkerInfo, String>>();
    let mut threads = Vec::new();
    for (id, parts) in parts.into_iter().enumerate() {
        let shared = Arc::clone(shared);
        let core = if cores.is_empty() { None } else { cores.get(id % cores.len()).copied() };
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("gw-worker-{id}"))
            .spawn(move || worker_thread(id, core, driver, shared, parts, tx))
            .map_err(|e| format!("cannot spawn worker thread {id}: {e}"))?;
        threads.push(spawned);
    }
    drop(tx);
    let mut infos = Vec::new();
    for _ in 0..threads.len() {
        match rx.recv() {
            Ok(Ok(info)) => infos.push(info),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("a worker exited during startup".into()),
        }
    }
    infos.sort_by_key(|i| i.id);
    Ok((threads, infos))
}

fn worker_thread(
    id: usize,
    core: Option<usize>,
    driver: IoDriver,
    shared: Arc<Shared>,
    parts: worker::WorkerParts,
    tx: mpsc::Sender<Result<WorkerInfo, String>>,
) {
    let pinned = core.filter(|&c| core_affinity::set_for_current(core_affinity::CoreId { id: c }));
    if core.is_some() && pinned.is_none() {
        tracing::warn!(worker = id, core = ?core, "could not pin worker to its core");
    }
    let listen_addrs: Vec<String> =
        shared.snapshot.load().bindings.iter().map(|b| format!("{}@{}", b.name, b.address)).collect();
    let report = |name: &'static str| {
        tracing::info!(worker = id, core = ?pinned, driver = name, listeners = ?listen_addrs, "worker started");
        let _ = tx.send(Ok(WorkerInfo { id, core: pinned, driver: name }));
    };
    let run = move || {
        let worker = Rc::new(worker::Worker::new(id, shared, parts));
        worker::run(worker)
    };
    if driver != IoDriver::Epoll {
        for (name, flags) in [
            (DRIVER_URING_DEFER, UringFlags::DeferTaskrun),
            (DRIVER_URING_COOP, UringFlags::CoopTaskrun),
            (DRIVER_URING, UringFlags::Plain),
        ] {
            match uring_runtime(flags) {
                Ok(mut rt) => {
                    report(name);
                    rt.block_on(run());
                    return;
                }
                Err(e) => tracing::debug!(worker = id, driver = name, error = %e, "io_uring setup failed"),
            }
        }
        if driver == IoDriver::IoUring {
            let _ =
                tx.send(Err(format!("worker {id}: io_uring is required (io_driver = \"io_uring\") but cannot start")));
            return;
        }
        tracing::warn!(worker = id, "io_uring unavailable; falling back to epoll");
    }
    match RuntimeBuilder::<LegacyDriver>::new().enable_timer().build() {
        Ok(mut rt) => {
            report(DRIVER_EPOLL);
            rt.block_on(run());
        }
        Err(e) => {
            let _ = tx.send(Err(format!("worker {id}: cannot start the epoll driver: {e}")));
        }
    }
}

#[derive(Clone, Copy)]
enum UringFlags {
    DeferTaskrun,
    CoopTaskrun,
    Plain,
}

fn uring_runtime(flags: UringFlags) -> std::io::Result<monoio::Runtime<TimeDriver<IoUringDriver>>> {
    let mut builder = io_uring::IoUring::builder();
    match flags {
        UringFlags::DeferTaskrun => {
            builder.setup_single_issuer().setup_defer_taskrun();
        }
        UringFlags::CoopTaskrun => {
            builder.setup_coop_taskrun();
        }
        UringFlags::Plain => {}
    }
    RuntimeBuilder::<IoUringDriver>::new().uring_builder(builder).with_entries(1024).enable_timer().build()
}
