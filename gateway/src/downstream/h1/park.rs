//! Idle HTTP/1.1 connections leave their task: after [`PARK_AFTER`] without a request,
//! the socket goes to the worker's parking set (`runtime::park`) with what the connection must
//! remember (its client, requests served, when the last one ended), and the task ends. The
//! worker's parker task watches the set: a socket that becomes readable (or hangs up) gets a
//! new connection task, which reads its request at once; one whose idle deadline passes is
//! closed; on a drain or a reload that removed its listener, every parked connection of a
//! stopped listener gets its task back and closes as a waiting connection does (after the
//! drain's idle grace, answering a request that races it with `Connection: close`).
//!
//! A parked connection stays counted in `gateway_connections_active` (the connection limit
//! sees it) and is counted in `gateway_connections_parked`. A TLS connection in completion mode
//! (HTTP/1.1 on io_uring, `runtime::uring_tls`) parks too, its session kept beside the socket,
//! unless rustls holds bytes a read would return at once; the socket's readiness resumes it
//! as a plain one's does (a record that carries no request, a key update say, is read by the
//! resumed task, which then waits for the request within the header-read limit). Its idle
//! deadline closes it with close_notify. On the epoll driver TLS runs in poll mode, waiting for
//! a request in a read, and does not park.

use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::net::TcpStream;

use super::{Conn, Ended};
use crate::runtime::catch::CatchUnwind;
use crate::runtime::idle_timer::RESOLUTION;
use crate::runtime::stream::Stream;
use crate::runtime::uring_tls::{ParkedTls, UringTls};
use crate::worker::{ParkedConn, Worker};

/// How long a plain keep-alive connection waits for its next request as a task before it is
/// parked (the coarse timer adds up to two of its ticks). A client that sends its requests back
/// to back never pays for parking; one that pauses longer pays an epoll registration and a
/// task spawn once per pause.
pub const PARK_AFTER: Duration = Duration::from_millis(200);

/// Parks the connection's socket until its next request, its idle `deadline` or a stop. True:
/// parked, `conn.stream` is detached and the task must end without closing or uncounting the
/// connection. False: not parked (poll-mode TLS, rustls holding bytes, a stopped listener, or
/// the registration failed), `conn` unchanged.
/// `since`: when the wait for the next request started counting (its limit's origin).
pub(super) fn park(worker: &Rc<Worker>, conn: &mut Conn, since: Instant, deadline: Instant) -> bool {
    // A stopped listener's connections wait as tasks (the drain's idle grace, `stop_when_idle`).
    if conn.closing() {
        return false;
    }
    if !conn.stream.parks() {
        return false;
    }
    let (tcp, tls) = match std::mem::replace(&mut conn.stream, Stream::Detached) {
        Stream::Tcp(tcp) => (tcp, None),
        Stream::TlsUring(s) => match s.park() {
            Ok((tcp, tls)) => (tcp, Some(Box::new(tls))),
            Err(s) => {
                conn.stream = Stream::TlsUring(s);
                return false;
            }
        },
        other => {
            conn.stream = other;
            return false;
        }
    };
    let item = ParkedConn { client: Rc::clone(&conn.client), served: conn.served, since, tls };
    match worker.parked.park(tcp, deadline, item) {
        Ok(()) => {
            worker.stats.connections_parked.inc();
            if !worker.parker_running.replace(true) {
                monoio::spawn(parker(Rc::clone(worker)));
            }
            true
        }
        Err((tcp, item)) => {
            conn.stream = whole(tcp, item.tls);
            false
        }
    }
}

/// The worker's parker: resumes parked connections whose socket is ready, closes those whose
/// deadline passed, and resumes those of stopped listeners. Ends when nothing is parked.
async fn parker(worker: Rc<Worker>) {
    let mut out = Vec::new();
    let mut listeners_version = worker.listeners_version.get();
    let mut drain_seen = false;
    let mut ready = std::pin::pin!(worker.parked.ready());
    while !worker.parked.is_empty() {
        let woken = monoio::select! {
            _ = &mut ready => true,
            _ = worker.idle_timer.after(RESOLUTION) => false,
        };
        if woken {
            ready.set(worker.parked.ready());
        }
        worker.parked.take_ready(&mut out);
        for (tcp, idle) in out.drain(..) {
            resume(&worker, tcp, idle, true);
        }
        worker.parked.take_expired(Instant::now(), &mut out);
        for (tcp, mut idle) in out.drain(..) {
            // The idle timeout: closed as a waiting connection is (plain TCP: no goodbye; TLS:
            // close_notify, sent by a task of its own).
            worker.stats.connections_parked.sub(1);
            match idle.tls.take() {
                Some(tls) => {
                    monoio::spawn(close_tls(Rc::clone(&worker), whole(tcp, Some(tls))));
                }
                None => {
                    drop(tcp);
                    worker.stats.connections_active.sub(1);
                    worker.connection_closed();
                }
            }
        }
        // A drain, or a reload (which may have removed listeners): stopped listeners'
        // connections get their task back. Nothing parks once its listener stopped.
        let version = worker.listeners_version.get();
        let drained = worker.drain.is_triggered();
        if version != listeners_version || (drained && !drain_seen) {
            listeners_version = version;
            drain_seen = drained;
            worker.parked.take_where(|idle| idle.client.closing(), &mut out);
            for (tcp, idle) in out.drain(..) {
                resume(&worker, tcp, idle, false);
            }
        }
    }
    worker.parker_running.set(false);
}

/// Gives a parked connection a task again; `ready`: its socket has bytes (or an end) to read.
fn resume(worker: &Rc<Worker>, tcp: TcpStream, idle: ParkedConn, ready: bool) {
    worker.stats.connections_parked.sub(1);
    monoio::spawn(resumed(Rc::clone(worker), tcp, idle, ready));
}

/// The stream of a parked connection, whole again.
fn whole(tcp: TcpStream, tls: Option<Box<ParkedTls>>) -> Stream {
    match tls {
        Some(tls) => Stream::TlsUring(Box::new(UringTls::unpark(tcp, *tls))),
        None => Stream::Tcp(tcp),
    }
}

/// Closes a parked TLS connection whose idle deadline passed: close_notify (for at most a
/// second, as a waiting connection's close), then the socket.
async fn close_tls(worker: Rc<Worker>, mut stream: Stream) {
    monoio::select! {
        _ = stream.shutdown() => {}
        _ = worker.idle_timer.after(Duration::from_secs(1)) => {}
    }
    drop(stream);
    worker.stats.connections_active.sub(1);
    worker.connection_closed();
}

/// A resumed connection's task, inside a panic boundary like an accepted one's.
async fn resumed(worker: Rc<Worker>, tcp: TcpStream, mut idle: ParkedConn, ready: bool) {
    let peer = idle.client.peer;
    let stream = whole(tcp, idle.tls.take());
    let serve = super::resume(&worker, stream, idle, ready);
    match CatchUnwind::new(serve).await {
        Ok(Ended::Parked) => return,
        Ok(Ended::Closed) => {}
        Err(panic) => crate::downstream::accept::connection_panicked(&worker, peer, &panic),
    }
    worker.stats.connections_active.sub(1);
    worker.connection_closed();
}
