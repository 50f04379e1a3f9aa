//! One connection of the generator and how sockets are opened.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::framing::ResponseReader;

/// A keep-alive connection and the request it is on.
pub struct Conn {
    pub sock: Option<Socket>,
    pub state: State,
    /// The next request this connection sends, or is sending (`k % connections` is its index).
    pub head: u64,
    /// `head` has been written (maybe partly: `written` bytes) and its answer is awaited.
    pub in_flight: bool,
    pub written: usize,
    /// The socket is watched for writability too (a connect or a write in progress).
    pub want_write: bool,
    /// When the connection was last free: connected, or its last answer read.
    pub free_since_ns: u64,
    pub reader: ResponseReader,
    /// Bytes read but not yet framed.
    pub buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Open,
    Connecting {
        since_ns: u64,
    },
    /// Closed; a connect starts when the head request is due.
    Down,
}

impl Conn {
    /// Closes the socket (which also takes it out of the epoll set) and forgets any partial
    /// answer; the connection is down until the next connect.
    pub fn close(&mut self) {
        self.sock = None;
        self.state = State::Down;
        self.in_flight = false;
        self.want_write = false;
        self.reader = ResponseReader::default();
        self.buf.clear();
    }
}

/// Connects before the run: blocking, with a timeout; the socket is then made non-blocking.
pub fn blocking_connect(addr: SocketAddr, timeout: Duration) -> io::Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.connect_timeout(&addr.into(), timeout)?;
    sock.set_tcp_nodelay(true)?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// Starts a non-blocking connect (TCP_NODELAY set); it completes when the socket is writable.
pub fn start_connect(addr: SocketAddr) -> io::Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_tcp_nodelay(true)?;
    match sock.connect(&addr.into()) {
        Ok(()) => Ok(sock),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(sock),
        Err(e) => Err(e),
    }
}
