//! The event loop: the schedule, the connections and their requests, on one thread.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

use super::conn::{blocking_connect, start_connect, Conn, State};
use super::framing::{Response, ResponseReader};
use super::poller::{self, Event, Poller};
use super::report::{Params, Recorder, Report};
use super::schedule::Schedule;
use super::{Config, RunError};

const READ_CHUNK: usize = 64 * 1024;

/// The whole run's state.
pub struct Engine<'a> {
    cfg: &'a Config,
    sched: Schedule,
    poller: Poller,
    conns: Vec<Conn>,
    request: Vec<u8>,
    start: Instant,
    timeout_ns: u64,
    /// Requests `0..total` are scheduled; `first_measured..total` are recorded.
    total: u64,
    first_measured: u64,
    /// Requests below this index are due and their connection has been told.
    released: u64,
    /// Requests not yet answered or failed; the run ends at 0.
    unresolved: u64,
    /// The earliest time a request or a connect can time out (checked then, not before).
    next_sweep_ns: u64,
    rec: Recorder,
    scratch: Box<[u8]>,
    events: Vec<Event>,
}

/// How a request ended, short of an answer.
#[derive(Debug, Clone, Copy)]
enum Failure {
    Connect,
    Read,
    Timeout,
}

impl<'a> Engine<'a> {
    /// Opens every connection (blocking, with the timeout); the clock starts after.
    pub fn connect(cfg: &'a Config) -> Result<Engine<'a>, RunError> {
        let poller = Poller::new(cfg.connections.min(1024)).map_err(RunError::Io)?;
        let sched = Schedule::new(cfg.rate, cfg.connections);
        let mut conns = Vec::with_capacity(cfg.connections);
        for c in 0..cfg.connections {
            let addr = cfg.target.addr;
            let sock = blocking_connect(addr, cfg.timeout).map_err(|source| RunError::Unreachable { addr, source })?;
            poller.add(sock.as_raw_fd(), c as u64, false).map_err(RunError::Io)?;
            conns.push(Conn {
                sock: Some(sock),
                state: State::Open,
                head: sched.first_on(c),
                in_flight: false,
                written: 0,
                want_write: false,
                free_since_ns: 0,
                reader: ResponseReader::default(),
                buf: Vec::new(),
            });
        }
        let (warmup_ns, end_ns) = (nanos(cfg.warmup), nanos(cfg.warmup + cfg.duration));
        let (first_measured, total) = (sched.count_before(warmup_ns), sched.count_before(end_ns));
        Ok(Engine {
            cfg,
            sched,
            poller,
            conns,
            request: cfg.request(),
            start: Instant::now(),
            timeout_ns: nanos(cfg.timeout),
            total,
            first_measured,
            released: 0,
            unresolved: total,
            next_sweep_ns: 0,
            rec: Recorder::new(total - first_measured),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            events: Vec::with_capacity(cfg.connections.min(1024)),
        })
    }

    /// Runs the schedule to its end and until every request is answered or failed.
    pub fn run(mut self) -> Result<Report, RunError> {
        poller::tighten_timer_slack();
        self.start = Instant::now();
        let end_ns = nanos(self.cfg.warmup + self.cfg.duration);
        // Every request ends by its due time plus the timeout; the margin only guards the loop.
        let give_up_ns = end_ns.saturating_add(self.timeout_ns).saturating_add(5_000_000_000);
        while self.unresolved > 0 {
            let now = self.now_ns();
            if now > give_up_ns {
                return Err(RunError::Io(io::Error::other("requests left unresolved after the timeout")));
            }
            while self.released < self.total && self.sched.due_ns(self.released) <= now {
                let c = self.sched.connection(self.released);
                if self.released >= self.first_measured {
                    self.rec.timer_lag(now.saturating_sub(self.sched.due_ns(self.released)));
                }
                self.released += 1;
                self.service(c);
            }
            if now >= self.next_sweep_ns {
                self.sweep(now);
            }
            let mut wake = self.next_sweep_ns;
            if self.released < self.total {
                wake = wake.min(self.sched.due_ns(self.released));
            }
            if self.unresolved == 0 {
                break;
            }
            let timeout = std::time::Duration::from_nanos(wake.saturating_sub(self.now_ns()));
            let mut events = std::mem::take(&mut self.events);
            events.clear();
            events.extend(self.poller.wait(Some(timeout)).map_err(RunError::Io)?);
            for ev in &events {
                self.on_event(*ev);
            }
            self.events = events;
        }
        let params = Params {
            target: self.cfg.url.clone(),
            rate: self.cfg.rate,
            connections: self.cfg.connections,
            duration_s: self.cfg.duration.as_secs_f64(),
            warmup_s: self.cfg.warmup.as_secs_f64(),
        };
        Ok(self.rec.finish(params, nanos(self.cfg.warmup), end_ns))
    }

    /// Moves connection `c` forward: drops its overdue unsent requests, sends its head request
    /// if due and the connection is free, or starts a connect for it.
    fn service(&mut self, c: usize) {
        loop {
            let now = self.now_ns();
            let Some(conn) = self.conns.get(c) else { return };
            let (head, state, in_flight) = (conn.head, conn.state, conn.in_flight);
            if head >= self.total || in_flight || self.sched.due_ns(head) > now {
                return;
            }
            if self.sched.due_ns(head).saturating_add(self.timeout_ns) <= now {
                self.fail_head(c, Failure::Timeout);
                continue;
            }
            match state {
                State::Open => return self.send(c, now),
                State::Connecting { .. } => return,
                State::Down => {
                    if self.open(c, now).is_err() {
                        self.fail_head(c, Failure::Connect);
                        continue;
                    }
                    return;
                }
            }
        }
    }

    fn send(&mut self, c: usize, now: u64) {
        let Some(conn) = self.conns.get_mut(c) else { return };
        let due = self.sched.due_ns(conn.head);
        if conn.head >= self.first_measured && conn.free_since_ns <= due {
            self.rec.send_lag(now.saturating_sub(due));
        }
        conn.in_flight = true;
        conn.written = 0;
        self.write_more(c);
    }

    /// Writes the rest of the in-flight request; waits for writability if the socket is full.
    fn write_more(&mut self, c: usize) {
        let Some(conn) = self.conns.get_mut(c) else { return };
        let Some(sock) = conn.sock.as_ref() else { return };
        let mut sock_ref = sock;
        // Answered before it was fully written (an early error answer): the rest is not sent.
        while conn.in_flight && conn.written < self.request.len() {
            match sock_ref.write(self.request.get(conn.written..).unwrap_or_default()) {
                Ok(n) => conn.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !conn.want_write {
                        conn.want_write = self.poller.modify(sock.as_raw_fd(), c as u64, true).is_ok();
                    }
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail_head_and_reopen(c, Failure::Read),
            }
        }
        if conn.want_write {
            conn.want_write = self.poller.modify(sock.as_raw_fd(), c as u64, false).is_err();
        }
    }

    fn on_event(&mut self, ev: Event) {
        let c = usize::try_from(ev.token).unwrap_or(usize::MAX);
        let Some(conn) = self.conns.get(c) else { return };
        match conn.state {
            State::Connecting { .. } if ev.writable || ev.failed => self.connected(c),
            State::Open if ev.readable || ev.failed => self.read(c),
            State::Open if ev.writable => self.write_more(c),
            _ => {}
        }
    }

    /// A non-blocking connect finished, or failed.
    fn connected(&mut self, c: usize) {
        let now = self.now_ns();
        let Some(conn) = self.conns.get_mut(c) else { return };
        let Some(sock) = conn.sock.as_ref() else { return };
        let failed = !matches!(sock.take_error(), Ok(None));
        if !failed && sock.peer_addr().is_err() {
            return; // still in progress: a stale event from the connection's previous socket
        }
        if failed {
            conn.close();
            if conn.head < self.total && self.sched.due_ns(conn.head) <= now {
                self.fail_head(c, Failure::Connect);
            }
            return self.service(c);
        }
        conn.state = State::Open;
        conn.free_since_ns = now;
        conn.want_write = self.poller.modify(sock.as_raw_fd(), c as u64, false).is_err();
        self.service(c);
    }

    fn read(&mut self, c: usize) {
        let Some(conn) = self.conns.get_mut(c) else { return };
        let Some(mut sock) = conn.sock.as_ref() else { return };
        let n = match sock.read(&mut self.scratch) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => return,
            Err(_) if conn.in_flight => return self.fail_head_and_reopen(c, Failure::Read),
            Err(_) => return self.reopen(c),
        };
        let now = nanos(self.start.elapsed());
        if n == 0 {
            if !conn.in_flight {
                return self.reopen(c); // the server closed an idle keep-alive connection
            }
            return match conn.reader.eof() {
                Ok(resp) => self.answered(c, resp, now),
                Err(_) => self.fail_head_and_reopen(c, Failure::Read),
            };
        }
        if !conn.in_flight {
            return self.reopen(c); // bytes nobody asked for
        }
        let fresh = self.scratch.get(..n).unwrap_or_default();
        let framed = if conn.buf.is_empty() {
            conn.reader.feed(fresh).map(|(used, resp)| {
                conn.buf.extend_from_slice(fresh.get(used..).unwrap_or_default());
                resp
            })
        } else {
            conn.buf.extend_from_slice(fresh);
            conn.reader.feed(&conn.buf).map(|(used, resp)| {
                conn.buf.drain(..used);
                resp
            })
        };
        match framed {
            Ok(None) => {}
            Ok(Some(resp)) if conn.buf.is_empty() => self.answered(c, resp, now),
            // An answer followed by bytes nobody asked for: count the answer, drop the connection.
            Ok(Some(resp)) => self.answered(c, Response { close: true, ..resp }, now),
            Err(_) => self.fail_head_and_reopen(c, Failure::Read),
        }
    }

