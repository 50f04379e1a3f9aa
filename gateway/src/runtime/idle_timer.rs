//! Worker-local timers on a hashed timing wheel: the coarse one for connection deadlines (idle
//! keep-alive, header read) and a fine one for each try's deadline.
//!
//! monoio's `Sleep` is 640 bytes with 128-byte alignment, and every future that holds one
//! inline grows to match: an idle connection paid for it while waiting for its next request.
//! Here a waiting connection holds a [`Expiry`] of three words; the deadline and waker live in
//! one slab per worker, on a hashed timing wheel of [`SLOTS`] buckets (intrusive doubly linked
//! lists, so insert and cancel are O(1) and a cancelled deadline leaves nothing behind);
//! deadlines further out than one turn of the wheel stay in their bucket until their turn comes.
//!
//! - The coarse timer ([`IdleTimer::new`], buckets of [`RESOLUTION`]): the worker's periodic
//!   task calls [`IdleTimer::advance`] about every [`RESOLUTION`]. A deadline never fires early,
//!   and fires at most one [`RESOLUTION`] plus the worker's tick period late (the worker ticks
//!   every 100 ms, so within about 200 ms).
//! - A fine timer ([`IdleTimer::driven`], buckets of [`FINE_RESOLUTION`]) advances itself: a
//!   task of its own sleeps (one runtime timer) until the earliest deadline registered when it
//!   last looked, and is woken sooner only when an earlier one is registered. A deadline never
//!   fires early, and about a millisecond late at most (the bucket, and the runtime's timer).
//!   Every try of every request registers its deadline here: an entry of 40 bytes in the slab,
//!   inserted and cancelled in O(1), where a runtime timer per try was a 640-byte `Sleep` on
//!   the runtime's wheel (320 KiB of timers for 512 requests in flight). Cancelled deadlines
//!   are not looked for: the task wakes at the earliest one it saw, fires what is due, and
//!   sleeps until the earliest left, so with one timeout for every try it wakes about once per
//!   timeout however many requests come and go.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The width of one bucket of the coarse timer.
pub const RESOLUTION: Duration = Duration::from_millis(100);
/// The width of one bucket of a fine timer.
pub const FINE_RESOLUTION: Duration = Duration::from_millis(1);
/// Buckets on the wheel: one turn covers 102.4 s at [`RESOLUTION`], 1.024 s at
/// [`FINE_RESOLUTION`].
pub const SLOTS: usize = 1024;

const NIL: u32 = u32::MAX;

/// The deadlines of one worker's connections (coarse) or tries (fine).
pub struct IdleTimer {
    core: Rc<Core>,
}

struct Core {
    origin: Instant,
    /// A bucket's width, in nanoseconds.
    resolution: u64,
    wheel: RefCell<Wheel>,
    /// The last tick processed: every deadline at or before it has fired.
    current: Cell<u64>,
    /// A fine timer's task, `None` for a timer advanced by its owner.
    driver: Option<Driver>,
}

/// The state of a fine timer's own task ([`drive`]).
#[derive(Default)]
struct Driver {
    running: Cell<bool>,
    /// The tick the task sleeps until (`u64::MAX`: not sleeping on a deadline).
    armed: Cell<u64>,
    /// An earlier deadline was registered (or the timer dropped): look again.
    kicked: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl IdleTimer {
    /// A coarse timer ([`RESOLUTION`]), advanced by whoever owns it ([`IdleTimer::advance`]).
    pub fn new() -> Self {
        Self::build(Instant::now(), RESOLUTION, false)
    }

    /// A timer of `resolution` that advances itself: a task on the current runtime, started
    /// when a deadline is registered and none is running, fires deadlines as they come (see
    /// the module's documentation). Deadlines can only be awaited inside a runtime.
    pub fn driven(resolution: Duration) -> Self {
        Self::build(Instant::now(), resolution, true)
    }

    fn build(origin: Instant, resolution: Duration, driven: bool) -> Self {
        let resolution = u64::try_from(resolution.as_nanos()).unwrap_or(u64::MAX).max(1);
        Self {
            core: Rc::new(Core {
                origin,
                resolution,
                wheel: RefCell::new(Wheel::new()),
                current: Cell::new(0),
                driver: driven.then(Driver::default),
            }),
        }
    }

    #[cfg(test)]
    fn starting_at(origin: Instant) -> Self {
        Self::build(origin, RESOLUTION, false)
    }

    /// Resolves once `limit` has passed (rounded up to the timer's resolution). Registers
    /// nothing until first polled; dropping it cancels the registration.
    pub fn after(&self, limit: Duration) -> Expiry<'_> {
        self.at(Instant::now() + limit)
    }

