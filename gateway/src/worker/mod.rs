//! One worker's state: the snapshot it serves (with its own per-cluster and per-route state,
//! carried across reloads by name), its stats, buffers, timers and access log. Owned by the
//! worker's thread and shared by its tasks through `Rc`; what the process shares with every
//! worker is [`Shared`].

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use arc_swap::{ArcSwap, Cache};

pub mod heartbeat;
pub mod routes;

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::accesslog::{Entry, RequestId, RequestIds, WorkerLog};
use crate::codec::h1::HeadScratch;
use crate::runtime::buffers::BufferPool;
use crate::runtime::idle_timer::IdleTimer;
use crate::runtime::park::Parking;
use crate::runtime::signal::{Drain, ListenerHandle};
use crate::snapshot::Snapshot;
use crate::stats::metrics::WorkerMetrics;
use crate::stats::WorkerStats;
use crate::upstream::balancer::XorShift;
use crate::upstream::{same_but_endpoints, ClusterState, EndpointViews};

/// Everything one worker owns. Shared by its tasks through `Rc`; never leaves its thread.
pub struct Worker {
    pub id: usize,
    pub stats: Arc<WorkerStats>,
    pub metrics: Arc<WorkerMetrics>,
    endpoints: Arc<EndpointViews>,
    log: RefCell<Option<WorkerLog>>,
    ids: RefCell<RequestIds>,
    pub drain: Drain,
    pub buffers: BufferPool,
    /// How many of this worker's idle upstream connections wait with a receive submitted
    /// ([`crate::upstream::armed`]).
    pub armed: crate::runtime::buffers::Slots,
    /// How many of this worker's client connections wait for their next request in a receive
    /// (`downstream::h1::armed_wait`).
    pub armed_waits: crate::runtime::buffers::Slots,
    /// Idle and header-read deadlines of this worker's connections, advanced by `run`.
    pub idle_timer: IdleTimer,
    /// The deadline of each try (the request's write and the response head's read), on a
    /// fine timer that advances itself (`runtime::idle_timer`).
    pub deadlines: IdleTimer,
    pub rng: XorShift,
    pub(crate) shared: Arc<Shared>,
    /// Field-range storage for HTTP/1.1 heads, lent to a request (or an upstream response)
    /// for as long as it lives.
    scratches: RefCell<Vec<HeadScratch>>,
    cache: RefCell<Cache<Arc<ArcSwap<Snapshot>>, Arc<Snapshot>>>,
    local: RefCell<Rc<Local>>,
    /// Accept loops running, by binding id.
    pub(crate) listeners: RefCell<HashMap<u64, Rc<ListenerHandle>>>,
    /// The snapshot version whose listeners are running.
    pub(crate) listeners_version: Cell<u64>,
    /// Accept loops paused at the connection limit, woken when a connection closes.
    pub(crate) accept_waiters: RefCell<Vec<std::task::Waker>>,
    /// Sources recently cut for stalling HTTP/2 flow control.
    pub h2_penalty: crate::admission::penalty::PenaltyBox,
    /// Idle HTTP/1.1 connections (plain, and TLS on io_uring) parked without a task (`downstream::h1::park`).
    pub parked: Parking<ParkedConn>,
    /// Whether the task that watches [`Worker::parked`] runs.
    pub parker_running: Cell<bool>,
}

/// What a parked idle connection remembers besides its socket.
pub struct ParkedConn {
    pub client: Rc<crate::request::Client>,
    /// Requests answered on it so far.
    pub served: u64,
    /// When its wait for the next request started counting (the previous request's end, or
    /// the start of the wait for the first).
    pub since: std::time::Instant,
    /// The TLS session of a TLS connection (in completion mode), kept without its socket.
    pub tls: Option<Box<crate::runtime::uring_tls::ParkedTls>>,
}

/// The config snapshot a request runs on, with this worker's state for its clusters.
pub struct Local {
    pub snap: Arc<Snapshot>,
    /// Indexed like `snap.config.clusters`.
    pub clusters: Vec<Rc<ClusterState>>,
    /// Indexed like `snap.config.routes`.
    pub routes: Vec<routes::RouteState>,
}

impl Local {
    /// This worker's state of route `index` (an index the snapshot's route table gave).
    pub fn route(&self, index: usize) -> Option<&routes::RouteState> {
        self.routes.get(index)
    }
}

