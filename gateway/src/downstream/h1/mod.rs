//! One downstream HTTP/1.1 connection: read requests in order, turn each head into a
//! [`Request`], run the pipeline on it, write the answer.

mod answer;
mod forward;
mod park;
mod relay;
mod tunnel;

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::codec::body::{self, Side, Source};
use crate::codec::h1::{self, BodyFraming, HeadScratch, RequestHead, RequestLimits};
use crate::downstream::{LINGER, LINGER_BYTES};
use crate::pipeline::answer::Refusal;
use crate::pipeline::dispatch::{dispatch, Verdict};
use crate::pipeline::exchange::Exchange;
use crate::request::{Client, Request};
use crate::runtime::catch::{self, CatchUnwind};
use crate::runtime::idle_timer::Expiry;
use crate::runtime::io::{make_room, read_append_expiry};
use crate::runtime::stream::Stream;
use crate::worker::{Local, ParkedConn, Worker};

pub use forward::H1Forward;

/// On a drain (or a listener removed by a reload), how long a keep-alive connection must have
/// been idle before it is closed: a client that got its last response less than this ago may
/// have its next request on the way, and closing under it would lose that request (a reset when
/// it arrives after the close). Until then the connection waits, and a request that comes is
/// served with `Connection: close`.
pub const DRAIN_IDLE_GRACE: Duration = Duration::from_secs(2);

/// Largest request body a gateway-answered request (404, direct response, redirect) may carry
/// and still keep the connection: it is read and discarded. Larger ones close the connection.
const DISCARD_LIMIT: u64 = 64 * 1024;

/// The downstream side of a connection.
pub struct Conn {
    pub stream: Stream,
    pub client: Rc<Client>,
    /// Bytes read from the client; `rbuf[rpos..]` are not consumed yet (after a head: the
    /// start of its body, or the next request).
    pub rbuf: Vec<u8>,
    pub rpos: usize,
    /// Requests answered so far.
    pub served: u64,
    /// Accounting of the current request.
    pub ex: Exchange,
    /// Cancels the receive a busy connection waits in ([`armed_wait`]).
    canceller: monoio::io::Canceller,
}

/// A request head that was read, in storage of its own: the pipeline may wait (a rate-limit
/// delay, a queue for a slot) while the connection's read buffer moves on to the body.
pub struct Head {
    /// The head's bytes from `start`, as parsed.
    buf: Vec<u8>,
    start: usize,
    scratch: HeadScratch,
    pub head: RequestHead,
}

impl Head {
    /// The request view of this head.
    pub fn request<'a>(&'a self, client: &'a Client) -> Request<'a> {
        Request::h1(self.buf.get(self.start..).unwrap_or_default(), &self.head, &self.scratch, client)
    }

    fn give(self, worker: &Worker) {
        worker.buffers.give(self.buf);
        worker.give_scratch(self.scratch);
    }
}

/// How a connection's task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The connection is closed: the caller uncounts it.
    Closed,
    /// The idle connection was parked (see `park`): it is still open and counted, and a new
    /// task takes it up when its next request comes.
    Parked,
}

/// What happens to the connection after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    KeepAlive,
    Close,
}

impl Conn {
    /// Whether the connection must close after the current request.
    pub fn closing(&self) -> bool {
        self.client.closing()
    }
}

/// Serves an HTTP/1.1 connection until the client leaves, an error closes it, the worker
/// drains, or it is parked while idle. `initial` holds bytes already read from it (protocol
/// detection), possibly none.
pub fn serve(
    worker: &Rc<Worker>,
    stream: Stream,
    client: Rc<Client>,
    initial: Vec<u8>,
) -> impl std::future::Future<Output = Ended> + '_ {
    run(worker, stream, client, initial, Resume { served: 0, ended: None, ready: false })
}

/// Serves a parked connection again (see [`park`]); `ready`: its socket has bytes to read.
fn resume(
    worker: &Rc<Worker>,
    stream: Stream,
    idle: ParkedConn,
    ready: bool,
) -> impl std::future::Future<Output = Ended> + '_ {
    run(worker, stream, idle.client, Vec::new(), Resume { served: idle.served, ended: Some(idle.since), ready })
}

/// Where a connection's task takes up its connection: requests served so far, and
/// `ended` and `ready` as for [`serve_requests`].
struct Resume {
    served: u64,
    ended: Option<Instant>,
    ready: bool,
}

