//! Shared helpers of the end-to-end tests: start the real gateway on 127.0.0.1:0 with a real
//! origin, and talk to it over raw sockets.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub mod clients;
pub mod flaky;
pub mod h2origin;
pub mod h2raw;
pub mod process;
pub mod tls;

pub use loadtests::origin::{Origin, OriginConfig};

pub const DRIVERS: [&str; 2] = ["io_uring", "epoll"];

/// Runs `f` once per I/O driver.
pub fn each_driver(f: impl Fn(&str)) {
    for d in DRIVERS {
        f(d);
    }
}

/// A gateway started in-process from TOML text, with `{driver}` and `{origin}` substituted.
pub struct TestGateway {
    pub gw: Option<gateway::Gateway>,
    pub addr: SocketAddr,
}

impl TestGateway {
    pub fn start(toml: &str) -> Self {
        let config = gateway_config::parse(toml, "<test>").unwrap_or_else(|e| panic!("test config invalid:\n{e}"));
        let gw = gateway::Gateway::start(config).unwrap_or_else(|e| panic!("gateway start: {e}"));
        let addr = gw.listener_addr("main").expect("listener named main");
        Self { gw: Some(gw), addr }
    }

    pub fn stats(&self) -> serde_json::Value {
        self.gw.as_ref().expect("running").stats_json()
    }

    pub fn total(&self, name: &str) -> u64 {
        self.stats()["totals"][name].as_u64().unwrap_or(0)
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(gw) = self.gw.take() {
            gw.shutdown();
        }
    }
}

/// The standard test config: one worker, listener `main`, a proxy route to `origin` and the
/// extra routes/settings given.
pub fn config(driver: &str, origin: SocketAddr, server_extra: &str, routes: &str) -> String {
    format!(
        r#"
[server]
workers = 1
io_driver = "{driver}"
admin = false
drain_timeout = "5s"
log_level = "warn"
{server_extra}

[[listeners]]
name = "main"
address = "127.0.0.1:0"

{routes}

[[routes]]
name = "default"
cluster = "origin"
timeout = "2s"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]
connect_timeout = "1s"
"#
    )
}

/// An endpoint whose SYNs go unanswered, like a host gone behind a firewall: a listener with
/// backlog 0 whose accept queue is filled and never accepted, so the kernel drops every further
/// SYN and a connect to it waits until the connecting side gives up.
pub struct Unreachable {
    pub addr: SocketAddr,
    _listener: socket2::Socket,
    _fill: Vec<socket2::Socket>,
}

impl Unreachable {
    pub fn start() -> Self {
        use socket2::{Domain, Socket, Type};
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        listener.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
        listener.listen(0).expect("listen");
        let addr = listener.local_addr().expect("addr").as_socket().expect("inet");
        let fill: Vec<Socket> = (0..4)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
                s.set_nonblocking(true).expect("nonblocking");
                let _ = s.connect(&addr.into());
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        Self { addr, _listener: listener, _fill: fill }
    }
}

pub fn origin() -> Origin {
    Origin::spawn("127.0.0.1:0", OriginConfig::default()).expect("origin")
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to gateway");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response (skipping 1xx interim responses unless `keep_interim`).
pub fn read_response(r: &mut impl BufRead, head_request: bool) -> std::io::Result<Resp> {
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            let n = r.read_until(b'\n', &mut line)?;
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before response head"));
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
        let mut hs = [httparse::EMPTY_HEADER; 128];
        let mut resp = httparse::Response::new(&mut hs);
        resp.parse(&head).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let status = resp.code.unwrap_or(0);
        let headers: Vec<(String, String)> = resp
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
            .collect();
        if (100..200).contains(&status) {
            continue;
        }
        let mut out = Resp { status, headers, body: Vec::new() };
        if head_request || status == 204 || status == 304 {
            return Ok(out);
        }
        if let Some(cl) = out.header("content-length") {
            let n: usize = cl.trim().parse().expect("numeric content-length");
            out.body.resize(n, 0);
            r.read_exact(&mut out.body)?;
        } else if out.header("transfer-encoding").is_some() {
            loop {
                let mut line = String::new();
                r.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim_end().split(';').next().unwrap_or(""), 16)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                if size == 0 {
                    // trailers until blank line
                    loop {
                        let mut t = String::new();
                        r.read_line(&mut t)?;
                        if t == "\r\n" || t.is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let mut chunk = vec![0; size + 2];
                r.read_exact(&mut chunk)?;
                out.body.extend_from_slice(&chunk[..size]);
            }
        } else {
            r.read_to_end(&mut out.body)?;
        }
        return Ok(out);
    }
}

/// Sends raw bytes on a new connection and reads one response.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut s = connect(addr);
    s.write_all(raw).expect("write");
    let mut r = BufReader::new(s);
    read_response(&mut r, raw.starts_with(b"HEAD ")).expect("response")
}

