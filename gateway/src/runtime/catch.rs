//! Panic isolation for tasks: [`CatchUnwind`] runs a future and turns a panic in any of its
//! polls (or in its drop after a panic) into an `Err`, so that one connection's or one
//! stream's bug ends that connection or stream, not the worker thread and every other
//! connection on it. The panic's message and location are logged by the process's panic hook
//! (`logging::install_panic_hook`); the caller counts it and closes what it must.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A caught panic's payload.
pub type Panic = Box<dyn Any + Send + 'static>;

pin_project_lite::pin_project! {
    /// Wraps a future: `Ok(output)` when it completes, `Err(panic)` when a poll panicked. After
    /// a panic the inner future is dropped in place at once (its state may be broken; a panic
    /// in its drop is caught as well) and never polled again. No allocation: the wrapper is the
    /// inner future plus a tag.
    pub struct CatchUnwind<F> {
        #[pin]
        inner: Option<F>,
    }
}

impl<F: Future> CatchUnwind<F> {
    pub fn new(inner: F) -> Self {
        Self { inner: Some(inner) }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut inner = self.project().inner;
        let Some(running) = inner.as_mut().as_pin_mut() else {
            // Polled again after completing or panicking: a caller bug; stay pending.
            return Poll::Pending;
        };
        // Unwind safety: after a panic the future is dropped and nothing observes its state.
        match catch_unwind(AssertUnwindSafe(|| running.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => {
                inner.set(None);
                Poll::Ready(Ok(out))
            }
            Err(panic) => {
                // A destructor that panics again (a second bug) must not unwind the worker.
                let _ = catch_unwind(AssertUnwindSafe(|| inner.set(None)));
                Poll::Ready(Err(panic))
            }
        }
    }
}

/// A panic payload's message, when it is a string (as `panic!` makes it).
pub fn message(panic: &Panic) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "(non-string panic payload)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(f)
    }

    #[test]
    fn passes_the_output_through() {
        assert_eq!(block_on(CatchUnwind::new(async { 7 })).ok(), Some(7));
    }

    #[test]
    fn turns_a_panic_into_an_error_and_drops_the_future() {
        struct Flag(std::rc::Rc<std::cell::Cell<bool>>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let dropped = std::rc::Rc::new(std::cell::Cell::new(false));
        let flag = Flag(std::rc::Rc::clone(&dropped));
        let out = block_on(CatchUnwind::new(async move {
            let _flag = flag;
            monoio::time::sleep(std::time::Duration::from_millis(1)).await;
            if std::hint::black_box(true) {
                panic!("boom {}", 42);
            }
        }));
        let panic = out.err().unwrap();
        assert_eq!(message(&panic), "boom 42");
        assert!(dropped.get());
    }

    #[test]
    fn a_panicking_destructor_after_a_panic_is_contained() {
        struct Bad;
        impl Drop for Bad {
            fn drop(&mut self) {
                if !std::thread::panicking() {
                    panic!("drop");
                }
            }
        }
        let out = block_on(CatchUnwind::new(async {
            let _bad = Bad;
            panic!("first");
        }));
        assert_eq!(message(&out.err().unwrap()), "first");
    }
}