    /// Resolves once `deadline` has passed (rounded up to the timer's resolution).
    pub fn at(&self, deadline: Instant) -> Expiry<'_> {
        let d = deadline.saturating_duration_since(self.core.origin);
        // In u64 nanoseconds (584 years from the timer's start): one division, where u128's is
        // a call into the runtime library.
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Expiry { timer: self, tick: nanos.div_ceil(self.core.resolution), key: NIL, generation: 0 }
    }

    /// Runs `fut` until it completes (`Some` of its output) or `limit` has passed (`None`, and
    /// `fut` is dropped), on this timer's resolution: for waits on a client bounded by
    /// `body_io`, which need no timer entry of the runtime's own. `limit` counts from the first
    /// time `fut` has to wait: a `fut` that completes when first polled (most sends into a
    /// stream's buffer) takes no clock reading and no entry on the wheel.
    pub fn within<F: Future>(&self, limit: Duration, fut: F) -> Within<'_, F> {
        Within { fut, timer: self, limit, expiry: None }
    }

    /// Fires every deadline at or before `now`. Called by the worker's periodic task (coarse
    /// timer); a fine timer's own task calls it.
    pub fn advance(&self, now: Instant) {
        self.core.advance(now);
    }

    /// Deadlines registered and not yet fired or cancelled.
    pub fn len(&self) -> usize {
        self.core.wheel.borrow().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for IdleTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IdleTimer {
    fn drop(&mut self) {
        // A fine timer's task holds the core: let it see that it is the last one and end.
        if let Some(d) = &self.core.driver {
            d.kick();
        }
    }
}

impl Core {
    fn advance(&self, now: Instant) {
        let now_tick =
            u64::try_from(now.saturating_duration_since(self.origin).as_nanos() / u128::from(self.resolution))
                .unwrap_or(u64::MAX);
        let from = self.current.get();
        if now_tick <= from {
            return;
        }
        self.current.set(now_tick);
        let mut wheel = self.wheel.borrow_mut();
        let mut woken = std::mem::take(&mut wheel.woken);
        // Past one turn of the wheel, every bucket is visited once.
        let steps = (now_tick - from).min(SLOTS as u64);
        for step in 1..=steps {
            wheel.expire_bucket(bucket_of(from + step), now_tick, &mut woken);
        }
        drop(wheel);
        // Wake outside the borrow: a waker may run code that registers again.
        for w in woken.drain(..) {
            w.wake();
        }
        self.wheel.borrow_mut().woken = woken;
    }

    /// The instant `tick` begins.
    fn instant_of(&self, tick: u64) -> Instant {
        let nanos = u128::from(tick) * u128::from(self.resolution);
        let d = Duration::new(
            u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
            u32::try_from(nanos % 1_000_000_000).unwrap_or(0),
        );
        self.origin.checked_add(d).unwrap_or_else(|| self.origin + Duration::from_secs(86_400 * 365))
    }

    /// A deadline was registered at `tick`: a fine timer's task starts, or looks again when
    /// it sleeps until a later one.
    fn registered(self: &Rc<Self>, tick: u64) {
        let Some(d) = &self.driver else { return };
        if !d.running.get() {
            d.running.set(true);
            d.armed.set(tick);
            monoio::spawn(drive(Rc::clone(self)));
        } else if tick < d.armed.get() {
            d.armed.set(tick);
            d.kick();
        }
    }
}

impl Driver {
    fn kick(&self) {
        self.kicked.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Resolves once kicked (see [`Driver::kick`]).
    fn kicked(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.kicked.replace(false) {
                return Poll::Ready(());
            }
            let mut w = self.waker.borrow_mut();
            match w.as_mut() {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *w = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }
}

/// A fine timer's task: fires what is due, then sleeps until the earliest deadline left (or
/// an earlier one is registered); ends when no deadline is left, or the timer was dropped.
async fn drive(core: Rc<Core>) {
    let Some(d) = core.driver.as_ref() else { return };
    loop {
        d.kicked.set(false);
        core.advance(Instant::now());
        let next = if Rc::strong_count(&core) == 1 { None } else { core.wheel.borrow().earliest() };
        let Some(tick) = next else { break };
        d.armed.set(tick);
        let at = monoio::time::Instant::from_std(core.instant_of(tick));
        monoio::select! {
            _ = monoio::time::sleep_until(at) => {}
            _ = d.kicked() => {}
        }
    }
    d.armed.set(u64::MAX);
    d.running.set(false);
}

pin_project_lite::pin_project! {
    /// The future of [`IdleTimer::within`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Within<'a, F> {
        #[pin]
        fut: F,
        timer: &'a IdleTimer,
        limit: Duration,
        // Set when `fut` first has to wait.
        expiry: Option<Expiry<'a>>,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Some(v));
        }
        let (timer, limit) = (*this.timer, *this.limit);
        let expiry = this.expiry.get_or_insert_with(|| timer.after(limit));
        // `Expiry` is `Unpin` (it is registered by key, not by address).
        Pin::new(expiry).poll(cx).map(|()| None)
    }
}

/// A pending deadline; see [`IdleTimer::at`].
#[must_use = "futures do nothing unless polled"]
pub struct Expiry<'a> {
    timer: &'a IdleTimer,
    tick: u64,
    /// Slab index once registered, `NIL` before.
    key: u32,
    generation: u32,
}

