//! The admin server's event loop: one thread multiplexes every admin connection on non-blocking
//! sockets, so a client that connects and sends nothing, or half a request, holds one slot of
//! [`Limits::max_connections`] until [`Limits::request_timeout`] and delays no one else. A
//! complete request goes to a small pool of handler threads; the loop writes the answer back.
//! Connections over the limit are answered 503 and closed at once, never queued. After its answer
//! a connection lingers (its input read and dropped) until the client closes, for at most
//! [`LINGER`], so that a request the client sent meanwhile does not turn the close into a reset
//! that destroys the answer.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::http::{encode, error_response, parse_request};
use crate::{Handler, Limits, Request, Response};

/// A running event loop; [`Running::stop`] ends it and its handler threads.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    /// Serves `listener` (made non-blocking) on a new thread.
    pub(crate) fn spawn(listener: std::net::TcpListener, handler: Handler, limits: Limits) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (done_tx, done_rx) = mpsc::channel();
        let pool = Pool::start(handler, limits.handler_threads.max(1), done_tx, Arc::clone(&waker))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut event_loop = EventLoop {
            poll,
            listener,
            limits,
            conns: HashMap::new(),
            next_token: FIRST_CONNECTION,
            pool,
            done: done_rx,
            stop: Arc::clone(&stop),
            accept_retry: None,
            refused: Throttled::default(),
            accept_errors: Throttled::default(),
        };
        let thread = std::thread::Builder::new().name("gw-admin".into()).spawn(move || event_loop.run())?;
        Ok(Self { stop, waker, thread: Some(thread) })
    }

    /// Stops the loop and waits for it and for the handler threads (each finishes the request
    /// it is handling).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.thread.is_some()
    }
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONNECTION: usize = 2;
/// After an accept error (out of descriptors or memory), accepting is retried this much later.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// Refused connections and accept errors are logged at most this often, with a count.
const WARN_PERIOD: Duration = Duration::from_secs(60);
/// How long an answered connection waits for the client to close before it is closed anyway.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

struct EventLoop {
    poll: Poll,
    listener: TcpListener,
    limits: Limits,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    pool: Pool,
    /// Answers from the handler threads.
    done: Receiver<(Token, Response)>,
    stop: Arc<AtomicBool>,
    /// When accepting is retried after an error.
    accept_retry: Option<Instant>,
    refused: Throttled,
    accept_errors: Throttled,
}

struct Conn {
    stream: TcpStream,
    state: State,
    /// When the connection is closed (reading, writing); none while a handler runs.
    deadline: Option<Instant>,
}

enum State {
    Reading(Vec<u8>),
    Handling,
    Writing {
        out: Vec<u8>,
        written: usize,
    },
    /// Answered and shut down for writing: input is read and dropped until the client closes.
    Lingering,
}

/// What a connection needs next.
enum Step {
    Wait,
    Dispatch(Request),
    Respond(Response),
    Linger,
    Close,
}

impl EventLoop {
    fn run(&mut self) {
        let mut events = Events::with_capacity(256);
        while !self.stop.load(Ordering::Acquire) {
            let timeout = self.next_deadline().map(|d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(error = %e, "admin event loop failed; the admin port stops answering");
                return;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    token => self.ready(token),
                }
            }
            while let Ok((token, response)) = self.done.try_recv() {
                self.respond(token, response);
            }
            let now = Instant::now();
            if self.accept_retry.is_some_and(|t| t <= now) {
                self.accept_retry = None;
                self.accept();
            }
            self.expire(now);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.conns.values().filter_map(|c| c.deadline).chain(self.accept_retry).min()
    }

