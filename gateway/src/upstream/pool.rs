//! A per-endpoint pool of idle keep-alive upstream connections, per worker.
//!
//! Connections are reused most-recently-used first (the warmest, least likely to have been
//! closed by the upstream) and expire after the idle timeout. A connection only enters the pool
//! after its previous response was read completely, so a reused connection is always in sync.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::armed::ArmedRead;
use super::{EndpointGauge, UpConn};
use crate::runtime::buffers::{BufferPool, Slots};

pub struct IdlePool {
    idle: RefCell<VecDeque<(UpConn, Instant)>>,
    max_idle: usize,
    idle_timeout: Duration,
    gauge: Arc<EndpointGauge>,
    /// Set by [`IdlePool::close_all`]: connections returned later are closed, not kept.
    closed: std::cell::Cell<bool>,
}

impl IdlePool {
    pub fn new(max_idle: usize, idle_timeout: Duration, gauge: Arc<EndpointGauge>) -> Self {
        Self { idle: RefCell::new(VecDeque::new()), max_idle, idle_timeout, gauge, closed: Default::default() }
    }

    fn publish(&self, idle: &VecDeque<(UpConn, Instant)>) {
        let n = idle.len() as u64;
        let old = self.gauge.idle.value();
        if n >= old {
            self.gauge.idle.add(n - old);
        } else {
            self.gauge.idle.sub(old - n);
        }
    }

    /// The most recently returned connection that has not expired by `now` (the caller's
    /// reading of the clock, taken as its try started). Connections dropped on the way because
    /// they are no longer idle (the upstream closed them or sent bytes meanwhile) are counted
    /// in `discarded`.
    pub fn take(&self, discarded: &crate::stats::Counter, now: Instant) -> Option<UpConn> {
        let mut idle = self.idle.borrow_mut();
        let mut found = None;
        while let Some((mut conn, since)) = idle.pop_back() {
            if now.duration_since(since) < self.idle_timeout {
                let idle_still = match conn.armed.as_mut() {
                    Some(armed) => match armed.completed() {
                        None => true,
                        // The receive completed while the connection was idle: whatever it
                        // brought (logged here), the connection is not idle any more.
                        Some((looked, _)) => {
                            let _ = still_idle_by(looked);
                            false
                        }
                    },
                    None => still_idle(&mut conn),
                };
                if !idle_still {
                    discarded.inc();
                    // Dropped: the next one is tried.
                    continue;
                }
                found = Some(conn);
                break;
            }
            // Everything older is expired too.
            drop(conn);
            idle.clear();
        }
        self.publish(&idle);
        found
    }

    /// Returns a connection whose last exchange completed cleanly. The oldest one is closed when
    /// the pool is full. On io_uring a plain-TCP connection is parked with its next response's
    /// receive submitted (into one of `buffers`' response buffers), while fewer than
    /// [`super::armed::MAX_ARMED`] of the worker's connections (`armed`) are and the worker has
    /// at most [`super::armed::ARM_UP_TO_OPEN`] connections open to the cluster.
    pub fn put(&self, mut conn: UpConn, buffers: &BufferPool, armed: &Slots) {
        if self.max_idle == 0 || self.closed.get() {
            return;
        }
        if conn.armed.is_none() && !monoio::utils::is_legacy() && conn.open() <= super::armed::ARM_UP_TO_OPEN {
            if let Some(tcp) = conn.stream.tcp_mut() {
                conn.armed = ArmedRead::arm(tcp, buffers, armed);
            }
        }
        let mut idle = self.idle.borrow_mut();
        if idle.len() >= self.max_idle {
            idle.pop_front();
        }
        idle.push_back((conn, Instant::now()));
        self.publish(&idle);
    }

    /// Closes expired connections (oldest first).
    pub fn evict_expired(&self) {
        let mut idle = self.idle.borrow_mut();
        let now = Instant::now();
        while idle.front().is_some_and(|(_, since)| now.duration_since(*since) >= self.idle_timeout) {
            idle.pop_front();
        }
        self.publish(&idle);
    }

    /// Closes every idle connection, and every connection returned from now on (the endpoint
    /// left its cluster).
    pub fn close_all(&self) {
        self.closed.set(true);
        let mut idle = self.idle.borrow_mut();
        idle.clear();
        self.publish(&idle);
    }

