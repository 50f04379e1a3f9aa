//! One worker: its state, its listeners' accept loops and its drain.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Cache};
use monoio::net::TcpListener;

use super::buffers::BufferPool;
use super::idle_timer::IdleTimer;
use super::signal::Drain;
use super::Shared;
use crate::accesslog::{Entry, RequestId, RequestIds, WorkerLog};
use crate::admission::RouteLimit;
use crate::codec::h1::HeadScratch;
use crate::snapshot::Snapshot;
use crate::stats::metrics::{ClusterMetrics, RouteMetrics, WorkerMetrics};
use crate::stats::WorkerStats;
use crate::upstream::balancer::XorShift;
use crate::upstream::{ClusterState, EndpointViews};

/// How often a worker looks at process-wide signals (drain), sweeps idle pools and fires due
/// connection deadlines (see `idle_timer`).
const TICK: Duration = Duration::from_millis(100);

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
    /// Idle and header-read deadlines of this worker's connections, advanced by [`run`].
    pub idle_timer: IdleTimer,
    pub rng: XorShift,
    shared: Arc<Shared>,
    /// Field-range storage for HTTP/1.1 heads, lent to a request (or an upstream response)
    /// for as long as it lives.
    scratches: RefCell<Vec<HeadScratch>>,
    cache: RefCell<Cache<Arc<ArcSwap<Snapshot>>, Arc<Snapshot>>>,
    local: RefCell<Rc<Local>>,
    /// Accept loops running, by binding id.
    listeners: RefCell<HashMap<u64, Rc<ListenerHandle>>>,
    /// The snapshot version whose listeners are running.
    listeners_version: Cell<u64>,
    /// Accept loops paused at the connection limit, woken when a connection closes.
    accept_waiters: RefCell<Vec<std::task::Waker>>,
    /// Sources recently cut for stalling HTTP/2 flow control.
    pub h2_penalty: crate::downstream::h2::penalty::PenaltyBox,
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
    /// Indexed like `snap.config.routes`; kept across reloads by route name.
    pub route_metrics: Vec<Arc<RouteMetrics>>,
    /// Indexed like `snap.config.clusters`; kept across reloads by cluster name.
    pub cluster_metrics: Vec<Arc<ClusterMetrics>>,
    /// Rate limiters by route index (`None` for routes without one); kept across reloads for
    /// routes whose name and rate limit are unchanged.
    pub route_limits: Vec<Option<Rc<RouteLimit>>>,
    /// Split counters and mirror bounds by route index.
    pub traffic: Vec<crate::route::traffic::RouteTraffic>,
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
            .map(|c| Rc::new(ClusterState::new(c, policy, &shared.health, parts.metrics.cluster(&c.name))))
            .collect();
        publish_endpoints(&parts.endpoints, &clusters);
        let (route_metrics, cluster_metrics) = series_for(&parts.metrics, &snap);
        let traffic = crate::route::traffic::for_snapshot(&parts.metrics, &snap, None);
        let workers = shared.heartbeats.len().max(1);
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
            idle_timer: IdleTimer::new(),
            rng: XorShift::new(seed),
            shared,
            scratches: RefCell::new(Vec::new()),
            cache: RefCell::new(cache),
            local: RefCell::new(Rc::new(Local {
                route_limits: route_limits(&snap, None, workers),
                traffic,
                snap,
                clusters,
                route_metrics,
                cluster_metrics,
            })),
            listeners: RefCell::new(HashMap::new()),
            listeners_version: Cell::new(0),
            accept_waiters: RefCell::new(Vec::new()),
            h2_penalty: Default::default(),
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
        let policy = crate::admission::policy(&snap.config);
        let clusters = snap
            .config
            .clusters
            .iter()
            .map(|c| {
                current.clusters.iter().find(|old| old.settings == *c && old.policy == policy).cloned().unwrap_or_else(
                    || {
                        let state = ClusterState::new(c, policy, &self.shared.health, self.metrics.cluster(&c.name));
                        if let Some(old) = current.clusters.iter().find(|old| old.settings.name == c.name) {
                            state.take_over(old);
                        }
                        Rc::new(state)
                    },
                )
            })
            .collect::<Vec<_>>();
        publish_endpoints(&self.endpoints, &clusters);
        let (route_metrics, cluster_metrics) = series_for(&self.metrics, &snap);
        let route_limits = route_limits(&snap, Some(&current), self.shared.heartbeats.len().max(1));
        let traffic = crate::route::traffic::for_snapshot(&self.metrics, &snap, Some(&current));
        let next = Rc::new(Local { snap, clusters, route_metrics, cluster_metrics, route_limits, traffic });
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

