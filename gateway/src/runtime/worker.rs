//! One worker: its state, its listeners' accept loops and its drain.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Cache};
use monoio::net::TcpListener;

use super::buffers::BufferPool;
use super::signal::Drain;
use super::Shared;
use crate::http::h1::HeadScratch;
use crate::snapshot::Snapshot;
use crate::stats::WorkerStats;
use crate::upstream::balancer::XorShift;
use crate::upstream::ClusterState;

/// How often a worker looks at process-wide signals (drain) and sweeps idle pools.
const TICK: Duration = Duration::from_millis(100);

/// Everything one worker owns. Shared by its tasks through `Rc`; never leaves its thread.
pub struct Worker {
    pub id: usize,
    pub stats: Arc<WorkerStats>,
    pub drain: Drain,
    pub buffers: BufferPool,
    pub rng: XorShift,
    shared: Arc<Shared>,
    scratch: RefCell<HeadScratch>,
    resp_scratch: RefCell<HeadScratch>,
    cache: RefCell<Cache<Arc<ArcSwap<Snapshot>>, Arc<Snapshot>>>,
    local: RefCell<Rc<Local>>,
    /// Accept loops running, by binding id.
    listeners: RefCell<HashMap<u64, Rc<ListenerHandle>>>,
    /// The snapshot version whose listeners are running.
    listeners_version: Cell<u64>,
}

/// One listener as a worker runs it. Its connections close after their current request once
/// `stop` fires (the listener was removed by a reload, or the worker drains).
#[derive(Default)]
pub struct ListenerHandle {
    pub stop: Drain,
}

/// The config snapshot a request runs on, with this worker's state for its clusters.
pub struct Local {
    pub snap: Arc<Snapshot>,
    /// Indexed like `snap.config.clusters`.
    pub clusters: Vec<Rc<ClusterState>>,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>, stats: Arc<WorkerStats>) -> Self {
        let mut cache = Cache::new(Arc::clone(&shared.snapshot));
        let snap = Arc::clone(cache.load());
        let max_headers = snap.config.server.limits.max_headers;
        let clusters = snap.config.clusters.iter().map(|c| Rc::new(ClusterState::new(c))).collect();
        let seed = (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
        Self {
            id,
            stats,
            drain: Drain::default(),
            buffers: BufferPool::new(1024),
            rng: XorShift::new(seed),
            shared,
            scratch: RefCell::new(HeadScratch::new(max_headers)),
            resp_scratch: RefCell::new(HeadScratch::new(max_headers)),
            cache: RefCell::new(cache),
            local: RefCell::new(Rc::new(Local { snap, clusters })),
            listeners: RefCell::new(HashMap::new()),
            listeners_version: Cell::new(0),
        }
    }

    /// The current snapshot. A newer one published by a reload is picked up here, keeping
    /// per-cluster state (pools, in-flight counts) of clusters whose settings did not change.
    pub fn local(&self) -> Rc<Local> {
        let mut cache = self.cache.borrow_mut();
        let latest = cache.load();
        let current = Rc::clone(&self.local.borrow());
        if Arc::ptr_eq(latest, &current.snap) {
            return current;
        }
        let snap = Arc::clone(latest);
        let clusters = snap
            .config
            .clusters
            .iter()
            .map(|c| {
                current
                    .clusters
                    .iter()
                    .find(|old| old.settings == *c)
                    .cloned()
                    .unwrap_or_else(|| Rc::new(ClusterState::new(c)))
            })
            .collect();
        let next = Rc::new(Local { snap, clusters });
        *self.local.borrow_mut() = Rc::clone(&next);
        next
    }

    /// The request-head scratch, sized for `max_headers`. Never hold it across an `.await`.
    pub fn scratch(&self, max_headers: usize) -> RefMut<'_, HeadScratch> {
        sized(&self.scratch, max_headers)
    }

    /// The response-head scratch. Never hold it across an `.await`.
    pub fn resp_scratch(&self, max_headers: usize) -> RefMut<'_, HeadScratch> {
        sized(&self.resp_scratch, max_headers)
    }
}