/// What a worker thread is given at start.
pub struct WorkerParts {
    pub stats: Arc<WorkerStats>,
    pub endpoints: Arc<EndpointViews>,
    pub metrics: Arc<WorkerMetrics>,
    pub log: Option<WorkerLog>,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>, parts: WorkerParts) -> Self {
        let mut cache = Cache::new(Arc::clone(&shared.snapshot));
        let snap = Arc::clone(cache.load());
        let policy = crate::admission::policy(&snap.config);
        let clusters: Vec<Rc<ClusterState>> = snap
            .config
            .clusters
            .iter()
            .map(|c| Rc::new(cluster_state(&shared, id, c, policy, parts.metrics.cluster(&c.name))))
            .collect();
        publish_endpoints(&parts.endpoints, &clusters);
        let workers = shared.heartbeats.len().max(1);
        let routes = routes::for_snapshot(&parts.metrics, &snap, None, workers);
        let seed = (id as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
        Self {
            id,
            stats: parts.stats,
            metrics: parts.metrics,
            endpoints: parts.endpoints,
            log: RefCell::new(parts.log),
            ids: RefCell::new(RequestIds::new(id)),
            drain: Drain::default(),
            buffers: BufferPool::new(1024),
            armed: Default::default(),
            armed_waits: Default::default(),
            idle_timer: IdleTimer::new(),
            deadlines: IdleTimer::driven(crate::runtime::idle_timer::FINE_RESOLUTION),
            rng: XorShift::new(seed),
            shared,
            scratches: RefCell::new(Vec::new()),
            cache: RefCell::new(cache),
            local: RefCell::new(Rc::new(Local { routes, snap, clusters })),
            listeners: RefCell::new(HashMap::new()),
            listeners_version: Cell::new(0),
            accept_waiters: RefCell::new(Vec::new()),
            h2_penalty: Default::default(),
            parked: Parking::new(),
            parker_running: Cell::new(false),
        }
    }

    /// The current snapshot. A newer one published by a reload (or by the resolver, with a new
    /// endpoint set) is picked up here, keeping per-cluster state (pools, in-flight counts) of
    /// clusters whose settings did not change, and per-endpoint state by address of clusters
    /// whose endpoint set alone changed.
    pub fn local(&self) -> Rc<Local> {
        let mut cache = self.cache.borrow_mut();
        let latest = cache.load();
        let current = Rc::clone(&self.local.borrow());
        if Arc::ptr_eq(latest, &current.snap) {
            return current;
        }
        let snap = Arc::clone(latest);
        let policy = crate::admission::policy(&snap.config);
        let clusters = snap
            .config
            .clusters
            .iter()
            .map(|c| {
                let same_name = current.clusters.iter().find(|old| old.settings.name == c.name && old.policy == policy);
                match same_name {
                    Some(old) if old.settings == *c => Rc::clone(old),
                    // Only the endpoint set changed (DNS): shared by address.
                    Some(old) if same_but_endpoints(&old.settings, c) => {
                        Rc::new(ClusterState::with_endpoints(old, c, &self.shared.health))
                    }
                    _ => {
                        let state = cluster_state(&self.shared, self.id, c, policy, self.metrics.cluster(&c.name));
                        if let Some(old) = current.clusters.iter().find(|old| old.settings.name == c.name) {
                            state.take_over(old);
                        }
                        Rc::new(state)
                    }
                }
            })
            .collect::<Vec<_>>();
        publish_endpoints(&self.endpoints, &clusters);
        let routes = routes::for_snapshot(&self.metrics, &snap, Some(&current), self.workers());
        let next = Rc::new(Local { snap, clusters, routes });
        *self.local.borrow_mut() = Rc::clone(&next);
        next
    }

    /// Workers in this process.
    pub fn workers(&self) -> usize {
        self.shared.heartbeats.len().max(1)
    }

    /// Called when a downstream connection closes: wakes accept loops paused at the limit.
    pub fn connection_closed(&self) {
        for w in self.accept_waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    pub fn next_request_id(&self) -> RequestId {
        self.ids.borrow_mut().next()
    }

    pub fn access_log_enabled(&self) -> bool {
        self.log.borrow().is_some()
    }

    /// Queues one access log line (never blocks; dropped and counted when the writer is behind).
    pub fn log(&self, entry: &Entry<'_>) {
        if let Some(log) = self.log.borrow_mut().as_mut() {
            log.log(entry);
        }
    }

    /// Hands the last access log lines to the writer and stops logging (the drain's end).
    pub fn close_log(&self) {
        self.log.borrow_mut().take();
    }

    /// Hands partial access log batches to the writer.
    pub fn flush_log(&self) {
        if let Some(log) = self.log.borrow_mut().as_mut() {
            log.flush();
        }
    }

    /// Storage for the field ranges of one HTTP/1.1 head with up to `max_headers` fields.
    pub fn take_scratch(&self, max_headers: usize) -> HeadScratch {
        let max = max_headers.min(crate::codec::h1::MAX_HEADERS);
        match self.scratches.borrow_mut().pop() {
            Some(s) if s.max_headers() == max => s,
            _ => HeadScratch::new(max),
        }
    }

    /// Takes back storage lent by [`Worker::take_scratch`].
    pub fn give_scratch(&self, scratch: HeadScratch) {
        let mut pool = self.scratches.borrow_mut();
        if pool.len() < MAX_POOLED_SCRATCHES {
            pool.push(scratch);
        }
    }
}

/// Head scratches kept for reuse per worker (about 1 KiB each for a typical head): enough for
/// the requests and responses in flight at once under load; more are allocated and dropped.
const MAX_POOLED_SCRATCHES: usize = 64;

/// Publishes this worker's endpoints (cluster name, address, gauges) for the admin port.
fn publish_endpoints(views: &EndpointViews, clusters: &[Rc<ClusterState>]) {
    let list = clusters
        .iter()
        .flat_map(|c| c.endpoints.iter().map(|e| (c.settings.name.clone(), e.address, Arc::clone(&e.gauge))))
        .collect();
    *lock(views) = list;
}

/// Worker `id`'s state of cluster `c`: its adaptive limit (if on) is its part of the one the
/// process's workers share.
fn cluster_state(
    shared: &Shared,
    id: usize,
    c: &gateway_config::Cluster,
    policy: crate::admission::limiter::Policy,
    metrics: Arc<crate::stats::metrics::ClusterMetrics>,
) -> ClusterState {
    let workers = shared.heartbeats.len().max(1);
    let limiter =
        crate::admission::limiter::Limiter::with_controller(c, policy, |c| shared.controllers.get(c, workers), id);
    ClusterState::with_limiter(c, policy, &shared.health, metrics, limiter)
}

/// What workers share with the rest of the process: the current config snapshot and the drain
/// flag. Both are read-mostly; workers never write here.
pub struct Shared {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub draining: AtomicBool,
    /// Listener sockets waiting for their workers (see `control::Handoff`).
    pub handoff: Handoff,
    /// One per worker, stamped by the worker on every tick: proof of life for `/healthz` and
    /// the watchdog.
    pub heartbeats: heartbeat::Heartbeats,
    /// Active health of every endpoint, written by the process's one health checker.
    pub health: crate::upstream::health::HealthRegistry,
    /// Every cluster's adaptive limit, shared by the workers.
    pub controllers: crate::admission::controller::Controllers,
}

/// Tells whether every worker is serving: ticked recently and none died (a stuck or dead
/// worker stops systemd's watchdog pings, so systemd restarts the process).
pub struct Liveness {
    pub(crate) shared: Arc<Shared>,
}

impl Liveness {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// True when no worker died and each ticked within `max_age` (at least
    /// [`heartbeat::STALL_AFTER`]).
    pub fn check(&mut self, max_age: std::time::Duration) -> bool {
        let draining = self.shared.draining.load(std::sync::atomic::Ordering::Acquire);
        let max_age = max_age.max(heartbeat::STALL_AFTER);
        self.shared.heartbeats.unhealthy(std::time::Instant::now(), max_age, draining).is_empty()
    }
}

/// Listener sockets bound by the control thread and waiting for their workers, by binding id:
/// one slot per worker (a listener inherited from a process with more workers has more).
pub type Handoff = Mutex<HashMap<u64, Vec<Option<std::net::TcpListener>>>>;

/// Locks `m`, also when a thread panicked while holding it (the data are plain values that
/// stay consistent).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