impl Future for Expiry<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let core = &self.timer.core;
        if self.key == NIL {
            if self.tick <= core.current.get() {
                return Poll::Ready(());
            }
            let (key, generation) = core.wheel.borrow_mut().insert(self.tick, cx.waker().clone());
            core.registered(self.tick);
            self.key = key;
            self.generation = generation;
            return Poll::Pending;
        }
        let mut wheel = core.wheel.borrow_mut();
        match wheel.entries.get_mut(self.key as usize) {
            Some(e) if e.generation == self.generation && e.waker.is_some() => {
                if let Some(w) = e.waker.as_mut() {
                    if !w.will_wake(cx.waker()) {
                        w.clone_from(cx.waker());
                    }
                }
                Poll::Pending
            }
            // Fired (the entry was freed, so its generation moved on).
            _ => {
                drop(wheel);
                self.key = NIL;
                self.tick = 0;
                Poll::Ready(())
            }
        }
    }
}

impl Drop for Expiry<'_> {
    fn drop(&mut self) {
        if self.key != NIL {
            self.timer.core.wheel.borrow_mut().cancel(self.key, self.generation);
        }
    }
}

fn bucket_of(tick: u64) -> usize {
    (tick % SLOTS as u64) as usize
}

/// The slab of deadlines and the bucket lists threaded through it.
struct Wheel {
    entries: Vec<Entry>,
    /// First entry of each bucket's list.
    heads: Vec<u32>,
    /// First free entry; free entries are chained through `next`.
    free: u32,
    len: usize,
    /// Reused between ticks so firing allocates nothing.
    woken: Vec<Waker>,
}

struct Entry {
    tick: u64,
    prev: u32,
    next: u32,
    /// Bumped whenever the entry is freed, so a stale [`Expiry`] cannot touch its successor.
    generation: u32,
    /// `Some` exactly while the entry is registered.
    waker: Option<Waker>,
}

impl Wheel {
    fn new() -> Self {
        Self { entries: Vec::new(), heads: vec![NIL; SLOTS], free: NIL, len: 0, woken: Vec::new() }
    }