    pub fn len(&self) -> usize {
        self.idle.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether an idle plain-TCP connection is as it was put back: nothing has arrived on it since
/// (bytes there would be an answer nobody asked for, which the next request would otherwise
/// read as its own: a response queue poisoned by the upstream) and the upstream has not closed
/// it (a request sent on it would fail, or be retried). One non-blocking look for a byte, as
/// nginx and HAProxy watch their idle upstream connections for the same two events: on epoll a
/// receive through the driver, which also tells the driver the socket is drained, so the read
/// of the response waits for it instead of failing once first; on io_uring a peek (a ring
/// receive cannot be tried without waiting). TLS connections are not looked at here: a TLS 1.3
/// server may send session tickets at any time, and rustls reads those on the next read.
fn still_idle(conn: &mut UpConn) -> bool {
    let Some(tcp) = conn.stream.tcp_mut() else { return true };
    let looked = if monoio::utils::is_legacy() {
        let mut byte = [std::mem::MaybeUninit::uninit(); 1];
        crate::runtime::io::try_read_now(tcp, &mut byte).unwrap_or_else(|| Err(std::io::ErrorKind::WouldBlock.into()))
    } else {
        crate::runtime::peek::peek(tcp, &mut [0u8; 1])
    };
    still_idle_by(looked)
}

/// Whether a look at an idle connection (a receive that must not have found anything) says it
/// is still idle.
fn still_idle_by(looked: std::io::Result<usize>) -> bool {
    match looked {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
        Ok(0) => {
            tracing::debug!("an idle upstream connection was closed by the upstream; not reused");
            false
        }
        Ok(_) => {
            tracing::warn!(
                "an upstream sent bytes on an idle connection (an answer nobody asked for); connection closed"
            );
            false
        }
        Err(e) => {
            tracing::debug!(error = %e, "an idle upstream connection failed; not reused");
            false
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::cell::Cell;
    use std::io::Write;
    use std::rc::Rc;

    use super::*;
    use crate::runtime::buffers::{BufferPool, Slots};
    use crate::runtime::stream::Stream;
    use crate::upstream::armed::ARM_UP_TO_OPEN;

    /// An upstream connection (the gateway's end) counted as one of `open` to its cluster, and
    /// the upstream's end.
    fn conn(open: &Rc<Cell<usize>>) -> (UpConn, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (theirs, _) = listener.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        let tcp = monoio::net::TcpStream::from_std(ours).unwrap();
        (UpConn { stream: Stream::Tcp(tcp), armed: None, count: Rc::clone(open) }, theirs)
    }

    /// On io_uring an idle connection waits with its next receive submitted while its worker has
    /// few connections open to the cluster, and is peeked at when taken over
    /// [`ARM_UP_TO_OPEN`]. Either way, one the upstream sent bytes on while it was idle, or
    /// closed, is not reused.
    #[test]
    fn idle_connections_are_armed_only_while_few_are_open_and_checked_either_way() {
        let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer().build() else {
            eprintln!("skipped: io_uring is not available here");
            return;
        };
        rt.block_on(async {
            let (buffers, armed) = (BufferPool::new(8), Slots::default());
            let pool = IdlePool::new(8, Duration::from_secs(60), Arc::default());
            let discarded = crate::stats::Counter::default();
            for (open, arms) in [(1, true), (ARM_UP_TO_OPEN, true), (ARM_UP_TO_OPEN + 1, false)] {
                for upstream_does in ["nothing", "send", "close"] {
                    let count = Rc::new(Cell::new(open));
                    let (up, mut theirs) = conn(&count);
                    pool.put(up, &buffers, &armed);
                    let parked_armed = pool.idle.borrow().back().map(|(c, _)| c.armed.is_some());
                    assert_eq!(parked_armed, Some(arms), "{open} open");
                    match upstream_does {
                        "send" => theirs.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap(),
                        "close" => drop(theirs),
                        _ => {}
                    }
                    // Time for the bytes or the close to arrive, and for an armed receive's
                    // completion to be reaped.
                    monoio::time::sleep(Duration::from_millis(20)).await;
                    let before = discarded.value();
                    let taken = pool.take(&discarded, Instant::now());
                    let reused = upstream_does == "nothing";
                    assert_eq!(taken.is_some(), reused, "{open} open, the upstream did {upstream_does}");
                    assert_eq!(discarded.value() - before, u64::from(!reused), "{open} open, {upstream_does}");
                }
            }
        });
    }
}
