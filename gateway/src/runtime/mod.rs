//! Workers: one pinned OS thread per core, each running its own monoio runtime on the I/O
//! driver it could start, each owning its own SO_REUSEPORT listener sockets.

pub mod accept;
pub mod alloc;
pub mod buffers;
pub mod catch;
pub mod cpus;
pub mod idle_timer;
pub mod io;
pub mod listeners;
pub mod memory;
pub mod park;
pub mod peek;
pub mod quickack;
pub mod signal;
pub mod stream;
pub mod uring_tls;

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::thread::JoinHandle;

use gateway_config::IoDriver;
use monoio::time::TimeDriver;
use monoio::{IoUringDriver, LegacyDriver, RuntimeBuilder};

/// Boxes the future `make` builds, allocating first: the future is then written straight into
/// its box (only the fields its start holds: the arguments), where `Box::pin(make())` builds
/// the whole future on the stack and copies all of it, kilobytes for a request's pipeline,
/// most of them uninitialised.
#[inline(always)]
pub fn boxed<F: std::future::Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

/// The error of [`timeout`]: the time ran out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// `fut`, or [`Elapsed`] once `limit` has passed; `monoio::time::timeout` without its timer in
/// the future. monoio's timer entry is aligned to 128 bytes (cache-padded), and so is every
/// future that holds one inline, whatever else it holds: a request's pipeline that merely may
/// wait on a timeout somewhere was allocated with that alignment, which mimalloc serves only by
/// over-allocating (a slow path for blocks above 1 KiB; see [`alloc`]). Here the timer
/// is a box of its own, made only when `fut` does not finish at its first poll.
pub fn timeout<F: std::future::Future>(limit: std::time::Duration, fut: F) -> Timeout<F> {
    timeout_at(monoio::time::Instant::now() + limit, fut)
}

/// [`timeout`] until `deadline`.
pub fn timeout_at<F: std::future::Future>(deadline: monoio::time::Instant, fut: F) -> Timeout<F> {
    Timeout { fut, deadline, timer: None }
}

pin_project_lite::pin_project! {
    /// The future of [`timeout`].
    pub struct Timeout<F> {
        #[pin]
        fut: F,
        deadline: monoio::time::Instant,
        timer: Option<std::pin::Pin<Box<monoio::time::Sleep>>>,
    }
}

impl<F: std::future::Future> std::future::Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = self.project();
        if let std::task::Poll::Ready(v) = this.fut.poll(cx) {
            return std::task::Poll::Ready(Ok(v));
        }
        let deadline = *this.deadline;
        let timer = this.timer.get_or_insert_with(|| Box::pin(monoio::time::sleep_until(deadline)));
        timer.as_mut().poll(cx).map(|()| Err(Elapsed))
    }
}

/// `monoio::time::sleep` with its timer in a box of its own (see [`timeout`]).
pub async fn sleep(duration: std::time::Duration) {
    Box::pin(monoio::time::sleep(duration)).await
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

/// Starts one worker thread per entry of `parts`, each pinned to its core (round robin over
/// `cores`) with its own runtime on `driver`, running `main(id, part)` until it returns; waits
/// until every one reports its driver. Fails if any worker cannot start a runtime. `label`
/// says what the workers serve, for the log. When a worker's thread ends, `exited(id, clean)`
/// runs on it: `clean` is false when a panic escaped its runtime (a task outside any
/// connection boundary panicked; the runtime and all its tasks and sockets are gone then).
pub fn spawn_workers<P, F, Fut, E>(
    driver: IoDriver,
    cores: &[usize],
    parts: Vec<P>,
    label: &str,
    main: F,
    exited: E,
) -> Result<(Vec<JoinHandle<()>>, Vec<WorkerInfo>), String>
where
    P: Send + 'static,
    F: Fn(usize, P) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = ()>,
    E: Fn(usize, bool) + Send + Clone + 'static,
{
    let (tx, rx) = mpsc::channel::<Result<WorkerInfo, String>>();
    let mut threads = Vec::new();
    for (id, part) in parts.into_iter().enumerate() {
        let core = if cores.is_empty() { None } else { cores.get(id % cores.len()).copied() };
        let tx = tx.clone();
        let (main, label, exited) = (main.clone(), label.to_owned(), exited.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("gw-worker-{id}"))
            .spawn(move || {
                // Unwind safety: after a panic the runtime and everything it ran are dropped.
                let run = AssertUnwindSafe(|| worker_thread(id, core, driver, &label, move || main(id, part), tx));
                match std::panic::catch_unwind(run) {
                    Ok(()) => exited(id, true),
                    Err(panic) => {
                        tracing::error!(
                            worker = id,
                            panic = catch::message(&panic),
                            "worker thread died: a task outside any connection panicked"
                        );
                        exited(id, false);
                    }
                }
            })
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

fn worker_thread<Fut: std::future::Future<Output = ()>>(
    id: usize,
    core: Option<usize>,
    driver: IoDriver,
    label: &str,
    run: impl FnOnce() -> Fut,
    tx: mpsc::Sender<Result<WorkerInfo, String>>,
) {
    let pinned = core.filter(|&c| core_affinity::set_for_current(core_affinity::CoreId { id: c }));
    if core.is_some() && pinned.is_none() {
        tracing::warn!(worker = id, core = ?core, "could not pin worker to its core");
    }
    let report = |name: &'static str| {
        tracing::info!(worker = id, core = ?pinned, driver = name, listeners = label, "worker started");
        let _ = tx.send(Ok(WorkerInfo { id, core: pinned, driver: name }));
    };
    // Called once, on whichever driver starts.
    let mut run = Some(run);
    let mut run = move || run.take().map(|f| f());
    if driver != IoDriver::Epoll {
        for (name, flags) in [
            (DRIVER_URING_DEFER, UringFlags::DeferTaskrun),
            (DRIVER_URING_COOP, UringFlags::CoopTaskrun),
            (DRIVER_URING, UringFlags::Plain),
        ] {
            match uring_runtime(flags) {
                Ok(mut rt) => {
                    report(name);
                    if let Some(main) = run() {
                        rt.block_on(main);
                    }
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
            if let Some(main) = run() {
                rt.block_on(main);
            }
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

#[cfg(test)]
mod timeout_tests {
    use std::time::Duration;

    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut rt = monoio::RuntimeBuilder::<LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(f)
    }

    #[test]
    fn a_timeout_passes_the_output_through_or_elapses() {
        assert_eq!(block_on(async { timeout(Duration::from_secs(5), async { 7 }).await }), Ok(7));
        let started = std::time::Instant::now();
        let late =
            block_on(async { timeout(Duration::from_millis(20), monoio::time::sleep(Duration::from_secs(5))).await });
        assert_eq!(late, Err(Elapsed));
        assert!(started.elapsed() < Duration::from_secs(2));
        let pending = block_on(async {
            let deadline = monoio::time::Instant::now() + Duration::from_millis(10);
            timeout_at(deadline, std::future::pending::<()>()).await
        });
        assert_eq!(pending, Err(Elapsed));
    }

    #[test]
    fn a_timeout_does_not_carry_the_timer_alignment() {
        // monoio's `Sleep` is aligned to 128 bytes; the timeout's future is not.
        assert!(std::mem::align_of::<monoio::time::Sleep>() >= 64);
        assert!(std::mem::align_of::<Timeout<std::future::Ready<u64>>>() <= 16);
    }
}