/// The connection's task. The connection is built here, not passed in: an async function's
/// argument is kept beside the local it is moved into, and `Conn` is large.
async fn run(worker: &Rc<Worker>, stream: Stream, client: Rc<Client>, initial: Vec<u8>, at: Resume) -> Ended {
    let mut conn = Conn {
        stream,
        client,
        rbuf: initial,
        rpos: 0,
        served: at.served,
        ex: Exchange::default(),
        canceller: Default::default(),
    };
    match serve_requests(worker, &mut conn, at.ended, at.ready).await {
        End::Parked => return Ended::Parked,
        End::Close => {}
        End::Reply(status) => {
            // A head that cannot be served: answered, and the connection closes.
            worker.stats.requests_rejected.inc();
            // Boxed: its write timeout would otherwise size every connection's task.
            Box::pin(reply_and_close(worker, &mut conn, status, &worker.local())).await;
            worker.stats.count_status(status);
        }
    }
    worker.buffers.give(std::mem::take(&mut conn.rbuf));
    if conn.closing() {
        // Boxed: only draining connections pay for its state.
        Box::pin(linger_close(worker, &mut conn.stream)).await;
    } else if conn.stream.is_tls() {
        // close_notify, so the client can tell a complete response from a truncated one.
        monoio::select! {
            _ = conn.stream.shutdown() => {}
            _ = worker.idle_timer.after(Duration::from_secs(1)) => {}
        }
    }
    Ended::Closed
}

/// Closes a connection the drain ends without a reset: shuts our side (TLS: close_notify),
/// then reads and discards what the client still sends until it closes its side, for at most
/// [`LINGER`] and [`LINGER_BYTES`]. A socket closed with unread data sends a reset, which can
/// destroy the end of the last response before the client read it.
async fn linger_close(worker: &Worker, stream: &mut Stream) {
    monoio::select! {
        _ = stream.shutdown() => {}
        _ = worker.idle_timer.after(Duration::from_secs(1)) => return,
    }
    let deadline = Instant::now() + LINGER;
    let mut sink = Vec::with_capacity(4096);
    let mut total = 0;
    while total < LINGER_BYTES {
        sink.clear();
        let read = monoio::select! {
            r = stream.read_append(sink) => r,
            _ = worker.idle_timer.at(deadline) => return,
        };
        match read {
            (Ok(n), buf) if n > 0 => {
                total += n;
                sink = buf;
            }
            _ => return,
        }
    }
}

/// Why [`serve_requests`] stopped.
enum End {
    Close,
    /// Close after answering a head that could not be served with this status.
    Reply(u16),
    /// Parked: the task ends, the connection stays open.
    Parked,
}

/// Serves requests until the connection closes or is parked. `ended`: when the previous
/// request ended (the idle timeout counts from there), if any; `ready`: bytes are waiting, read
/// them without waiting for readiness first.
async fn serve_requests(worker: &Rc<Worker>, conn: &mut Conn, mut ended: Option<Instant>, mut ready: bool) -> End {
    let mut parkable = true;
    loop {
        if conn.rpos >= conn.rbuf.len() {
            if ready {
                ready = false;
                conn.rbuf = worker.buffers.take();
                conn.rpos = 0;
            } else {
                match wait_for_request(worker, conn, ended, parkable).await {
                    Wait::Ready => {}
                    Wait::Close => return End::Close,
                    Wait::Park { since, deadline } => {
                        if park::park(worker, conn, since, deadline) {
                            return End::Parked;
                        }
                        // Not parked (its listener stopped meanwhile, or the registration
                        // failed): it waits on as a task, to the same deadline.
                        parkable = false;
                        ended = Some(since);
                        continue;
                    }
                }
            }
        }
        let local = worker.local();
        // Boxed, with the head moved in: the connection's task holds neither while it waits.
        // (No wait inside this match: its scrutinee, which holds a head, would be kept in
        // every connection's task across it.)
        let request = match read_head(worker, conn, &local).await {
            Ok(head) => crate::runtime::boxed(|| request(worker, conn, &local, head)),
            Err(HeadEnd::Close) => return End::Close,
            Err(HeadEnd::Reply(status)) => return End::Reply(status),
        };
        worker.stats.requests_total.inc();
        worker.stats.requests_active.inc();
        let next = match CatchUnwind::new(request).await {
            Ok(next) => next,
            Err(panic) => {
                // The request's state is gone (dropped with its future); the connection's own
                // is intact. Answer 500 if nothing was sent yet, then close: the request may
                // have left its body half read.
                worker.stats.panics_request.inc();
                tracing::error!(
                    worker = worker.id,
                    peer = %conn.client.peer,
                    panic = catch::message(&panic),
                    "a request panicked: answered 500 if possible, connection closed"
                );
                if conn.ex.status == 0 {
                    Box::pin(reply_and_close(worker, conn, 500, &local)).await;
                }
                Next::Close
            }
        };
        ended = Some(conn.ex.finish(worker, &local, conn.client.peer.ip()));
        worker.stats.requests_active.sub(1);
        conn.served += 1;
        // Only what the answer said: a drain that started after its head went out without
        // `Connection: close` must not close under a client about to reuse the connection (its
        // next request gets the `Connection: close`, see `stop_when_idle`).
        if next == Next::Close {
            return End::Close;
        }
    }
}