    fn insert(&mut self, tick: u64, waker: Waker) -> (u32, u32) {
        let bucket = bucket_of(tick);
        let head = self.heads.get(bucket).copied().unwrap_or(NIL);
        let key = if self.free != NIL {
            self.free
        } else {
            self.entries.push(Entry { tick: 0, prev: NIL, next: NIL, generation: 0, waker: None });
            u32::try_from(self.entries.len() - 1).unwrap_or(NIL)
        };
        let Some(e) = self.entries.get_mut(key as usize) else { return (NIL, 0) };
        if key == self.free {
            self.free = e.next;
        }
        e.tick = tick;
        e.prev = NIL;
        e.next = head;
        e.waker = Some(waker);
        let generation = e.generation;
        if let Some(h) = self.entries.get_mut(head as usize) {
            h.prev = key;
        }
        if let Some(h) = self.heads.get_mut(bucket) {
            *h = key;
        }
        self.len += 1;
        (key, generation)
    }

    fn cancel(&mut self, key: u32, generation: u32) {
        if self.entries.get(key as usize).is_some_and(|e| e.generation == generation && e.waker.is_some()) {
            self.remove(key);
        }
    }

    /// Unlinks a registered entry and frees it; returns its waker.
    fn remove(&mut self, key: u32) -> Option<Waker> {
        let e = self.entries.get_mut(key as usize)?;
        let (prev, next, bucket) = (e.prev, e.next, bucket_of(e.tick));
        let waker = e.waker.take();
        e.generation = e.generation.wrapping_add(1);
        e.next = self.free;
        e.prev = NIL;
        self.free = key;
        self.len -= 1;
        match self.entries.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => {
                if let Some(h) = self.heads.get_mut(bucket) {
                    *h = next;
                }
            }
        }
        if let Some(n) = self.entries.get_mut(next as usize) {
            n.prev = prev;
        }
        waker
    }

    /// The earliest tick registered (a walk over the slab: for a fine timer's task, which
    /// looks once per wake-up).
    fn earliest(&self) -> Option<u64> {
        self.entries.iter().filter(|e| e.waker.is_some()).map(|e| e.tick).min()
    }

    /// Frees the bucket's entries due at or before `now_tick`, collecting their wakers.
    fn expire_bucket(&mut self, bucket: usize, now_tick: u64, woken: &mut Vec<Waker>) {
        let mut key = self.heads.get(bucket).copied().unwrap_or(NIL);
        while let Some(e) = self.entries.get(key as usize) {
            let next = e.next;
            if e.tick <= now_tick {
                woken.extend(self.remove(key));
            }
            key = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct CountWake(AtomicUsize);
    impl Wake for CountWake {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<CountWake>, Waker) {
        let c = Arc::new(CountWake(AtomicUsize::new(0)));
        let w = Waker::from(Arc::clone(&c));
        (c, w)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fires_at_the_deadline_never_before() {
        let t0 = Instant::now();
        let timer = IdleTimer::starting_at(t0);
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        let mut e = Box::pin(timer.at(t0 + ms(250)));
        assert!(e.as_mut().poll(&mut cx).is_pending());
        assert_eq!(timer.len(), 1);
        timer.advance(t0 + ms(299));
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "250 ms rounds up to tick 3 (300 ms)");
        assert!(e.as_mut().poll(&mut cx).is_pending());
        timer.advance(t0 + ms(300));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(e.as_mut().poll(&mut cx).is_ready());
        assert!(timer.is_empty());
        // A deadline already passed resolves without registering.
        let mut past = Box::pin(timer.at(t0 + ms(100)));
        assert!(past.as_mut().poll(&mut cx).is_ready());
        assert!(timer.is_empty());
    }

    #[test]
    fn drop_cancels_and_frees_the_entry() {
        let t0 = Instant::now();
        let timer = IdleTimer::starting_at(t0);
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..100 {
            let mut e = Box::pin(timer.at(t0 + ms(500)));
            assert!(e.as_mut().poll(&mut cx).is_pending());
            assert_eq!(timer.len(), 1);
        }
        assert!(timer.is_empty());
        assert_eq!(timer.core.wheel.borrow().entries.len(), 1, "the slab entry is reused");
        timer.advance(t0 + ms(1000));
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "nothing fires once cancelled");
        // An unpolled expiry registers nothing.
        drop(timer.at(t0 + ms(5000)));
        assert!(timer.is_empty());
    }

    #[test]
    fn many_entries_fire_in_order_and_cancels_leave_the_rest() {
        let t0 = Instant::now();
        let timer = IdleTimer::starting_at(t0);
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        let mut all: Vec<_> = (0..10_000u64).map(|i| Box::pin(timer.at(t0 + ms(100 + (i % 50) * 100)))).collect();
        for e in &mut all {
            assert!(e.as_mut().poll(&mut cx).is_pending());
        }
        // Cancel every other one.
        let mut kept = Vec::new();
        for (i, e) in all.into_iter().enumerate() {
            if i % 2 == 0 {
                kept.push(e);
            }
        }
        assert_eq!(timer.len(), 5_000);
        timer.advance(t0 + ms(2_500));
        // Deadlines 100..=2500 ms: i % 50 in 0..=24, of the kept (even) indices.
        let fired = count.0.load(Ordering::SeqCst);
        assert_eq!(fired, (0..10_000).filter(|i| i % 2 == 0 && i % 50 <= 24).count());
        let ready = kept.iter_mut().map(|e| e.as_mut().poll(&mut cx)).filter(Poll::is_ready).count();
        assert_eq!(ready, fired);
        timer.advance(t0 + ms(10_000));
        assert_eq!(count.0.load(Ordering::SeqCst), 5_000);
        assert!(timer.is_empty());
    }

    #[test]
    fn deadlines_past_one_turn_wait_for_their_round() {
        let t0 = Instant::now();
        let timer = IdleTimer::starting_at(t0);
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        let turn = RESOLUTION * SLOTS as u32;
        // Same bucket, three rounds apart, registered after the wheel already wrapped once.
        timer.advance(t0 + turn + ms(50));
        let base = t0 + turn + ms(200);
        let mut a = Box::pin(timer.at(base));
        let mut b = Box::pin(timer.at(base + turn));
        let mut c = Box::pin(timer.at(base + turn * 3));
        for e in [&mut a, &mut b, &mut c] {
            assert!(e.as_mut().poll(&mut cx).is_pending());
        }
        timer.advance(base);
        assert!(a.as_mut().poll(&mut cx).is_ready());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        timer.advance(base + turn - ms(100));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        // A long gap between ticks (a stalled worker) visits every bucket once.
        timer.advance(base + turn * 2);
        assert!(b.as_mut().poll(&mut cx).is_ready());
        assert!(c.as_mut().poll(&mut cx).is_pending());
        timer.advance(base + turn * 3);
        assert!(c.as_mut().poll(&mut cx).is_ready());
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert!(timer.is_empty());
    }

    /// Runs `f` on a runtime of each driver (io_uring where the kernel allows it).
    fn on_each_driver<F: Future<Output = ()>>(f: impl Fn() -> F) {
        #[allow(clippy::unwrap_used)]
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(f());
        match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer().build() {
            Ok(mut rt) => rt.block_on(f()),
            Err(e) => eprintln!("skipped on io_uring (no ring here: {e}); ran on epoll only"),
        }
    }

    #[test]
    fn a_driven_timer_fires_its_deadlines_by_itself_never_early() {
        on_each_driver(|| async {
            let timer = IdleTimer::driven(FINE_RESOLUTION);
            let timer = &timer;
            let start = Instant::now();
            let deadlines = [30u64, 10, 20].map(|n| start + ms(n));
            let waits = deadlines.map(|d| async move {
                timer.at(d).await;
                let now = Instant::now();
                assert!(now >= d, "fired {:?} early", d - now);
                now
            });
            let [a, b, c] = waits;
            let (a, b, c) = monoio::join!(a, b, c);
            // Generous bounds: a deadline fires about a millisecond late, seconds on a busy
            // machine; a timer that did not advance would never fire at all.
            assert!(b <= c && c <= a, "fired in deadline order");
            assert!(a.duration_since(start) < Duration::from_secs(5));
            assert!(timer.is_empty());
        });
    }

    #[test]
    fn an_earlier_deadline_wakes_the_task_sleeping_until_a_later_one() {
        on_each_driver(|| async {
            let timer = IdleTimer::driven(FINE_RESOLUTION);
            let start = Instant::now();
            let mut far = Box::pin(timer.at(start + Duration::from_secs(600)));
            let (_, waker) = counter();
            assert!(far.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            // The task now sleeps until the far deadline; a near one must not wait for it.
            monoio::time::sleep(ms(5)).await;
            timer.after(ms(20)).await;
            assert!(start.elapsed() < Duration::from_secs(60));
            assert_eq!(timer.len(), 1, "the far deadline is still registered");
            drop(far);
            assert!(timer.is_empty());
        });
    }

    #[test]
    fn the_task_ends_when_no_deadline_is_left_and_starts_again_for_the_next() {
        on_each_driver(|| async {
            let timer = IdleTimer::driven(FINE_RESOLUTION);
            let driver = || timer.core.driver.as_ref().map(|d| d.running.get());
            assert_eq!(driver(), Some(false));
            timer.after(ms(5)).await;
            // Its last wake-up fired the deadline; with none left it ends.
            for _ in 0..100 {
                if driver() == Some(false) {
                    break;
                }
                monoio::time::sleep(ms(2)).await;
            }
            assert_eq!(driver(), Some(false));
            timer.after(ms(5)).await;
            // A cancelled deadline is looked at only when its time comes: the task sleeps
            // until then and finds nothing.
            let mut cancelled = Box::pin(timer.after(ms(10)));
            let (_, waker) = counter();
            assert!(cancelled.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            drop(cancelled);
            monoio::time::sleep(ms(50)).await;
            assert_eq!(driver(), Some(false));
        });
    }

    #[test]
    fn dropping_a_driven_timer_ends_its_task() {
        on_each_driver(|| async {
            let timer = IdleTimer::driven(FINE_RESOLUTION);
            let core = Rc::downgrade(&timer.core);
            let mut far = Box::pin(timer.at(Instant::now() + Duration::from_secs(600)));
            let (_, waker) = counter();
            assert!(far.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            monoio::time::sleep(ms(5)).await;
            assert_eq!(core.strong_count(), 2, "the timer and its task");
            drop(far);
            drop(timer);
            monoio::time::sleep(ms(5)).await;
            assert_eq!(core.strong_count(), 0, "the task let go of the wheel");
        });
    }

    #[test]
    fn a_coarse_timer_has_no_task() {
        let timer = IdleTimer::new();
        assert!(timer.core.driver.is_none());
        let (_, waker) = counter();
        // Registering outside any runtime is fine: nothing is spawned.
        let mut e = Box::pin(timer.after(ms(100)));
        assert!(e.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(timer.len(), 1);
    }

    #[test]
    fn within_takes_a_deadline_only_when_its_future_waits() {
        let t0 = Instant::now();
        let timer = IdleTimer::starting_at(t0);
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        // Ready at its first poll: its output, and nothing registered.
        let mut ready = Box::pin(timer.within(ms(200), std::future::ready(7)));
        assert_eq!(ready.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        assert!(timer.is_empty());
        // Waiting: the deadline is registered and ends the wait once it passes.
        let mut never = Box::pin(timer.within(ms(200), std::future::pending::<()>()));
        assert!(never.as_mut().poll(&mut cx).is_pending());
        assert_eq!(timer.len(), 1);
        assert!(never.as_mut().poll(&mut cx).is_pending());
        assert_eq!(timer.len(), 1, "one registration however often it is polled");
        timer.advance(Instant::now() + ms(400));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(never.as_mut().poll(&mut cx), Poll::Ready(None));
        assert!(timer.is_empty());
        // Waiting, then done before the deadline: its output, and the registration goes.
        let timer = IdleTimer::new();
        let flag = Cell::new(false);
        let mut later =
            Box::pin(timer.within(
                ms(200),
                std::future::poll_fn(|_| if flag.get() { Poll::Ready("done") } else { Poll::Pending }),
            ));
        assert!(later.as_mut().poll(&mut cx).is_pending());
        assert_eq!(timer.len(), 1);
        flag.set(true);
        assert_eq!(later.as_mut().poll(&mut cx), Poll::Ready(Some("done")));
        drop(later);
        assert!(timer.is_empty());
    }

    #[test]
    fn expiry_is_three_words() {
        assert!(std::mem::size_of::<Expiry<'_>>() <= 24);
    }
}
