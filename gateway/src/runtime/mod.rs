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
pub mod splice;
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
/// most of them uninitialised. The box's memory comes from, and goes back to, a per-thread pool
/// of blocks of its layout ([`Pooled`]).
#[inline(always)]
pub fn boxed<F: std::future::Future>(make: impl FnOnce() -> F) -> Pooled<F> {
    Pooled::new(make)
}

/// A pinned box whose memory is kept for the next box of the same layout, in a pool of the
/// thread's (`pool`): the futures boxed once per request (a request's pipeline, several KiB;
/// its try's timer) are the same few layouts over and over, and a block above 1 KiB is
/// mimalloc's generic path (about 270 instructions to allocate, 80 to free, against a few
/// dozen here).
pub struct Pooled<F> {
    ptr: std::ptr::NonNull<F>,
    /// It owns an `F` (for the drop check).
    _owns: std::marker::PhantomData<F>,
}

impl<F> Pooled<F> {
    fn new(make: impl FnOnce() -> F) -> Self {
        let layout = std::alloc::Layout::new::<F>();
        let raw = if layout.size() == 0 { std::ptr::NonNull::<F>::dangling() } else { pool::take(layout).cast::<F>() };
        // SAFETY: `raw` is valid for a write of `F` (a block of `F`'s layout, or dangling and
        // well aligned for a zero-sized `F`), and nothing else refers to it.
        unsafe { raw.as_ptr().write(make()) };
        Self { ptr: raw, _owns: std::marker::PhantomData }
    }

    /// The future, pinned: it never moves out of its block while the box lives.
    pub fn as_mut(&mut self) -> std::pin::Pin<&mut F> {
        // SAFETY: `ptr` holds an initialised `F` owned by this box, which moves only the
        // pointer; the `F` stays in place until `drop` drops it there.
        unsafe { std::pin::Pin::new_unchecked(self.ptr.as_mut()) }
    }
}

// Moving the box moves the pointer, never the future (as for `Box<F>`).
impl<F> Unpin for Pooled<F> {}

impl<F> Drop for Pooled<F> {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::new::<F>();
        // SAFETY: the `F` is initialised and dropped exactly once, here, in place; its block
        // is then given back (not for a zero-sized `F`, which has none).
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            if layout.size() != 0 {
                pool::give(self.ptr.cast(), layout);
            }
        }
    }
}

impl<F: std::future::Future> std::future::Future for Pooled<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        // The box itself is `Unpin` (a pointer); the future it points to is pinned.
        Pooled::as_mut(self.get_mut()).poll(cx)
    }
}

/// The blocks [`Pooled`] boxes leave behind, per thread and by layout.
mod pool {
    use std::alloc::Layout;
    use std::cell::RefCell;
    use std::ptr::NonNull;

    /// Blocks kept per layout: what a worker's busiest moment left, up to this many (an
    /// HTTP/2 benchmark's 16 connections of 32 streams hold 512 pipelines at once). At a few
    /// KiB per pipeline that is a few MiB per worker at most, kept for the next burst.
    const KEEP: usize = 512;

    /// Free blocks by layout; freed with the thread.
    struct Pool(Vec<(Layout, Vec<NonNull<u8>>)>);

    impl Drop for Pool {
        fn drop(&mut self) {
            for (layout, blocks) in self.0.drain(..) {
                for block in blocks {
                    // SAFETY: every block was allocated with `layout` and is free.
                    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                }
            }
        }
    }

    thread_local! {
        static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
    }

    /// A block of `layout` (non-zero size): a kept one, or a new one.
    pub(super) fn take(layout: Layout) -> NonNull<u8> {
        let kept = POOL
            .try_with(|p| {
                let mut p = p.try_borrow_mut().ok()?;
                p.0.iter_mut().find(|(l, _)| *l == layout).and_then(|(_, blocks)| blocks.pop())
            })
            .ok()
            .flatten();
        kept.unwrap_or_else(|| {
            // SAFETY: `layout` has a non-zero size (the caller's promise).
            let block = unsafe { std::alloc::alloc(layout) };
            NonNull::new(block).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
        })
    }

    /// How many blocks of `layout` the thread keeps.
    #[cfg(test)]
    pub(super) fn kept(layout: Layout) -> usize {
        POOL.with(|p| p.borrow().0.iter().find(|(l, _)| *l == layout).map_or(0, |(_, b)| b.len()))
    }