/// What the wait for the next request came to.
enum Wait {
    /// Bytes (or the client's end) are there; the read buffer is taken.
    Ready,
    Close,
    /// Idle for [`park::PARK_AFTER`]: park until `deadline` (the idle or header-read limit,
    /// counted from `since`).
    Park {
        since: Instant,
        deadline: Instant,
    },
}

/// Waits, without holding a buffer, until the client sends the first byte of a request.
/// `Close` when the connection should close (idle timeout, drain, client gone). `ended`: when
/// the previous request ended (read already; the wait's limit counts from then), if any. The
/// timeout is on the worker's coarse timer (`runtime::idle_timer`): an idle connection's task
/// holds no timer entry of its own. A plain connection (or TLS in completion mode) still idle
/// after [`park::PARK_AFTER`] (`parkable`, its listener not stopped, its limit further away)
/// comes back as `Park`.
async fn wait_for_request(worker: &Rc<Worker>, conn: &mut Conn, ended: Option<Instant>, parkable: bool) -> Wait {
    let buf = std::mem::take(&mut conn.rbuf);
    worker.buffers.give(buf);
    conn.rpos = 0;
    let timeouts = &worker.local().snap.config.server.timeouts;
    let limit = if conn.served == 0 { timeouts.header_read } else { timeouts.idle };
    // No clock read after a request: its end was read already.
    let since = ended.unwrap_or_else(Instant::now);
    let deadline = since.checked_add(limit).unwrap_or(since);
    let park_at = since.checked_add(park::PARK_AFTER).unwrap_or(since);
    if conn.stream.waits_by_reading() {
        let expiry = worker.idle_timer.at(deadline);
        return if wait_for_tls_request(worker, conn, expiry, ended).await { Wait::Ready } else { Wait::Close };
    }
    // On epoll: the next request may be there already (read it), or the driver learns that
    // the socket is drained, so the relaxed wait below sleeps without a system call. (The
    // readiness left by the last read is stale otherwise: a wait for real readiness asks the
    // kernel, twice when the bytes are not there yet.) io_uring polls for real either way.
    if let Some(tcp) = conn.stream.tcp_mut().filter(|_| monoio::utils::is_legacy()) {
        let mut buf = worker.buffers.take();
        match crate::runtime::io::try_read_append_now(tcp, &mut buf) {
            None => worker.buffers.give(buf),
            Some(Ok(n)) if n > 0 => {
                worker.stats.downstream_bytes_in.add(n as u64);
                conn.rbuf = buf;
                return Wait::Ready;
            }
            // The client closed, or the socket failed.
            Some(_) => {
                worker.buffers.give(buf);
                return Wait::Close;
            }
        }
    }
    let park = parkable && conn.stream.parks() && park_at < deadline && !conn.closing();
    if park
        && conn.served >= ARM_AFTER
        && !monoio::utils::is_legacy()
        && matches!(conn.stream, Stream::Tcp(_) | Stream::TlsUring(_))
    {
        // In a pooled box: its state (the receive, the timer's entry) would otherwise size
        // every connection's task, idle ones included.
        if let Some(wait) = crate::runtime::boxed(|| armed_wait(worker, conn, since, deadline, park_at, ended)).await {
            return wait;
        }
    }
    // One timer entry: the park time when the connection may park, else its deadline.
    let expiry = worker.idle_timer.at(if park { park_at } else { deadline });
    let first = conn.served == 0;
    let woke = monoio::select! {
        r = conn.stream.readable(true) => if r.is_ok() { Wait::Ready } else { Wait::Close },
        _ = expiry => if park { Wait::Park { since, deadline } } else { Wait::Close },
        _ = stop_when_idle(worker, &conn.client, first, ended) => Wait::Close,
    };
    if let Wait::Ready = woke {
        conn.rbuf = worker.buffers.take();
    }
    woke
}