    /// The head request's answer is complete.
    fn answered(&mut self, c: usize, resp: Response, now: u64) {
        let Some(conn) = self.conns.get_mut(c) else { return };
        let k = conn.head;
        let latency = now.saturating_sub(self.sched.due_ns(k));
        if k >= self.first_measured {
            if latency > self.timeout_ns {
                // Read after its deadline, before a sweep saw it: a timeout all the same.
                self.rec.timeout();
            } else {
                self.rec.answer(resp.status, latency, now);
            }
        }
        conn.in_flight = false;
        conn.head = self.sched.next_on_same(k);
        conn.free_since_ns = now;
        self.unresolved -= 1;
        // An answer before the whole request was written leaves the stream out of step: reopen.
        if resp.close || conn.written < self.request.len() {
            self.reopen(c);
        } else {
            self.service(c);
        }
    }

    /// Counts the head request as failed and moves on to the connection's next one.
    fn fail_head(&mut self, c: usize, failure: Failure) {
        let Some(conn) = self.conns.get_mut(c) else { return };
        if conn.head >= self.total {
            return;
        }
        if conn.head >= self.first_measured {
            match failure {
                Failure::Connect => self.rec.connect_error(),
                Failure::Read => self.rec.read_error(),
                Failure::Timeout => self.rec.timeout(),
            }
        }
        conn.in_flight = false;
        conn.head = self.sched.next_on_same(conn.head);
        self.unresolved -= 1;
    }