/// Head scratches kept for reuse per worker (each about 40 bytes per field of the limit).
const MAX_POOLED_SCRATCHES: usize = 256;

/// This worker's rate limiters for the snapshot's routes, reusing `previous` ones by route name
/// when the limit is unchanged.
fn route_limits(snap: &Snapshot, previous: Option<&Local>, workers: usize) -> Vec<Option<Rc<RouteLimit>>> {
    snap.config
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let settings = r.rate_limit.as_ref()?;
            let kept = previous.and_then(|p| {
                let j = p
                    .snap
                    .config
                    .routes
                    .iter()
                    .position(|o| o.name == r.name && o.rate_limit.as_ref() == Some(settings))?;
                let old = p.route_limits.get(j).cloned().flatten()?;
                // A process-wide bucket is the snapshot's; keep the worker's view only if it is the same.
                match (&*old, snap.shared_buckets.get(i).and_then(Option::as_ref)) {
                    (RouteLimit::Shared(a), Some(b)) if !Arc::ptr_eq(a, b) => None,
                    _ => Some(old),
                }
            });
            Some(kept.unwrap_or_else(|| {
                Rc::new(RouteLimit::new(settings, workers, snap.shared_buckets.get(i).and_then(Option::as_ref)))
            }))
        })
        .collect()
}

/// This worker's metric series for the snapshot's routes and clusters, by name; series of
/// names no longer configured are dropped.
fn series_for(metrics: &WorkerMetrics, snap: &Snapshot) -> (Vec<Arc<RouteMetrics>>, Vec<Arc<ClusterMetrics>>) {
    let routes: Vec<&str> = snap.config.routes.iter().map(|r| r.name.as_str()).collect();
    let clusters: Vec<&str> = snap.config.clusters.iter().map(|c| c.name.as_str()).collect();
    metrics.retain(&routes, &clusters);
    (routes.iter().map(|r| metrics.route(r)).collect(), clusters.iter().map(|c| metrics.cluster(c)).collect())
}

/// Publishes this worker's endpoints (cluster name, address, gauges) for the admin port.
fn publish_endpoints(views: &EndpointViews, clusters: &[Rc<ClusterState>]) {
    let list = clusters
        .iter()
        .flat_map(|c| c.endpoints.iter().map(|e| (c.settings.name.clone(), e.address, Arc::clone(&e.gauge))))
        .collect();
    *crate::control::lock(views) = list;
}

/// The worker's main task: run the listeners of the current snapshot (following reloads) until
/// drained, then wait for open connections to finish (up to the drain timeout).
pub async fn run(worker: Rc<Worker>) {
    sync_listeners(&worker);
    let mut ticks: u64 = 0;
    let mut drain_seen: Option<std::time::Instant> = None;
    while !worker.drain.is_triggered() {
        monoio::select! {
            _ = monoio::time::sleep(TICK) => {}
            _ = worker.drain.wait() => {}
        }
        ticks += 1;
        worker.idle_timer.advance(std::time::Instant::now());
        if let Some(beat) = worker.shared.heartbeats.get(worker.id) {
            beat.store(ticks, Ordering::Relaxed);
        }
        if worker.shared.draining.load(Ordering::Acquire) {
            // `/ready` already says 503; keep accepting for `drain_delay` so load balancers
            // stop sending connections before the listeners close.
            let delay = worker.local().snap.config.server.drain_delay;
            let seen = *drain_seen.get_or_insert_with(std::time::Instant::now);
            if seen.elapsed() >= delay {
                worker.drain.trigger();
                break;
            }
        }
        sync_listeners(&worker);
        worker.flush_log();
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
        // Connections still waiting for their first request keep their header-read timeout.
        worker.idle_timer.advance(std::time::Instant::now());
    }
    // Hand over the last access log lines before the writer shuts down.
    worker.log.borrow_mut().take();
    let left = worker.stats.connections_active.value();
    if left > 0 {
        tracing::warn!(worker = worker.id, connections = left, "drain timeout: closing remaining connections");
    } else {
        tracing::info!(worker = worker.id, "drained");
    }
}