fn sized(cell: &RefCell<HeadScratch>, max_headers: usize) -> RefMut<'_, HeadScratch> {
    let mut s = cell.borrow_mut();
    if s.max_headers() != max_headers.min(crate::http::h1::MAX_HEADERS) {
        *s = HeadScratch::new(max_headers);
    }
    s
}

/// The worker's main task: run the listeners of the current snapshot (following reloads) until
/// drained, then wait for open connections to finish (up to the drain timeout).
pub async fn run(worker: Rc<Worker>) {
    sync_listeners(&worker);
    let mut ticks: u64 = 0;
    while !worker.drain.is_triggered() {
        monoio::select! {
            _ = monoio::time::sleep(TICK) => {}
            _ = worker.drain.wait() => {}
        }
        ticks += 1;
        if worker.shared.draining.load(Ordering::Acquire) {
            worker.drain.trigger();
            break;
        }
        sync_listeners(&worker);
        if ticks.is_multiple_of(10) {
            for c in &worker.local().clusters {
                c.evict_idle();
            }
        }
    }
    for (_, l) in worker.listeners.borrow_mut().drain() {
        l.stop.trigger();
    }
    let drain_timeout = worker.local().snap.config.server.drain_timeout;
    let deadline = std::time::Instant::now() + drain_timeout;
    while worker.stats.connections_active.value() > 0 && std::time::Instant::now() < deadline {
        monoio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = worker.stats.connections_active.value();
    if left > 0 {
        tracing::warn!(worker = worker.id, connections = left, "drain timeout: closing remaining connections");
    } else {
        tracing::info!(worker = worker.id, "drained");
    }
}

/// Starts accept loops for listeners the current snapshot added and stops those it removed.
fn sync_listeners(worker: &Rc<Worker>) {
    let local = worker.local();
    if local.snap.version == worker.listeners_version.get() {
        return;
    }
    worker.listeners_version.set(local.snap.version);
    let mut running = worker.listeners.borrow_mut();
    running.retain(|id, handle| {
        let keep = local.snap.bindings.iter().any(|b| b.id == *id);
        if !keep {
            tracing::info!(
                worker = worker.id,
                binding = id,
                "listener removed: stop accepting, draining its connections"
            );
            handle.stop.trigger();
        }
        keep
    });
    for b in &local.snap.bindings {
        if running.contains_key(&b.id) {
            continue;
        }
        let socket = crate::control::lock(&worker.shared.handoff)
            .get_mut(&b.id)
            .and_then(|slots| slots.get_mut(worker.id))
            .and_then(Option::take);
        let Some(socket) = socket else {
            tracing::error!(worker = worker.id, listener = %b.name, "no socket handed over for listener");
            continue;
        };
        match TcpListener::from_std(socket) {
            Ok(l) => {
                let handle = Rc::new(ListenerHandle::default());
                running.insert(b.id, Rc::clone(&handle));
                monoio::spawn(accept_loop(Rc::clone(worker), l, handle));
            }
            Err(e) => tracing::error!(worker = worker.id, listener = %b.name, error = %e, "cannot register listener"),
        }
    }
}

async fn accept_loop(worker: Rc<Worker>, listener: TcpListener, handle: Rc<ListenerHandle>) {
    loop {
        let accepted = monoio::select! {
            r = listener.accept() => Some(r),
            _ = handle.stop.wait() => None,
        };
        let (stream, peer) = match accepted {
            None => return,
            Some(Ok(x)) => x,
            Some(Err(e)) => {
                tracing::warn!(worker = worker.id, error = %e, "accept failed");
                // Out of file descriptors or memory: back off instead of spinning.
                monoio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        worker.stats.connections_accepted.inc();
        let max = worker.local().snap.config.server.limits.max_connections_per_worker;
        if worker.stats.connections_active.value() >= max as u64 {
            worker.stats.connections_rejected.inc();
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        monoio::spawn(crate::http::conn::serve(Rc::clone(&worker), Rc::clone(&handle), stream, peer));
    }
}
