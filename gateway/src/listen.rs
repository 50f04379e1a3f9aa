//! A worker's main task: its listeners' accept loops (each accepted connection goes to
//! `downstream::accept`), the tick (drain, idle pools, access log batches, due connection
//! deadlines), and the drain.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use monoio::net::TcpListener;

use crate::runtime::accept::{accept, Accepted};
use crate::runtime::catch::CatchUnwind;
use crate::runtime::signal::ListenerHandle;
use crate::worker::{lock, Worker};

/// How often a worker looks at process-wide signals (drain), sweeps idle pools and fires due
/// connection deadlines (see `idle_timer`).
const TICK: Duration = Duration::from_millis(100);
/// Ticks between two trims of the worker's I/O buffers (10 s).
const BUFFER_TRIM_TICKS: u64 = 100;

/// The worker's main task: run the listeners of the current snapshot (following reloads) until
/// drained, then wait for open connections to finish (up to the drain timeout).
pub async fn run(worker: Rc<Worker>) {
    sync_listeners(&worker);
    let mut ticks: u64 = 0;
    let mut drain_seen: Option<std::time::Instant> = None;
    let mut requests_seen = 0;
    while !worker.drain.is_triggered() {
        monoio::select! {
            _ = monoio::time::sleep(TICK) => {}
            _ = worker.drain.wait() => {}
        }
        ticks += 1;
        worker.idle_timer.advance(std::time::Instant::now());
        worker.shared.heartbeats.beat(worker.id, std::time::Instant::now());
        #[cfg(feature = "fault-injection")]
        crate::pipeline::fault::on_tick(&worker);
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
        // I/O buffers a burst left unused go back to the allocator (and with the collection
        // below, to the system) 10 to 20 s after it.
        worker.buffers.observe();
        if ticks.is_multiple_of(BUFFER_TRIM_TICKS) {
            worker.buffers.trim();
        }
        // Memory freed by a burst goes back to the system even when no traffic follows: at
        // every tick without a new request, and once a second under traffic (where mimalloc
        // purges during its own allocations anyway, and a walk over a large heap at every tick
        // would be work for nothing).
        let requests = worker.stats.requests_total.value();
        if requests == requests_seen || ticks.is_multiple_of(10) {
            crate::runtime::memory::collect();
        }
        requests_seen = requests;
    }
    for (_, l) in worker.listeners.borrow_mut().drain() {
        l.stop.trigger();
    }
    let drain_timeout = worker.local().snap.config.server.drain_timeout;
    let deadline = std::time::Instant::now() + drain_timeout;
    while worker.stats.connections_active.value() > 0 && std::time::Instant::now() < deadline {
        monoio::time::sleep(Duration::from_millis(20)).await;
        worker.shared.heartbeats.beat(worker.id, std::time::Instant::now());
        // Connections still waiting for their first request keep their header-read timeout.
        worker.idle_timer.advance(std::time::Instant::now());
    }
    // Hand over the last access log lines before the writer shuts down.
    worker.close_log();
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
        let sockets: Vec<std::net::TcpListener> = lock(&worker.shared.handoff)
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
        // On stop the accept is cancelled and its outcome awaited: a connection that raced in
        // is served, not dropped (this matters most when a successor process keeps accepting
        // on the same socket), and so is one whose wakeup another accept's cancel spent
        // (`runtime::accept`).
        let (stream, peer, stopping) = match accept(&listener, &handle.stop).await {
            Accepted::Connection(stream, peer) => (stream, peer, handle.stop.is_triggered()),
            Accepted::Stopped => return,
            Accepted::Failed(e) => {
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
        monoio::spawn(contained(Rc::clone(&worker), Rc::clone(&handle), binding, stream, peer));
        if stopping {
            return;
        }
    }
}

/// Serves one connection inside a panic boundary: a panic anywhere in it (outside a request or
/// stream, which have boundaries of their own) closes this connection only, is counted in
/// `gateway_panics_total{boundary="connection"}` and logged by the panic hook; the worker and
/// its other connections go on.
async fn contained(
    worker: Rc<Worker>,
    listener: Rc<ListenerHandle>,
    binding: u64,
    stream: monoio::net::TcpStream,
    peer: std::net::SocketAddr,
) {
    let serve = crate::downstream::accept::serve(Rc::clone(&worker), listener, binding, stream, peer);
    if let Err(panic) = CatchUnwind::new(serve).await {
        crate::downstream::accept::connection_panicked(&worker, peer, &panic);
        // What `serve` would have done at its end.
        worker.stats.connections_active.sub(1);
        worker.connection_closed();
    }
}
