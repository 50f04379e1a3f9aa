//! Accepting on a listening socket that other accepts share (the workers of a successor process
//! after an upgrade, each holding duplicates of the same sockets) without a connection left
//! behind.
//!
//! io_uring arms an accept that finds no connection as an *exclusive* poll on the socket: a new
//! connection wakes one waiting accept, the first armed. On a ring set up with
//! `DEFER_TASKRUN` (the gateway's first choice, `runtime::uring_runtime`) the accept itself then
//! runs as deferred task work, at that worker's next wait for completions. If the worker
//! cancels the accept in between (its listener stops: a drain, an upgrade, a removed listener),
//! the wakeup is spent and nothing is accepted: the connection stays queued while every other
//! accept on the socket sleeps, until yet another connection arrives. During an upgrade that
//! is the old process's last accept and the successor's: a client that connected just then
//! waited with no answer (seen once in CI as a TLS client's 10 s handshake timeout). In the
//! test below, where the client connects while the stopping worker is busy for 5 ms before its
//! cancel, every trial left the connection queued without the check below. With the client
//! connecting at random times around the stop (a separate experiment), 60 of 200 trials did,
//! and none of 200 on rings without `DEFER_TASKRUN`.
//!
//! So an accept that has waited [`CHECK`] looks whether the socket has a connection queued
//! (a `poll` with no timeout); if it has, the accept is cancelled and reissued, and a new
//! accept takes a queued connection at once. A lost wakeup then costs at most about one
//! [`CHECK`] instead of an unbounded wait; an idle listener costs one timer and one `poll` per
//! [`CHECK`]. A cancel here can itself race with a wakeup, but the reissued accept finds the
//! connection. On the epoll driver readiness wakes every waiter, so there is nothing to check.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use monoio::net::{TcpListener, TcpStream};

use super::signal::Drain;

/// How long an accept waits before it looks for a connection it was not woken for.
pub const CHECK: Duration = Duration::from_millis(100);

/// What [`accept`] came to.
pub enum Accepted {
    Connection(TcpStream, SocketAddr),
    /// `stop` was triggered; no connection raced in.
    Stopped,
    Failed(io::Error),
}

