//! A worker-local, one-shot broadcast: "the worker is draining".
//!
//! Any number of tasks of one worker await [`Drain::wait`]; [`Drain::trigger`] wakes them all.
//! Waiters that are dropped before the trigger remove their waker, so an idle connection that
//! waits once per keep-alive cycle never grows the registry.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Drain {
    triggered: Cell<bool>,
    waiters: RefCell<Slots>,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Drain {
    /// Whether the drain has started.
    pub fn is_triggered(&self) -> bool {
        self.triggered.get()
    }

    /// Starts the drain and wakes every waiter. Idempotent.
    pub fn trigger(&self) {
        if self.triggered.replace(true) {
            return;
        }
        let wakers = std::mem::take(&mut self.waiters.borrow_mut().wakers);
        for waker in wakers.into_iter().flatten() {
            waker.wake();
        }
    }

    /// Resolves once [`Drain::trigger`] has been called.
    pub fn wait(&self) -> DrainWait<'_> {
        DrainWait { drain: self, slot: None }
    }
}

pub struct DrainWait<'a> {
    drain: &'a Drain,
    slot: Option<usize>,
}

impl Future for DrainWait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.triggered.get() {
            return Poll::Ready(());
        }
        let mut slots = self.drain.waiters.borrow_mut();
        match self.slot {
            Some(i) => {
                if let Some(w) = slots.wakers.get_mut(i) {
                    *w = Some(cx.waker().clone());
                }
            }
            None => {
                let waker = Some(cx.waker().clone());
                let i = match slots.free.pop() {
                    Some(i) => {
                        if let Some(w) = slots.wakers.get_mut(i) {
                            *w = waker;
                        }
                        i
                    }
                    None => {
                        slots.wakers.push(waker);
                        slots.wakers.len() - 1
                    }
                };
                drop(slots);
                self.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Drop for DrainWait<'_> {
    fn drop(&mut self) {
        let Some(i) = self.slot else { return };
        if self.drain.triggered.get() {
            return;
        }
        let mut slots = self.drain.waiters.borrow_mut();
        if let Some(w) = slots.wakers.get_mut(i) {
            *w = None;
            slots.free.push(i);
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

    #[test]
    fn dropped_waiters_free_their_slot_and_trigger_wakes_the_rest() {
        let drain = Drain::default();
        let counter = Arc::new(CountWake(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..100 {
            let mut w = Box::pin(drain.wait());
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(drain.waiters.borrow().wakers.len(), 1, "slot reused");
        let mut a = Box::pin(drain.wait());
        let mut b = Box::pin(drain.wait());
        assert!(a.as_mut().poll(&mut cx).is_pending());
        assert!(b.as_mut().poll(&mut cx).is_pending());
        drain.trigger();
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert!(a.as_mut().poll(&mut cx).is_ready());
        assert!(drain.wait().poll_once(&mut cx));
    }

    trait ReadyExt {
        fn poll_once(self, cx: &mut Context<'_>) -> bool;
    }
    impl ReadyExt for DrainWait<'_> {
        fn poll_once(mut self, cx: &mut Context<'_>) -> bool {
            Pin::new(&mut self).poll(cx).is_ready()
        }
    }
}
/// One listener as a worker runs it. Its connections close after their current request once
/// `stop` fires (the listener was removed by a reload, or the worker drains).
#[derive(Default)]
pub struct ListenerHandle {
    pub stop: Drain,
}
