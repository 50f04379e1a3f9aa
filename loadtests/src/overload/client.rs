//! One keep-alive HTTP/1.1 client connection with a deadline per exchange.
//!
//! A request that finds a reused connection closed by the server before any answer byte (the
//! usual keep-alive race) is sent once more on a fresh connection, as HTTP clients do for
//! idempotent requests. Any other failure, a timeout included, closes the connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// How one exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A complete answer with this status.
    Status(u16),
    /// The deadline passed first.
    TimedOut,
    /// No connection could be made.
    Connect,
    /// The connection failed or the answer was malformed.
    Io,
}

pub(crate) struct Client {
    addr: SocketAddr,
    conn: Option<TcpStream>,
    buf: Vec<u8>,
    /// Connections this client opened.
    pub(crate) opened: u64,
}

/// Why an attempt failed.
enum Failure {
    TimedOut,
    Connect,
    /// Nothing came back on a connection that may have been closed while idle.
    Stale,
    Io,
}

impl Client {
    pub(crate) fn new(addr: SocketAddr) -> Client {
        Client { addr, conn: None, buf: Vec::with_capacity(4096), opened: 0 }
    }

    /// Sends `request` (a complete request without a body) and reads the answer, all before
    /// `deadline`.
    pub(crate) fn exchange(&mut self, request: &[u8], deadline: Instant) -> Outcome {
        let reused = self.conn.is_some();
        let mut result = self.attempt(request, deadline);
        if reused && matches!(result, Err(Failure::Stale)) {
            self.conn = None;
            result = self.attempt(request, deadline);
        }
        match result {
            Ok((status, keep)) => {
                if !keep {
                    self.conn = None;
                }
                Outcome::Status(status)
            }
            Err(failure) => {
                self.conn = None;
                match failure {
                    Failure::TimedOut => Outcome::TimedOut,
                    Failure::Connect => Outcome::Connect,
                    Failure::Stale | Failure::Io => Outcome::Io,
                }
            }
        }
    }

    /// One try: (status, the connection stays usable).
    fn attempt(&mut self, request: &[u8], deadline: Instant) -> Result<(u16, bool), Failure> {
        let remaining = |now: Instant| deadline.checked_duration_since(now).filter(|d| !d.is_zero());
        if self.conn.is_none() {
            let timeout = remaining(Instant::now()).ok_or(Failure::TimedOut)?;
            let conn = TcpStream::connect_timeout(&self.addr, timeout).map_err(|e| match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::TimedOut,
                _ => Failure::Connect,
            })?;
            let _ = conn.set_nodelay(true);
            self.opened += 1;
            self.conn = Some(conn);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(Failure::Io);
        };
        let timeout = remaining(Instant::now()).ok_or(Failure::TimedOut)?;
        conn.set_write_timeout(Some(timeout)).map_err(|_| Failure::Io)?;
        conn.write_all(request).map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::TimedOut,
            _ => Failure::Stale,
        })?;
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            match frame(&self.buf) {
                Frame::Done { status, keep, len } => {
                    // A well-behaved server sends nothing unasked: extra bytes end the connection.
                    return Ok((status, keep && len == self.buf.len()));
                }
                Frame::Bad => return Err(Failure::Io),
                Frame::Partial { to_close } => {
                    let timeout = remaining(Instant::now()).ok_or(Failure::TimedOut)?;
                    conn.set_read_timeout(Some(timeout)).map_err(|_| Failure::Io)?;
                    match conn.read(&mut chunk) {
                        Ok(0) if to_close => {
                            return match frame_closed(&self.buf) {
                                Some(status) => Ok((status, false)),
                                None => Err(Failure::Io),
                            }
                        }
                        Ok(0) if self.buf.is_empty() => return Err(Failure::Stale),
                        Ok(0) => return Err(Failure::Io),
                        Ok(n) => self.buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                        Err(e) => {
                            return Err(match e.kind() {
                                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::TimedOut,
                                io::ErrorKind::ConnectionReset if self.buf.is_empty() => Failure::Stale,
                                _ => Failure::Io,
                            })
                        }
                    }
                    if self.buf.len() > MAX_HEAD.saturating_add(1 << 20) {
                        return Err(Failure::Io);
                    }
                }
            }
        }
    }
}

/// How far an answer in a buffer has arrived.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// Complete: `len` bytes, and whether the connection may be reused.
    Done {
        status: u16,
        keep: bool,
        len: usize,
    },
    /// More bytes needed; `to_close` when the body runs until the server closes.
    Partial {
        to_close: bool,
    },
    Bad,
}

/// Frames one answer at the start of `buf` (interim 1xx answers skipped).
fn frame(buf: &[u8]) -> Frame {
    let mut start = 0;
    loop {
        let rest = buf.get(start..).unwrap_or_default();
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if rest.len() > MAX_HEAD => return Frame::Bad,
            Ok(httparse::Status::Partial) => return Frame::Partial { to_close: false },
            Err(_) => return Frame::Bad,
        };
        let Some(status) = resp.code else {
            return Frame::Bad;
        };
        if (100..200).contains(&status) && status != 101 {
            start += head_len;
            continue;
        }
        let mut keep = resp.version == Some(1);
        let mut length: Option<usize> = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            let value = std::str::from_utf8(h.value).unwrap_or("").trim();
            if h.name.eq_ignore_ascii_case("content-length") {
                match value.parse() {
                    Ok(n) => length = Some(n),
                    Err(_) => return Frame::Bad,
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().ends_with("chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        keep = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        keep = true;
                    }
                }
            }
        }
        let body_start = start + head_len;
        let body = buf.get(body_start..).unwrap_or_default();
        let body_len = if status == 204 || status == 304 {
            Some(0)
        } else if chunked {
            match chunked_len(body) {
                Ok(len) => len,
                Err(()) => return Frame::Bad,
            }
        } else if let Some(n) = length {
            (body.len() >= n).then_some(n)
        } else {
            return Frame::Partial { to_close: true };
        };
        return match body_len {
            Some(n) => Frame::Done { status, keep, len: body_start + n },
            None => Frame::Partial { to_close: false },
        };
    }
}