/// A plain GET on a new connection.
pub fn get(addr: SocketAddr, path: &str) -> Resp {
    exchange(addr, format!("GET {path} HTTP/1.1\r\nhost: test.local\r\n\r\n").as_bytes())
}

/// True if the server closed the connection (EOF) within the read timeout.
pub fn is_closed(r: &mut BufReader<TcpStream>) -> bool {
    let mut b = [0u8; 1];
    matches!(r.read(&mut b), Ok(0))
        || matches!(r.get_ref().read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

/// Polls `cond` every 10 ms for up to `limit`.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// An origin answering every request on every connection with `reply` (read head, write reply).
pub fn origin_replying(reply: Vec<u8>) -> SocketAddr {
    origin_scripted(move |s, _, _| s.write_all(&reply).is_ok())
}

/// An origin run by `answer`: on each connection (numbered from 0 in accept order) it reads
/// request heads (bodies are left unread) and calls `answer(stream, connection, request)` for
/// each (requests numbered from 0 on each connection), which writes whatever it likes; the
/// connection is closed when `answer` returns false.
pub fn origin_scripted<F>(answer: F) -> SocketAddr
where
    F: Fn(&mut TcpStream, usize, usize) -> bool + Send + Sync + 'static,
{
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for (conn, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                for request in 0.. {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    if !answer(&mut s, conn, request) {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The body the [`routes_head_apart`] origins answer with.
pub const APART_BODY: usize = 16 * 1024;

/// Routes to origins that write an answer's head and its body ([`APART_BODY`] bytes of the
/// origin's pattern) in two writes, as nginx does when it serves a file: `/apart/length`
/// (`Content-Length`), `/apart/chunked` (one chunk), `/apart/close` (delimited by the close),
/// `/apart/late` (`Content-Length`, the body 50 ms after the head), `/apart/reset` (a head
/// announcing 1,000 bytes, then a reset instead of the body).
pub fn routes_head_apart() -> String {
    let body = loadtests::origin::pattern(APART_BODY);
    let kinds = ["length", "chunked", "close", "late", "reset"];
    let mut routes = String::new();
    for kind in kinds {
        let body = body.clone();
        let addr = origin_scripted(move |s, _, _| {
            s.set_nodelay(true).unwrap();
            let (head, rest) = match kind {
                "chunked" => (
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_owned(),
                    [format!("{:x}\r\n", body.len()).as_bytes(), &body, b"\r\n0\r\n\r\n"].concat(),
                ),
                "close" => ("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_owned(), body.clone()),
                "reset" => ("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n".to_owned(), Vec::new()),
                _ => (format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()), body.clone()),
            };
            if s.write_all(head.as_bytes()).is_err() {
                return false;
            }
            match kind {
                "reset" => {
                    socket2::SockRef::from(&*s).set_linger(Some(Duration::ZERO)).unwrap();
                    return false;
                }
                "late" => std::thread::sleep(Duration::from_millis(50)),
                _ => {}
            }
            s.write_all(&rest).is_ok() && kind != "close"
        });
        routes.push_str(&format!(
            "[[routes]]\nname = \"apart-{kind}\"\nmatch = {{ path = \"/apart/{kind}\" }}\ncluster = \"apart-{kind}\"\n\n"
        ));
        routes.push_str(&format!("[[clusters]]\nname = \"apart-{kind}\"\nendpoints = [\"{addr}\"]\n\n"));
    }
    routes
}