/// Requests a connection must have sent before it waits for the next one in a receive
/// ([`armed_wait`]): a client in the middle of a run of requests, not one that sent one and
/// went quiet, nor one that never sent any.
const ARM_AFTER: u64 = 2;

/// The most connections of a worker waiting in a receive at once (each holds a pooled buffer:
/// 8 MiB); the others wait for readiness.
const MAX_ARMED_WAITS: usize = 512;

/// On io_uring, a plain connection that has served [`ARM_AFTER`] requests waits for the next
/// one in a receive into a pooled buffer instead of a readiness poll followed by a receive: one
/// ring operation and one turn of the event loop less per request. It holds the buffer only
/// until it would park ([`park::PARK_AFTER`]): then the receive is cancelled and the
/// connection parks as before, without one. A receive that completes as it is cancelled (the
/// request arrived meanwhile) is the request: nothing is lost. `None`: the worker has
/// [`MAX_ARMED_WAITS`] connections waiting so already, or a TLS connection holds a request's
/// bytes already (the caller waits for readiness, which returns at once then).
///
/// A TLS connection in completion mode waits the same way: what the receive brings is
/// ciphertext, handed to its session ([`UringTls::received`]); the request's plaintext is then
/// read from the session as after a readiness wait.
///
/// [`UringTls::received`]: crate::runtime::uring_tls::UringTls::received
async fn armed_wait(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    since: Instant,
    deadline: Instant,
    park_at: Instant,
    ended: Option<Instant>,
) -> Option<Wait> {
    use monoio::io::CancelableAsyncReadRent;
    let Conn { stream, canceller, client, .. } = conn;
    let tcp = match stream {
        Stream::Tcp(tcp) => tcp,
        Stream::TlsUring(tls) if !tls.buffered() => tls.tcp_mut(),
        _ => return None,
    };
    // Held until this wait ends, however it ends (its task may be dropped with it).
    let slot = worker.armed_waits.take(MAX_ARMED_WAITS)?;
    let buf = worker.buffers.take();
    let cap = buf.capacity();
    enum Woke<R> {
        Read(R),
        Park,
        Stop,
    }
    // The receive's future borrows the socket: dropped at the end of this block, before a TLS
    // session takes what it brought.
    let (got, otherwise) = {
        let read = tcp.cancelable_read(monoio::buf::SliceMut::new(buf, 0, cap), canceller.handle());
        let mut read = std::pin::pin!(read);
        let woke = monoio::select! {
            biased;
            r = &mut read => Woke::Read(r),
            _ = worker.idle_timer.at(park_at) => Woke::Park,
            _ = stop_when_idle(worker, client, false, ended) => Woke::Stop,
        };
        match woke {
            Woke::Read(r) => (r, Wait::Close),
            // Time to park, or the listener stopped: the receive is cancelled, and what it got
            // before the cancellation took is the next request.
            Woke::Park | Woke::Stop => {
                *canceller = std::mem::take(canceller).cancel();
                let r = read.await;
                let cancelled = matches!(&r.0, Err(e) if e.raw_os_error() == Some(libc::ECANCELED));
                let otherwise = match woke {
                    Woke::Park if cancelled => Wait::Park { since, deadline },
                    _ => Wait::Close,
                };
                (r, otherwise)
            }
        }
    };
    drop(slot);
    let (res, slice) = got;
    let mut buf = slice.into_inner();
    Some(match res {
        Ok(n) if n > 0 => {
            if let Stream::TlsUring(tls) = &mut conn.stream {
                // Ciphertext: the session takes it (a damaged record ends the connection, its
                // alert sent); the plaintext is read from the session into this buffer next, and
                // counted then.
                let taken = tls.received(buf.get(..n).unwrap_or_default()).await;
                buf.clear();
                if let Err(e) = taken {
                    tracing::debug!(peer = %conn.client.peer, error = %e, "a TLS client's records were refused");
                    worker.buffers.give(buf);
                    return Some(Wait::Close);
                }
            } else {
                worker.stats.downstream_bytes_in.add(n as u64);
            }
            conn.rbuf = buf;
            conn.rpos = 0;
            Wait::Ready
        }
        // Cancelled with nothing received (park), the client closed, the socket failed, or the
        // listener stopped (close).
        _ => {
            worker.buffers.give(buf);
            otherwise
        }
    })
}

