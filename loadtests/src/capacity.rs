//! A capacity-limited origin for the overload benchmark: an HTTP/1.1 server that behaves like an
//! application server with a fixed worker pool (or, in the other [`Mode`]s, like one with no
//! limit whose latency grows with load or is noisy).
//!
//! In [`Mode::Pool`], at most `capacity` requests are in service at once, each for `service` (a
//! sleep); the others
//! wait in one unbounded FIFO queue, so an overloaded origin answers everything, ever later. A
//! request whose client gave up while it waited is still served (the answer then cannot be
//! written and is counted as unanswered), as a real worker pool does. With `halve_after`, the
//! capacity halves that long after the first request (see [`CapacityOrigin::reset`]).
//!
//! `GET /__stats` answers the [`CapacityStats`] as JSON and `GET /__reset` restarts them and the
//! halving clock; neither waits for a slot. Every other request gets `200` with the body `ok`.
//!
//! In [`Mode::LoadDependent`] and [`Mode::Noisy`] nothing queues: every request is in service
//! from its arrival, for a time the mode's model gives (see [`Mode`]); `capacity` and
//! `halve_after` are ignored and the stats report capacity 0.

mod conn;
mod gate;
mod model;

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use gate::CapacityStats;
pub use model::Mode;

use gate::Gate;
use model::ServiceModel;

/// How the origin serves.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityConfig {
    /// Requests in service at once (at least 1).
    pub capacity: usize,
    /// How long each request is in service (the median in [`Mode::Noisy`], the time without
    /// load in [`Mode::LoadDependent`]).
    pub service: Duration,
    /// Halve the capacity this long after the first request.
    pub halve_after: Option<Duration>,
    pub mode: Mode,
}

/// A running capacity-limited origin; it stops on [`CapacityOrigin::shutdown`] or when dropped.
pub struct CapacityOrigin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl CapacityOrigin {
    /// Binds `addr` (e.g. `127.0.0.1:0`) and starts serving.
    pub fn spawn(addr: &str, cfg: CapacityConfig) -> io::Result<CapacityOrigin> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            gate: if cfg.mode.limits_concurrency() {
                Gate::new(cfg.capacity, cfg.halve_after)
            } else {
                Gate::unlimited()
            },
            model: ServiceModel::new(cfg.service, &cfg.mode),
            conns: Mutex::new(Conns { closed: false, next_id: 0, streams: HashMap::new() }),
        });
        let acceptor = thread::Builder::new().name("capacity-accept".into()).spawn({
            let shared = Arc::clone(&shared);
            move || accept_loop(&listener, &shared)
        })?;
        Ok(CapacityOrigin { addr, shared, acceptor: Some(acceptor) })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the origin has seen since start or the last reset.
    pub fn stats(&self) -> CapacityStats {
        self.shared.gate.stats()
    }

    /// Restarts the statistics and the halving clock, as `GET /__reset` does.
    pub fn reset(&self) {
        self.shared.gate.reset();
    }

    /// Stops accepting, closes every connection, drops every queued request and waits for the
    /// accept thread (requests in service end within one service time).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        let streams = {
            let mut conns = self.shared.lock_conns();
            conns.closed = true;
            std::mem::take(&mut conns.streams)
        };
        self.shared.gate.close();
        for stream in streams.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // The accept thread is blocked in accept(2): a connection wakes it up to see `closed`.
        if TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
    }
}

impl Drop for CapacityOrigin {
    fn drop(&mut self) {
        self.stop();
    }
}

/// State shared by the accept thread, the connection threads and the handle.
struct Shared {
    gate: Gate,
    model: ServiceModel,
    conns: Mutex<Conns>,
}

struct Conns {
    closed: bool,
    next_id: u64,
    /// A handle on every open connection, to close it at shutdown.
    streams: HashMap<u64, TcpStream>,
}

impl Shared {
    fn lock_conns(&self) -> MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) if shared.lock_conns().closed => return,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = {
            let mut conns = shared.lock_conns();
            if conns.closed {
                return;
            }
            let Ok(handle) = stream.try_clone() else {
                continue;
            };
            conns.next_id += 1;
            let id = conns.next_id;
            conns.streams.insert(id, handle);
            id
        };
        let _ = stream.set_nodelay(true);
        // Small stacks: an overloaded origin holds a thread per queued request.
        let spawned = thread::Builder::new().name("capacity-conn".into()).stack_size(128 * 1024).spawn({
            let shared = Arc::clone(shared);
            move || {
                conn::serve(&shared, &stream);
                shared.lock_conns().streams.remove(&id);
            }
        });
        if spawned.is_err() {
            shared.lock_conns().streams.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests;
