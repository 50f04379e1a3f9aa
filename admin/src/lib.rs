//! The admin HTTP server: a small, strict HTTP/1.1 server on its own thread, never on a
//! data-path worker. One request per connection, bounded head size and I/O timeouts, so a
//! misbehaving admin client cannot hold it for long.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Largest admin request head accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// Largest admin request body accepted.
pub const MAX_BODY: usize = 64 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

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
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    dup: TcpListener,
}

impl AdminServer {
    pub fn start(address: SocketAddr, handler: Handler) -> io::Result<Self> {
        Self::from_listener(TcpListener::bind(address)?, handler)
    }

    /// Serves on a listening socket bound elsewhere (e.g. inherited from the previous process).
    pub fn from_listener(listener: TcpListener, handler: Handler) -> io::Result<Self> {
        listener.set_nonblocking(false)?;
        let address = listener.local_addr()?;
        let dup = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("gw-admin".into()).spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Acquire) {
                    break;
                }
                match conn {
                    Ok(stream) => serve(stream, &handler),
                    Err(e) => {
                        tracing::warn!(error = %e, "admin accept failed");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        })?;
        Ok(Self { address, stop, thread: Some(thread), dup })
    }

    /// The listening socket (a duplicate owned by this server), to hand to another process.
    pub fn listener(&self) -> &TcpListener {
        &self.dup
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shutdown();
        }
    }
}

fn serve(mut stream: TcpStream, handler: &Handler) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let response = match read_request(&mut stream) {
        Ok(Some(req)) => handler(&req),
        Ok(None) => return,
        Err(status) => Response::text(status, format!("{}\n", reason(status))),
    };
    let _ = write_response(&mut stream, &response);
}

/// Reads one request. `Ok(None)`: the peer closed without a request. `Err(status)`: refuse it.
fn read_request(stream: &mut impl Read) -> Result<Option<Request>, u16> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk).map_err(|_| 408u16)?;
        if n == 0 {
            return if buf.is_empty() { Ok(None) } else { Err(400) };
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(request) = parse_request(&buf)? {
            return Ok(Some(request));
        }
    }
}

/// Parses one request from the bytes read so far: its head and, per `Content-Length`, its body
/// (bytes past the body are ignored).
///
/// `Ok(None)`: the head or the body is incomplete and within limits; read more and call again
/// with the longer buffer. `Err(status)`: refuse the request with that status (400 malformed,
/// 413 body over [`MAX_BODY`], 431 head over [`MAX_HEAD`] or too many fields, 501
/// `Transfer-Encoding`). Never panics.
pub fn parse_request(buf: &[u8]) -> Result<Option<Request>, u16> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(head_len)) => head_len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(431),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(431),
        Err(_) => return Err(400),
    };
    let mut out = Request {
        method: req.method.unwrap_or_default().to_string(),
        path: String::new(),
        query: None,
        headers: req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
            .collect(),
        body: Vec::new(),
    };
    let target = req.path.unwrap_or("/");
    match target.split_once('?') {
        Some((p, q)) => {
            out.path = p.to_string();
            out.query = Some(q.to_string());
        }
        None => out.path = target.to_string(),
    }
    if out.header("transfer-encoding").is_some() {
        return Err(501);
    }
    let len: usize = match out.header("content-length") {
        Some(v) => v.trim().parse().map_err(|_| 400u16)?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(413);
    }
    let Some(body) = buf.get(head_len..).and_then(|rest| rest.get(..len)) else {
        return Ok(None);
    };
    out.body = body.to_vec();
    Ok(Some(out))
}

fn write_response(stream: &mut impl Write, r: &Response) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&r.body)?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn parse_request_waits_for_head_and_body_and_refuses_bad_input() {
        let full = b"POST /echo?x=1 HTTP/1.1\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhelloNEXT";
        for cut in 0..full.len() - 4 {
            assert_eq!(parse_request(&full[..cut]), Ok(None), "cut at {cut}");
        }
        let req = parse_request(full).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("incomplete"));
        assert_eq!((req.method.as_str(), req.path.as_str(), req.query.as_deref()), ("POST", "/echo", Some("x=1")));
        assert_eq!(req.header("x-a"), Some("b"));
        assert_eq!(req.body, b"hello");
        assert_eq!(parse_request(b"GARBAGE\r\n\r\n"), Err(400));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n"), Err(400));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"), Err(501));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ncontent-length: 65537\r\n\r\n"), Err(413));
        let mut big = b"GET / HTTP/1.1\r\nx: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        assert_eq!(parse_request(&big), Err(431));
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