    /// Accepts every pending connection: registered while under the limit, answered 503 and
    /// closed over it.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let lingering = self.conns.values().filter(|c| matches!(c.state, State::Lingering)).count();
                    if self.conns.len() - lingering < self.limits.max_connections {
                        let deadline = Instant::now() + self.limits.request_timeout;
                        self.register(stream, State::Reading(Vec::new()), deadline);
                        continue;
                    }
                    self.refuse(stream, lingering);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    // Out of descriptors or memory: the connection stays in the backlog and no
                    // new readiness edge may come for it, so retry on a timer.
                    self.accept_errors.note(|n| tracing::warn!(error = %e, failures = n, "admin accept failed"));
                    self.accept_retry = Some(Instant::now() + ACCEPT_RETRY);
                    return;
                }
            }
        }
    }

    /// Answers 503 and lingers, or only closes when as many refused connections already linger.
    fn refuse(&mut self, mut stream: TcpStream, lingering: usize) {
        // Best effort on a fresh socket: the answer fits its send buffer.
        let _ = stream.write(&encode(&Response::text(503, "too many admin connections\n")));
        let _ = stream.shutdown(std::net::Shutdown::Write);
        if lingering < self.limits.max_connections {
            self.register(stream, State::Lingering, Instant::now() + LINGER);
        }
        self.refused.note(|n| {
            tracing::warn!(
                limit = self.limits.max_connections,
                refused = n,
                "admin connection limit reached: refusing connections"
            )
        });
    }

    fn register(&mut self, mut stream: TcpStream, state: State, deadline: Instant) {
        let token = Token(self.next_token);
        self.next_token = self.next_token.wrapping_add(1).max(FIRST_CONNECTION);
        if self.poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE).is_ok() {
            self.conns.insert(token, Conn { stream, state, deadline: Some(deadline) });
        }
    }

    fn ready(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        let step = match &mut conn.state {
            State::Reading(buf) => read(&mut conn.stream, buf),
            State::Handling => Step::Wait,
            State::Writing { out, written } => write(&mut conn.stream, out, written),
            State::Lingering => discard(&mut conn.stream),
        };
        self.step(token, step);
    }

    fn step(&mut self, token: Token, step: Step) {
        match step {
            Step::Wait => {}
            Step::Dispatch(request) => {
                if let Some(conn) = self.conns.get_mut(&token) {
                    conn.state = State::Handling;
                    conn.deadline = None;
                }
                if !self.pool.submit(token, request) {
                    self.respond(token, Response::text(503, "admin handlers stopped\n"));
                }
            }
            Step::Respond(response) => self.respond(token, response),
            Step::Linger => {
                if let Some(conn) = self.conns.get_mut(&token) {
                    let _ = conn.stream.shutdown(std::net::Shutdown::Write);
                    conn.state = State::Lingering;
                    conn.deadline = Some(Instant::now() + LINGER);
                    let step = discard(&mut conn.stream);
                    self.step(token, step);
                }
            }
            Step::Close => self.close(token),
        }
    }

    /// Starts writing `response` and closes the connection once it is written.
    fn respond(&mut self, token: Token, response: Response) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        conn.state = State::Writing { out: encode(&response), written: 0 };
        conn.deadline = Some(Instant::now() + self.limits.write_timeout);
        let step = match &mut conn.state {
            State::Writing { out, written } => write(&mut conn.stream, out, written),
            _ => Step::Close,
        };
        self.step(token, step);
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }

    /// Closes connections past their deadline; a partial request is answered 408 first.
    fn expire(&mut self, now: Instant) {
        let expired: Vec<(Token, bool)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| d <= now))
            .map(|(t, c)| (*t, matches!(&c.state, State::Reading(buf) if !buf.is_empty())))
            .collect();
        for (token, partial) in expired {
            if partial {
                self.respond(token, error_response(408));
                // A client that does not read its 408 gets no second full write timeout.
                if let Some(conn) = self.conns.get_mut(&token).filter(|c| matches!(c.state, State::Writing { .. })) {
                    conn.deadline = Some(now + self.limits.request_timeout.min(self.limits.write_timeout));
                }
            } else {
                self.close(token);
            }
        }
    }
}

/// Reads what the socket has; the next step once a request is complete or refused.
fn read(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Step {
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Step::Close,
            Ok(0) => return Step::Respond(error_response(400)),
            Ok(n) => {
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                match parse_request(buf) {
                    Ok(Some(request)) => return Step::Dispatch(request),
                    Ok(None) => {}
                    Err(status) => return Step::Respond(error_response(status)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
}

/// Writes what the socket takes; lingers once everything is written, closes if the peer is gone.
fn write(stream: &mut TcpStream, out: &[u8], written: &mut usize) -> Step {
    while let Some(rest) = out.get(*written..).filter(|r| !r.is_empty()) {
        match stream.write(rest) {
            Ok(0) => return Step::Close,
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
    Step::Linger
}

/// Reads and drops what the client still sends; closes once it has closed.
fn discard(stream: &mut TcpStream) -> Step {
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Step::Close,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
}

/// The handler threads: each takes a request, runs the handler (a panic becomes a 500) and
/// sends the answer back to the loop.
struct Pool {
    jobs: Option<Sender<(Token, Request)>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    fn start(handler: Handler, n: usize, done: Sender<(Token, Response)>, waker: Arc<Waker>) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<(Token, Request)>();
        let queue = Arc::new(Mutex::new(queue));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (queue, handler, done, waker) =
                (Arc::clone(&queue), Arc::clone(&handler), done.clone(), Arc::clone(&waker));
            let thread = std::thread::Builder::new()
                .name(format!("gw-admin-{i}"))
                .spawn(move || handle_jobs(&queue, &handler, &done, &waker))?;
            threads.push(thread);
        }
        Ok(Self { jobs: Some(jobs), threads })
    }

    /// Queues a request; `false` when no handler thread is left.
    fn submit(&self, token: Token, request: Request) -> bool {
        self.jobs.as_ref().is_some_and(|jobs| jobs.send((token, request)).is_ok())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.jobs.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn handle_jobs(
    queue: &Mutex<Receiver<(Token, Request)>>,
    handler: &Handler,
    done: &Sender<(Token, Response)>,
    waker: &Waker,
) {
    loop {
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok((token, request)) = job else { return };
        let response = std::panic::catch_unwind(AssertUnwindSafe(|| handler(&request))).unwrap_or_else(|_| {
            tracing::error!(method = %request.method, path = %request.path, "admin handler panicked");
            error_response(500)
        });
        if done.send((token, response)).is_err() {
            return;
        }
        let _ = waker.wake();
    }
}

/// Counts an event and runs `log` for the first one and then at most once per [`WARN_PERIOD`],
/// with the number of events since the last time.
#[derive(Default)]
struct Throttled {
    logged: Option<Instant>,
    since: u64,
}

impl Throttled {
    fn note(&mut self, log: impl FnOnce(u64)) {
        self.since += 1;
        let now = Instant::now();
        if self.logged.is_none_or(|t| now.duration_since(t) >= WARN_PERIOD) {
            log(self.since);
            self.logged = Some(now);
            self.since = 0;
        }
    }
}