/// Resolves when the listener has stopped and the connection has been idle for
/// [`DRAIN_IDLE_GRACE`] since its last request `ended`, except before a connection's first
/// request: a client that connected (its connection was accepted, maybe just before a drain)
/// always gets its first request answered, within the header-read timeout.
async fn stop_when_idle(worker: &Worker, client: &Client, first: bool, ended: Option<Instant>) {
    if first {
        std::future::pending::<()>().await;
    }
    client.listener.stop.wait().await;
    let since = ended.unwrap_or_else(Instant::now);
    worker.idle_timer.at(since + DRAIN_IDLE_GRACE).await;
}

/// TLS cannot report readability without decrypting, so an idle TLS connection waits in a read
/// into a small buffer (not a pooled one: idle connections should cost little memory).
async fn wait_for_tls_request(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    expiry: Expiry<'_>,
    ended: Option<Instant>,
) -> bool {
    let small = Vec::with_capacity(512);
    let first = conn.served == 0;
    let read = monoio::select! {
        r = conn.stream.read_append(small) => Some(r),
        _ = expiry => None,
        _ = stop_when_idle(worker, &conn.client, first, ended) => None,
    };
    match read {
        Some((Ok(n), bytes)) if n > 0 => {
            worker.stats.downstream_bytes_in.add(n as u64);
            let mut buf = worker.buffers.take();
            buf.extend_from_slice(&bytes);
            conn.rbuf = buf;
            true
        }
        _ => false,
    }
}

enum HeadEnd {
    Close,
    Reply(u16),
}

/// The limits of a request head.
fn limits(server: &gateway_config::Server) -> RequestLimits {
    RequestLimits {
        max_request_line: server.limits.max_request_line_bytes,
        max_header_bytes: server.limits.max_header_bytes,
        max_headers: server.limits.max_headers,
    }
}

/// Reads until a complete, valid request head is buffered at `conn.rbuf[conn.rpos..]`, and
/// takes it out of the read buffer: `conn.rpos` is then where its body (or the next request)
/// starts.
async fn read_head(worker: &Rc<Worker>, conn: &mut Conn, local: &Local) -> Result<Head, HeadEnd> {
    let server = &local.snap.config.server;
    let limits = limits(server);
    // On the worker's coarse timer: a monoio `Sleep` here would size every connection's task.
    let deadline = Instant::now() + server.timeouts.header_read;
    loop {
        // Taken for each parse and kept only by a complete head: a client that sends its head
        // slowly holds no field storage while it waits (nor does its task: the block ends it).
        {
            let mut scratch = worker.take_scratch(limits.max_headers);
            let parsed = h1::parse_request(conn.rbuf.get(conn.rpos..).unwrap_or_default(), &limits, &mut scratch);
            match parsed {
                Ok(Some(head)) => return Ok(take_head(worker, conn, head, scratch)),
                Err(e) => {
                    worker.give_scratch(scratch);
                    return Err(HeadEnd::Reply(e.status()));
                }
                Ok(None) => worker.give_scratch(scratch),
            }
        }
        if !make_room(&mut conn.rbuf, &mut conn.rpos, 1024, limits.max_header_bytes + 1) {
            return Err(HeadEnd::Reply(431));
        }
        let had_bytes = conn.rbuf.len() > conn.rpos;
        let expiry = worker.idle_timer.at(deadline);
        let (res, buf) = read_append_expiry(&mut conn.stream, std::mem::take(&mut conn.rbuf), expiry).await;
        conn.rbuf = buf;
        match res {
            Ok(0) => return Err(HeadEnd::Close),
            Ok(n) => worker.stats.downstream_bytes_in.add(n as u64),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                worker.stats.header_read_timeouts.inc();
                return Err(if had_bytes || conn.served == 0 { HeadEnd::Reply(408) } else { HeadEnd::Close });
            }
            Err(_) => return Err(HeadEnd::Close),
        }
    }
}

/// Moves a parsed head out of the read buffer, copying the smaller part: what follows the head
/// goes into a fresh buffer when it is no longer than the head (a request without a body: often
/// nothing, and then no buffer), else the head is copied out.
fn take_head(worker: &Worker, conn: &mut Conn, head: RequestHead, scratch: HeadScratch) -> Head {
    let end = conn.rpos + head.head_len;
    let tail = conn.rbuf.get(end..).unwrap_or_default();
    if tail.len() <= head.head_len {
        // Nothing follows a request without a body (most requests): the connection takes a
        // buffer again only once its next request arrives (`wait_for_request`).
        let mut next =
            if tail.is_empty() && head.body == BodyFraming::None { Vec::new() } else { worker.buffers.take() };
        next.extend_from_slice(tail);
        let buf = std::mem::replace(&mut conn.rbuf, next);
        let start = std::mem::replace(&mut conn.rpos, 0);
        Head { buf, start, scratch, head }
    } else {
        let mut buf = worker.buffers.take();
        buf.extend_from_slice(conn.rbuf.get(conn.rpos..end).unwrap_or_default());
        conn.rpos = end;
        Head { buf, start: 0, scratch, head }
    }
}