/// The status of a body-until-close answer once the server has closed.
fn frame_closed(buf: &[u8]) -> Option<u16> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(_)) => resp.code,
        _ => None,
    }
}

/// The length of a complete chunked body at the start of `body` (trailers included), `None`
/// while incomplete.
fn chunked_len(body: &[u8]) -> Result<Option<usize>, ()> {
    let mut pos = 0;
    loop {
        let Some(line_end) = find_crlf(body, pos) else {
            return Ok(None);
        };
        let line = body.get(pos..line_end).ok_or(())?;
        let size_field = line.split(|&b| b == b';').next().unwrap_or_default();
        let size_text = std::str::from_utf8(size_field).map_err(|_| ())?.trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| ())?;
        pos = line_end + 2;
        if size == 0 {
            // Trailer fields, then an empty line.
            loop {
                let Some(end) = find_crlf(body, pos) else {
                    return Ok(None);
                };
                let empty = end == pos;
                pos = end + 2;
                if empty {
                    return Ok(Some(pos));
                }
            }
        }
        let data_end = pos.checked_add(size).ok_or(())?;
        if body.len() < data_end + 2 {
            return Ok(None);
        }
        if body.get(data_end..data_end + 2) != Some(b"\r\n".as_slice()) {
            return Err(());
        }
        pos = data_end + 2;
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let rest = buf.get(from..)?;
    rest.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;
    use std::time::Duration;

    use super::*;

    #[test]
    fn frames_content_length_chunked_and_until_close() {
        let cl = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        assert_eq!(frame(cl), Frame::Done { status: 200, keep: true, len: cl.len() });
        assert_eq!(frame(&cl[..cl.len() - 1]), Frame::Partial { to_close: false });
        let close = b"HTTP/1.1 503 x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(frame(close), Frame::Done { status: 503, keep: false, len: close.len() });
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nt: v\r\n\r\n";
        assert_eq!(frame(chunked), Frame::Done { status: 200, keep: true, len: chunked.len() });
        assert_eq!(frame(&chunked[..chunked.len() - 2]), Frame::Partial { to_close: false });
        let until_close = b"HTTP/1.0 200 OK\r\n\r\nabc";
        assert_eq!(frame(until_close), Frame::Partial { to_close: true });
        assert_eq!(frame_closed(until_close), Some(200));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(frame(interim), Frame::Done { status: 204, keep: true, len: interim.len() });
        assert_eq!(frame(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n"), Frame::Bad);
        assert_eq!(frame(b"garbage\r\n\r\n"), Frame::Bad);
        assert_eq!(frame(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"), Frame::Bad);
    }

    /// A server that answers each connection's requests with `answers`, in turn, then closes.
    fn server(answers: Vec<&'static [u8]>, delay: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let mut conn = conn.unwrap();
                let answers = answers.clone();
                thread::spawn(move || {
                    for answer in answers {
                        let mut buf = [0u8; 1024];
                        if conn.read(&mut buf).unwrap_or(0) == 0 {
                            return;
                        }
                        thread::sleep(delay);
                        let _ = conn.write_all(answer);
                    }
                });
            }
        });
        addr
    }

    const REQ: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

    #[test]
    fn reuses_the_connection_and_retries_once_when_it_was_closed() {
        // Each connection answers one request, then closes without saying so.
        let addr = server(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"], Duration::ZERO);
        let mut client = Client::new(addr);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(client.exchange(REQ, deadline), Outcome::Status(200));
        thread::sleep(Duration::from_millis(50));
        assert_eq!(client.exchange(REQ, deadline), Outcome::Status(200));
        assert_eq!(client.opened, 2);
    }

    #[test]
    fn keeps_a_connection_across_answers() {
        let ok: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        let addr =
            server(vec![ok, b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n", ok], Duration::ZERO);
        let mut client = Client::new(addr);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(client.exchange(REQ, deadline), Outcome::Status(200));
        assert_eq!(client.exchange(REQ, deadline), Outcome::Status(503));
        assert_eq!(client.exchange(REQ, deadline), Outcome::Status(200));
        assert_eq!(client.opened, 1);
    }

    #[test]
    fn times_out_at_the_deadline_and_drops_the_connection() {
        let addr = server(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"], Duration::from_millis(300));
        let mut client = Client::new(addr);
        let started = Instant::now();
        assert_eq!(client.exchange(REQ, started + Duration::from_millis(100)), Outcome::TimedOut);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(100) && took < Duration::from_millis(250), "{took:?}");
        assert!(client.conn.is_none());
        // A deadline already past times out without sending.
        assert_eq!(client.exchange(REQ, Instant::now()), Outcome::TimedOut);
    }

    #[test]
    fn a_refused_connection_is_a_connect_error() {
        let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let mut client = Client::new(addr);
        assert_eq!(client.exchange(REQ, Instant::now() + Duration::from_secs(1)), Outcome::Connect);
    }
}