    fn fail_head_and_reopen(&mut self, c: usize, failure: Failure) {
        self.fail_head(c, failure);
        self.reopen(c);
    }

    /// Closes the connection and opens a new one at once if it has requests left.
    fn reopen(&mut self, c: usize) {
        let now = self.now_ns();
        let Some(conn) = self.conns.get_mut(c) else { return };
        conn.close();
        if conn.head < self.total {
            let _ = self.open(c, now);
            self.service(c);
        }
    }

    /// Starts a non-blocking connect; on an immediate failure the connection stays down.
    fn open(&mut self, c: usize, now: u64) -> io::Result<()> {
        let Some(conn) = self.conns.get_mut(c) else { return Ok(()) };
        let sock = start_connect(self.cfg.target.addr)?;
        self.poller.add(sock.as_raw_fd(), c as u64, true)?;
        conn.sock = Some(sock);
        conn.want_write = true;
        conn.state = State::Connecting { since_ns: now };
        self.next_sweep_ns = self.next_sweep_ns.min(now.saturating_add(self.timeout_ns));
        Ok(())
    }

    /// Times out what is overdue, then schedules the next sweep at the earliest deadline.
    fn sweep(&mut self, now: u64) {
        let mut next = u64::MAX;
        for c in 0..self.conns.len() {
            let Some(conn) = self.conns.get(c) else { continue };
            if let State::Connecting { since_ns } = conn.state {
                if since_ns.saturating_add(self.timeout_ns) <= now {
                    let due = self.sched.due_ns(conn.head) <= now;
                    if let Some(conn) = self.conns.get_mut(c) {
                        conn.close();
                    }
                    if due {
                        self.fail_head(c, Failure::Connect);
                    }
                }
            }
            let Some(conn) = self.conns.get(c) else { continue };
            if conn.in_flight && self.sched.due_ns(conn.head).saturating_add(self.timeout_ns) <= now {
                self.fail_head_and_reopen(c, Failure::Timeout);
            }
            self.service(c);
            let Some(conn) = self.conns.get(c) else { continue };
            if conn.head < self.total {
                next = next.min(self.sched.due_ns(conn.head).saturating_add(self.timeout_ns));
            }
            if let State::Connecting { since_ns } = conn.state {
                next = next.min(since_ns.saturating_add(self.timeout_ns));
            }
        }
        self.next_sweep_ns = next;
    }

    fn now_ns(&self) -> u64 {
        nanos(self.start.elapsed())
    }
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