/// Runs the pipeline on one request and answers it, then gives its head's storage back.
async fn request(worker: &Rc<Worker>, conn: &mut Conn, local: &Rc<Local>, head: Head) -> Next {
    let next = handle(worker, conn, local, &head).await;
    head.give(worker);
    next
}

/// Runs the pipeline on one request and answers it.
pub(crate) async fn handle(worker: &Rc<Worker>, conn: &mut Conn, local: &Rc<Local>, head: &Head) -> Next {
    let server = &local.snap.config.server;
    let client = Rc::clone(&conn.client);
    let req = head.request(&client);
    conn.ex.begin(worker, &req, head.head.head_len, server.deadline_header.as_deref());
    if let Some(status) = check_body(worker, conn, &head.head, server.limits.max_body_bytes) {
        worker.stats.requests_rejected.inc();
        Box::pin(reply_and_close(worker, conn, status, local)).await;
        return Next::Close;
    }
    // Matched whole, with no wait inside the match's scrutinee: see `serve_requests`.
    let verdict = dispatch(worker, local, &req, &mut conn.ex).await;
    match verdict {
        Verdict::Proxy(fwd) => {
            let mut down = H1Forward { conn, head: &head.head, body_start: 0 };
            down.body_start = down.conn.rpos;
            crate::pipeline::forward::forward(worker, local, &mut down, &req, fwd).await
        }
        Verdict::Answer(answer) => answer::answer(worker, conn, local, &req, &head.head, answer).await,
    }
}

/// Refuses a body the head already tells is too large, or whose start (what came with the
/// head) is malformed or too large, before any upstream sees the request.
fn check_body(worker: &Worker, conn: &Conn, head: &RequestHead, max_body: u64) -> Option<u16> {
    match head.body {
        BodyFraming::Length(n) if n > max_body => Some(413),
        BodyFraming::Chunked => precheck_chunked(worker, conn, max_body),
        _ => None,
    }
}

/// Validates the part of a chunked body that arrived with the head, so that a malformed or
/// oversized body in a single write is refused before any upstream sees the request.
fn precheck_chunked(worker: &Worker, conn: &Conn, max_body: u64) -> Option<u16> {
    let buffered = conn.rbuf.get(conn.rpos..).unwrap_or_default();
    if buffered.is_empty() {
        return None;
    }
    let mut decoder = crate::codec::chunked::ChunkedDecoder::new();
    let mut out = worker.buffers.take();
    let result = decoder.decode(buffered, &mut out);
    let size = out.len() as u64;
    worker.buffers.give(out);
    match result {
        Err(_) => Some(400),
        Ok(_) if size > max_body => Some(413),
        Ok(_) => None,
    }
}

/// Reads and drops a request body of at most [`DISCARD_LIMIT`] bytes. False if the connection
/// must close (too large, malformed, timeout).
async fn discard_body(
    worker: &Rc<Worker>,
    conn: &mut Conn,
    framing: BodyFraming,
    server: &gateway_config::Server,
) -> bool {
    let source = match framing {
        BodyFraming::None => return true,
        BodyFraming::Length(n) => Source::Length(n),
        BodyFraming::Chunked => Source::Chunked,
    };
    let limits =
        body::Limits { max_bytes: DISCARD_LIMIT, read_timeout: server.timeouts.body_io, write_timeout: Duration::ZERO };
    let mut scratch = worker.buffers.take();
    let result = body::discard(
        Side { stream: &mut conn.stream, buf: &mut conn.rbuf, pos: &mut conn.rpos },
        source,
        &limits,
        &mut scratch,
    )
    .await;
    worker.buffers.give(scratch);
    result.is_ok()
}

/// Writes a gateway error response with `connection: close`.
pub async fn reply_and_close(worker: &Rc<Worker>, conn: &mut Conn, status: u16, local: &Local) {
    answer::write_refusal(worker, conn, local, &Refusal::status(status), true, false).await;
}