/// Resolves once a downstream connection of this worker closes.
struct SlotFreed<'a> {
    worker: &'a Worker,
    registered: bool,
}

impl std::future::Future for SlotFreed<'_> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.registered {
            return std::task::Poll::Ready(());
        }
        self.worker.accept_waiters.borrow_mut().push(cx.waker().clone());
        self.registered = true;
        std::task::Poll::Pending
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
        // Slot `worker.id`, and every further `workers`-th one: a listener inherited from a
        // process with more workers has more sockets than workers, and none may be closed.
        let workers = worker.shared.heartbeats.len().max(1);
        let sockets: Vec<std::net::TcpListener> = crate::control::lock(&worker.shared.handoff)
            .get_mut(&b.id)
            .map(|slots| {
                slots
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| i % workers == worker.id)
                    .filter_map(|(_, s)| s.take())
                    .collect()
            })
            .unwrap_or_default();
        if sockets.is_empty() {
            tracing::error!(worker = worker.id, listener = %b.name, "no socket handed over for listener");
            continue;
        }
        let handle = Rc::new(ListenerHandle::default());
        for socket in sockets {
            match TcpListener::from_std(socket) {
                Ok(l) => {
                    running.insert(b.id, Rc::clone(&handle));
                    monoio::spawn(accept_loop(Rc::clone(worker), l, Rc::clone(&handle), b.id));
                }
                Err(e) => {
                    tracing::error!(worker = worker.id, listener = %b.name, error = %e, "cannot register listener")
                }
            }
        }
    }
}

async fn accept_loop(worker: Rc<Worker>, listener: TcpListener, handle: Rc<ListenerHandle>, binding: u64) {
    loop {
        // At the connection limit, stop accepting: new connections wait in the kernel backlog
        // (or go to other workers) until one of ours closes, instead of being accepted and dropped.
        let max = worker.local().snap.config.server.limits.max_connections_per_worker as u64;
        if worker.stats.connections_active.value() + 1 > max {
            worker.stats.connections_rejected.inc();
            while worker.stats.connections_active.value() >= max && !handle.stop.is_triggered() {
                monoio::select! {
                    _ = SlotFreed { worker: &worker, registered: false } => {}
                    _ = handle.stop.wait() => {}
                }
            }
            continue;
        }
        // A cancelled io_uring accept may already have taken a connection off the queue (the
        // kernel completed it while the cancel was on its way): on stop, cancel and wait for the
        // outcome, and serve a connection that raced in instead of dropping it. This matters
        // most when a successor process keeps accepting on the same socket.
        let canceller = monoio::io::Canceller::new();
        let accept = listener.cancelable_accept(canceller.handle());
        let mut accept = std::pin::pin!(accept);
        let mut stopping = false;
        let accepted = monoio::select! {
            r = &mut accept => r,
            _ = handle.stop.wait() => {
                stopping = true;
                let _canceller = canceller.cancel();
                accept.await
            }
        };
        let (stream, peer) = match accepted {
            Err(_) if stopping => return,
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(worker = worker.id, error = %e, "accept failed");
                // Out of file descriptors or memory: back off instead of spinning.
                monoio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        worker.stats.connections_accepted.inc();
        // Counted here, not in the connection task, so the limit check above sees it at once.
        worker.stats.connections_active.inc();
        let _ = stream.set_nodelay(true);
        monoio::spawn(crate::downstream::accept::serve(Rc::clone(&worker), Rc::clone(&handle), binding, stream, peer));
        if stopping {
            return;
        }
    }
}