/// Accepts one connection from `listener`, until `stop` is triggered. On stop the pending
/// accept is cancelled and its outcome awaited: a connection the kernel handed over while the
/// cancel was on its way comes back as [`Accepted::Connection`] (the caller serves it and then
/// stops), never dropped.
pub async fn accept(listener: &TcpListener, stop: &Drain) -> Accepted {
    let check = !monoio::utils::is_legacy();
    loop {
        let canceller = monoio::io::Canceller::new();
        let pending = listener.cancelable_accept(canceller.handle());
        let mut pending = std::pin::pin!(pending);
        let outcome = loop {
            let looked = async {
                if check {
                    monoio::time::sleep(CHECK).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            monoio::select! {
                r = &mut pending => break r,
                _ = stop.wait() => {
                    let _canceller = canceller.cancel();
                    break pending.await;
                }
                _ = looked => {
                    if queued(listener) {
                        let _canceller = canceller.cancel();
                        break pending.await;
                    }
                }
            }
        };
        match outcome {
            Ok((stream, peer)) => return Accepted::Connection(stream, peer),
            Err(_) if stop.is_triggered() => return Accepted::Stopped,
            // Cancelled to look again (a connection is queued): reissue.
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => continue,
            Err(e) => return Accepted::Failed(e),
        }
    }
}

/// Whether `listener` has a connection waiting to be accepted.
fn queued(listener: &TcpListener) -> bool {
    let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; timeout 0 never blocks.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    /// A worker whose accept was armed first is told to stop, is busy for a while in user space
    /// (serving its other connections), then cancels its accept; a client connects during that
    /// time. `accept` on another `DEFER_TASKRUN` ring, armed second, must still take the
    /// connection. Returns who did, within a second: 'a' the stopping one (its accept completed
    /// before the cancel), 'b' the other, '-' nobody.
    fn trial() -> char {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = std_listener.local_addr().expect("addr");
        let told = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let by_a = Arc::new(AtomicUsize::new(0));
        let by_b = Arc::new(AtomicUsize::new(0));
        let la = std_listener.try_clone().expect("clone");
        let lb = std_listener.try_clone().expect("clone");
        let (told_a, busy_a, by_a2, finished_a) =
            (Arc::clone(&told), Arc::clone(&busy), Arc::clone(&by_a), Arc::clone(&finished));
        let a = std::thread::spawn(move || {
            let mut rt = super::super::uring_runtime(super::super::UringFlags::DeferTaskrun).expect("io_uring");
            rt.block_on(async move {
                let l = TcpListener::from_std(la).expect("listener");
                let canceller = monoio::io::Canceller::new();
                let pending = l.cancelable_accept(canceller.handle());
                let mut pending = std::pin::pin!(pending);
                let told = async {
                    while !told_a.load(Ordering::SeqCst) {
                        monoio::time::sleep(Duration::from_micros(50)).await;
                    }
                };
                let outcome = monoio::select! {
                    r = &mut pending => r,
                    _ = told => {
                        busy_a.store(true, Ordering::SeqCst);
                        let since = Instant::now();
                        while since.elapsed() < Duration::from_millis(5) {
                            std::hint::spin_loop();
                        }
                        let _canceller = canceller.cancel();
                        pending.await
                    }
                };
                if outcome.is_ok() {
                    by_a2.fetch_add(1, Ordering::SeqCst);
                }
                while !finished_a.load(Ordering::SeqCst) {
                    monoio::time::sleep(Duration::from_millis(1)).await;
                }
            });
        });
        // B arms its accept after A's: the wakeup goes to A.
        std::thread::sleep(Duration::from_millis(5));
        let (by_b2, finished_b) = (Arc::clone(&by_b), Arc::clone(&finished));
        let b = std::thread::spawn(move || {
            let mut rt = super::super::uring_runtime(super::super::UringFlags::DeferTaskrun).expect("io_uring");
            rt.block_on(async move {
                let l = TcpListener::from_std(lb).expect("listener");
                let stop = Drain::default();
                let watch = async {
                    while !finished_b.load(Ordering::SeqCst) {
                        monoio::time::sleep(Duration::from_millis(1)).await;
                    }
                };
                monoio::select! {
                    got = accept(&l, &stop) => {
                        if let Accepted::Connection(..) = got {
                            by_b2.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    _ = watch => {}
                }
            });
        });
        std::thread::sleep(Duration::from_millis(5));
        told.store(true, Ordering::SeqCst);
        let start = Instant::now();
        while !busy.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(1) {
            std::hint::spin_loop();
        }
        let _client = std::net::TcpStream::connect(addr).expect("connect");
        let start = Instant::now();
        while by_a.load(Ordering::SeqCst) + by_b.load(Ordering::SeqCst) == 0 && start.elapsed() < Duration::from_secs(1)
        {
            std::thread::sleep(Duration::from_micros(100));
        }
        finished.store(true, Ordering::SeqCst);
        a.join().expect("thread a");
        b.join().expect("thread b");
        match (by_a.load(Ordering::SeqCst), by_b.load(Ordering::SeqCst)) {
            (0, 0) => '-',
            (_, 0) => 'a',
            _ => 'b',
        }
    }

    #[test]
    fn a_connection_whose_wakeup_a_cancelled_accept_took_is_still_accepted() {
        if super::super::uring_runtime(super::super::UringFlags::DeferTaskrun).is_err() {
            eprintln!("SKIPPED: io_uring with DEFER_TASKRUN is not available here");
            return;
        }
        // Without the check, every trial left the connection queued (and with the client
        // connecting at random times around the stop instead, 60 of 200 did).
        let outcomes: String = (0..10).map(|_| trial()).collect();
        eprintln!("accepted by (a: the stopping accept, b: the other): {outcomes}");
        assert!(!outcomes.contains('-'), "a connection was left queued: {outcomes}");
    }
}
