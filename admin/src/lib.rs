//! The admin HTTP server: a small, strict HTTP/1.1 server on its own threads, never on a
//! data-path worker, that a misbehaving client cannot starve. One event loop serves every
//! connection on non-blocking sockets, up to [`Limits::max_connections`] at once; a request must
//! arrive whole within [`Limits::request_timeout`] of the connect (an idle connection is then
//! closed, a partial one answered 408); a connection over the limit is answered 503 and closed at
//! once instead of waiting. Handlers run on a few threads of their own, so a slow endpoint
//! delays neither reading nor other endpoints. One request per connection, bounded head and body.

mod http;
mod server;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

pub use http::{parse_request, MAX_BODY, MAX_HEAD};

/// How much the admin server takes on at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once (reading, handled or being answered); more are answered 503
    /// and closed at once.
    pub max_connections: usize,
    /// From the connect to the whole request (head and body): an idle connection is closed
    /// then, a partial request answered 408.
    pub request_timeout: Duration,
    /// For writing the answer to a client that does not read it.
    pub write_timeout: Duration,
    /// Threads running handlers: this many slow handlers at once before others wait.
    pub handler_threads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 256,
            request_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(5),
            handler_threads: 2,
        }
    }
}

/// A parsed admin request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    pub query: Option<String>,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
        body.push(b'\n');
        Self { status, content_type: "application/json", body }
    }

    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self { status, content_type: "text/plain; charset=utf-8", body: body.into().into_bytes() }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A running admin server; stopped on [`AdminServer::stop`] or drop.
pub struct AdminServer {
    address: SocketAddr,
    running: server::Running,
    dup: TcpListener,
}

impl AdminServer {
    pub fn start(address: SocketAddr, handler: Handler) -> io::Result<Self> {
        Self::from_listener(TcpListener::bind(address)?, handler)
    }

    /// Serves on a listening socket bound elsewhere (e.g. inherited from the previous process).
    pub fn from_listener(listener: TcpListener, handler: Handler) -> io::Result<Self> {
        Self::from_listener_with(listener, handler, Limits::default())
    }

    /// As [`AdminServer::from_listener`], with other limits. The socket is made non-blocking
    /// (shared with every duplicate of it, as in a predecessor process serving it too).
    pub fn from_listener_with(listener: TcpListener, handler: Handler, limits: Limits) -> io::Result<Self> {
        let address = listener.local_addr()?;
        let dup = listener.try_clone()?;
        let running = server::Running::spawn(listener, handler, limits)?;
        Ok(Self { address, running, dup })
    }

    /// The listening socket (a duplicate owned by this server), to hand to another process.
    pub fn listener(&self) -> &TcpListener {
        &self.dup
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    pub fn stop(mut self) {
        self.running.stop();
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if self.running.is_running() {
            self.running.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect: {e}"));
        s.write_all(raw).unwrap_or_else(|e| panic!("write: {e}"));
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn server() -> AdminServer {
        let handler: Handler = Arc::new(|req: &Request| match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/healthz") => Response::text(200, "ok\n"),
            ("POST", "/echo") => Response { status: 200, content_type: "text/plain", body: req.body.clone() },
            _ => Response::text(404, "not found\n"),
        });
        AdminServer::start("127.0.0.1:0".parse().unwrap_or_else(|_| unreachable!()), handler)
            .unwrap_or_else(|e| panic!("start: {e}"))
    }

    #[test]
    fn serves_routes_bodies_and_refuses_bad_input() {
        let srv = server();
        let addr = srv.local_addr();
        assert!(get(addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, b"POST /echo HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello").ends_with("\r\n\r\nhello"));
        assert!(get(addr, b"GARBAGE\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(get(addr, b"POST /echo HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n").starts_with("HTTP/1.1 501"));
        assert!(get(addr, b"POST /echo HTTP/1.1\r\ncontent-length: 99999999\r\n\r\n").starts_with("HTTP/1.1 413"));
        let mut big = b"GET / HTTP/1.1\r\nx: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD + 10));
        assert!(get(addr, &big).starts_with("HTTP/1.1 431"));
        srv.stop();
    }
}