    /// Gives back a block of `layout` that nothing refers to any more.
    ///
    /// # Safety
    /// `block` came from [`take`] with the same `layout`, and is not used again.
    pub(super) unsafe fn give(block: NonNull<u8>, layout: Layout) {
        let kept = POOL
            .try_with(|p| {
                let Ok(mut p) = p.try_borrow_mut() else { return false };
                let i = match p.0.iter().position(|(l, _)| *l == layout) {
                    Some(i) => i,
                    None => {
                        p.0.push((layout, Vec::with_capacity(KEEP)));
                        p.0.len() - 1
                    }
                };
                match p.0.get_mut(i) {
                    Some((_, blocks)) if blocks.len() < KEEP => {
                        blocks.push(block);
                        true
                    }
                    _ => false,
                }
            })
            .unwrap_or(false);
        if !kept {
            // SAFETY: the caller's promise: a block of `layout`, free.
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

/// The error of [`timeout`]: the time ran out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// `fut`, or [`Elapsed`] once `limit` has passed; `monoio::time::timeout` without its timer in
/// the future. monoio's timer entry is aligned to 128 bytes (cache-padded), and so is every
/// future that holds one inline, whatever else it holds: a request's pipeline that merely may
/// wait on a timeout somewhere was allocated with that alignment, which mimalloc serves only by
/// over-allocating (a slow path for blocks above 1 KiB; see [`alloc`]). Here the timer
/// is a box of its own ([`boxed`]), made only when `fut` does not finish at its first poll;
/// `limit` counts from then (a `fut` that finishes at once takes no clock reading either).
pub fn timeout<F: std::future::Future>(limit: std::time::Duration, fut: F) -> Timeout<F> {
    Timeout { fut, deadline: Deadline::After(limit), timer: None }
}

/// [`timeout`] until `deadline`.
pub fn timeout_at<F: std::future::Future>(deadline: monoio::time::Instant, fut: F) -> Timeout<F> {
    Timeout { fut, deadline: Deadline::At(deadline), timer: None }
}

/// When a [`Timeout`] ends.
#[derive(Clone, Copy)]
enum Deadline {
    /// This long after its future first waits.
    After(std::time::Duration),
    At(monoio::time::Instant),
}

pin_project_lite::pin_project! {
    /// The future of [`timeout`].
    pub struct Timeout<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
        timer: Option<Pooled<monoio::time::Sleep>>,
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
        let timer = this.timer.get_or_insert_with(|| {
            let at = match deadline {
                Deadline::After(limit) => monoio::time::Instant::now() + limit,
                Deadline::At(at) => at,
            };
            boxed(|| monoio::time::sleep_until(at))
        });
        timer.as_mut().poll(cx).map(|()| Err(Elapsed))
    }
}

/// `monoio::time::sleep` with its timer in a box of its own (see [`timeout`]).
pub async fn sleep(duration: std::time::Duration) {
    boxed(|| monoio::time::sleep(duration)).await
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
mod pooled_tests {
    use std::cell::Cell;
    use std::future::Future;
    use std::rc::Rc;

    use super::*;

    struct Counted(Rc<Cell<u32>>, [u64; 300]);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn a_box_drops_its_future_once_and_its_block_serves_the_next_box() {
        let drops = Rc::new(Cell::new(0));
        let first = boxed(|| {
            let c = Counted(Rc::clone(&drops), [7; 300]);
            async move { c.1[299] }
        });
        let at = first.ptr.as_ptr() as usize;
        drop(first);
        assert_eq!(drops.get(), 1);
        let mut second = boxed(|| {
            let c = Counted(Rc::clone(&drops), [9; 300]);
            async move { c.1[0] }
        });
        assert_eq!(second.ptr.as_ptr() as usize, at, "the block was kept for the same layout");
        let mut rt = monoio::RuntimeBuilder::<LegacyDriver>::new().build().unwrap();
        assert_eq!(rt.block_on(std::future::poll_fn(|cx| second.as_mut().poll(cx))), 9);
        drop(second);
        assert_eq!(drops.get(), 2);
        // Zero-sized futures take no block.
        let mut rt = monoio::RuntimeBuilder::<LegacyDriver>::new().build().unwrap();
        assert_eq!(rt.block_on(boxed(|| std::future::ready(()))), ());
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_blocks_per_layout() {
        fn layout_of<F>(_: &Pooled<F>) -> std::alloc::Layout {
            std::alloc::Layout::new::<F>()
        }
        let boxes: Vec<_> = (0..600).map(|i| boxed(move || async move { [i; 100] })).collect();
        let layout = layout_of(&boxes[0]);
        drop(boxes);
        assert_eq!(pool::kept(layout), 512);
    }
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
