//! The origin over real sockets: a raw-TCP client sends requests byte for byte and checks the
//! framing of what comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::bad::HUGE_HEADER_BYTES;
use super::*;

fn spawn(cfg: OriginConfig) -> Origin {
    Origin::spawn("127.0.0.1:0", cfg).unwrap()
}

fn default_origin() -> Origin {
    spawn(OriginConfig::default())
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    trailers: Vec<(String, String)>,
    /// Chunks in a chunked body (the last, empty chunk not counted).
    chunks: usize,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A raw HTTP/1.1 client: writes bytes as given, parses responses strictly.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(origin: &Origin) -> Client {
        let stream = TcpStream::connect(origin.addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { stream, buf: Vec::new() }
    }

    fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).unwrap();
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    fn response(&mut self) -> Response {
        self.read_response(false)
    }

    fn read_response(&mut self, head_only: bool) -> Response {
        let (status, headers, len) = loop {
            let mut slots = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut slots);
            if let httparse::Status::Complete(len) = parsed.parse(&self.buf).unwrap() {
                let headers = parsed
                    .headers
                    .iter()
                    .map(|h| (h.name.to_string(), String::from_utf8(h.value.to_vec()).unwrap()))
                    .collect::<Vec<_>>();
                break (parsed.code.unwrap(), headers, len);
            }
            assert!(self.fill() > 0, "connection closed inside a response head");
        };
        self.buf.drain(..len);
        let mut response = Response { status, headers, body: Vec::new(), trailers: vec![], chunks: 0 };
        let no_body = head_only || status < 200 || status == 204 || status == 304;
        if no_body {
            return response;
        }
        if response.header("transfer-encoding") == Some("chunked") {
            self.read_chunked(&mut response);
        } else if let Some(len) = response.header("content-length") {
            let len: usize = len.parse().unwrap();
            while self.buf.len() < len {
                assert!(self.fill() > 0, "connection closed inside a body");
            }
            response.body = self.buf.drain(..len).collect();
        } else {
            response.body = self.read_to_end();
        }
        response
    }

    fn read_chunked(&mut self, response: &mut Response) {
        loop {
            let line = self.line();
            let size = usize::from_str_radix(&line, 16).unwrap();
            if size == 0 {
                break;
            }
            while self.buf.len() < size + 2 {
                assert!(self.fill() > 0, "connection closed inside a chunk");
            }
            response.body.extend(self.buf.drain(..size));
            assert_eq!(self.buf.drain(..2).collect::<Vec<_>>(), b"\r\n");
            response.chunks += 1;
        }
        loop {
            let line = self.line();
            if line.is_empty() {
                return;
            }
            let (name, value) = line.split_once(':').unwrap();
            response.trailers.push((name.to_string(), value.trim().to_string()));
        }
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..at + 2).collect();
                return String::from_utf8(line[..at].to_vec()).unwrap();
            }
            assert!(self.fill() > 0, "connection closed inside a line");
        }
    }

    /// Everything up to the peer's close, buffered bytes included.
    fn read_to_end(&mut self) -> Vec<u8> {
        while self.fill() > 0 {}
        std::mem::take(&mut self.buf)
    }

    fn at_eof(&mut self) -> bool {
        self.buf.is_empty() && self.fill() == 0
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: origin\r\n\r\n").into_bytes()
}

#[test]
fn default_answer_keeps_the_connection_and_counts() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    for _ in 0..3 {
        client.send(&get("/"));
        let response = client.response();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"ok");
        assert_eq!(response.header("content-length"), Some("2"));
        assert_eq!(response.header("connection"), None);
        assert_eq!(response.header("x-origin-conn"), Some("1"));
    }
    let mut second = Client::connect(&origin);
    second.send(&get("/x"));
    assert_eq!(second.response().header("x-origin-conn"), Some("2"));
    assert_eq!(origin.connections(), 2);
    assert_eq!(origin.requests(), 4);
    let received = origin.received();
    assert_eq!(received.len(), 4);
    assert_eq!(received[0].method, "GET");
    assert_eq!(received[0].target, "/");
    assert_eq!(received[0].headers, vec![("Host".to_string(), "origin".to_string())]);
    assert_eq!(received[3].connection, 2);
    assert_eq!(received[3].target, "/x");
}

#[test]
fn configured_status_body_and_no_keep_alive() {
    let cfg = OriginConfig { status: 503, body_size: 5, keep_alive: false, ..Default::default() };
    let origin = spawn(cfg);
    let mut client = Client::connect(&origin);
    client.send(&get("/"));
    let response = client.response();
    assert_eq!((response.status, response.body.as_slice()), (503, &b"okoko"[..]));
    assert_eq!(response.header("connection"), Some("close"));
    assert!(client.at_eof());
    assert!(Origin::spawn("127.0.0.1:0", OriginConfig { status: 99, ..Default::default() }).is_err());
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    let mut raw = get("/bytes/3");
    raw.extend(b"POST /echo HTTP/1.1\r\nHost: o\r\nContent-Length: 5\r\n\r\nhello");
    raw.extend(get("/status/404"));
    raw.extend(b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    client.send(&raw);
    assert_eq!(client.response().body, b"abc");
    let echo = client.response();
    assert_eq!(echo.body, b"hello");
    assert_eq!(echo.header("x-origin-saw-te"), None);
    let status = client.response();
    assert_eq!((status.status, status.body.as_slice()), (404, &b"status 404\n"[..]));
    let chunked_echo = client.response();
    assert_eq!(chunked_echo.body, b"abc");
    assert_eq!(chunked_echo.header("x-origin-saw-te"), Some("chunked"));
    assert_eq!(origin.requests(), 4);
    assert_eq!(origin.connections(), 1);
}

#[test]
fn bytes_are_the_pattern() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(&get("/bytes/200000"));
    let response = client.response();
    assert_eq!(response.header("content-length"), Some("200000"));
    assert_eq!(response.body, pattern(200_000));
    assert_eq!(&pattern(28)[..], b"abcdefghijklmnopqrstuvwxyzab");
}

#[test]
fn chunked_answer_has_several_chunks_and_a_trailer() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(&get("/chunked/30000"));
    let response = client.response();
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert_eq!(response.header("content-length"), None);
    assert_eq!(response.body, pattern(30_000));
    assert!(response.chunks >= 5, "{} chunks", response.chunks);
    assert_eq!(response.trailers, vec![("x-origin-trailer".to_string(), "done".to_string())]);
    client.send(&get("/chunked/0"));
    let empty = client.response();
    assert_eq!((empty.body.len(), empty.chunks, empty.trailers.len()), (0, 0, 1));
}

#[test]
fn chunked_request_body_is_decoded_and_recorded() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(
        b"POST /echo HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: 15\r\n\r\n",
    );
    let response = client.response();
    assert_eq!(response.body, b"hello0123456789");
    assert_eq!(response.header("x-origin-saw-te"), Some("chunked"));
    let received = origin.received();
    assert_eq!(received.len(), 1);
    assert!(received[0].chunked);
    assert_eq!(received[0].body, b"hello0123456789");
    assert_eq!(received[0].trailers, vec![("X-Sum".to_string(), "15".to_string())]);
    assert_eq!(received[0].header("transfer-encoding"), Some("chunked"));
}

#[test]
fn expect_continue_gets_an_interim_answer() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(b"PUT /echo HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(client.response().status, 100);
    client.send(b"data");
    assert_eq!(client.response().body, b"data");
}

#[test]
fn headers_are_listed_in_order() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(b"GET /headers HTTP/1.1\r\nHost: a\r\nX-B: 2\r\nx-a: 1\r\nX-B: 3\r\n\r\n");
    let response = client.response();
    assert_eq!(response.body, b"Host: a\nX-B: 2\nx-a: 1\nX-B: 3\n");
    assert_eq!(origin.received()[0].header_count("x-b"), 2);
}

#[test]
fn close_and_http_1_0_close_the_connection() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(&get("/close"));
    let response = client.response();
    assert_eq!((response.status, response.header("connection")), (200, Some("close")));
    assert!(client.at_eof());

    let mut old = Client::connect(&origin);
    old.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(old.response().body, b"ok");
    assert!(old.at_eof());

    let mut old_keep = Client::connect(&origin);
    old_keep.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(old_keep.response().header("connection"), Some("keep-alive"));
    old_keep.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(old_keep.response().body, b"ok");
    assert!(old_keep.at_eof());
}

#[test]
fn override_headers_and_delay() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(b"GET /bytes/4 HTTP/1.1\r\nx-origin-status: 502\r\n\r\n");
    let response = client.response();
    assert_eq!((response.status, response.body.as_slice()), (502, &b"abcd"[..]));

    let started = Instant::now();
    client.send(b"GET / HTTP/1.1\r\nX-Origin-Delay-Ms: 150\r\n\r\n");
    assert_eq!(client.response().status, 200);
    client.send(&get("/delay/100"));
    assert_eq!(client.response().body, b"ok");
    assert!(started.elapsed() >= Duration::from_millis(250));

    client.send(b"GET / HTTP/1.1\r\nx-origin-status: 1000\r\n\r\n");
    assert_eq!(client.response().status, 400);
    client.send(&get("/bad/nonsense"));
    assert_eq!(client.response().status, 404);
}

#[test]
fn bodyless_statuses_and_head() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(&get("/status/204"));
    let no_content = client.response();
    assert_eq!(no_content.status, 204);
    assert_eq!(no_content.header("content-length"), None);
    client.send(b"HEAD /bytes/10 HTTP/1.1\r\n\r\n");
    let head = client.read_response(true);
    assert_eq!(head.header("content-length"), Some("10"));
    // Nothing of a body was sent: the next answer follows directly.
    client.send(&get("/"));
    assert_eq!(client.response().body, b"ok");
}

#[test]
fn malformed_requests_get_400_close_and_are_recorded_as_refused() {
    let origin = default_origin();
    let cases: [&[u8]; 4] = [
        b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ];
    for raw in cases {
        let mut client = Client::connect(&origin);
        client.send(raw);
        let response = client.response();
        assert_eq!(response.status, 400, "{}", String::from_utf8_lossy(raw));
        assert_eq!(response.header("connection"), Some("close"));
        assert!(client.at_eof());
    }
    let received = origin.received();
    assert_eq!(received.len(), 3, "the unparseable head is not recorded");
    assert!(received.iter().all(|r| r.error.is_some() && r.body.is_empty()));
    assert_eq!(origin.requests(), 0);

    let mut client = Client::connect(&origin);
    client.send(&get("/"));
    assert_eq!(client.response().body, b"ok");
    assert_eq!(origin.requests(), 1);
}

#[test]
fn cl_and_te_request_uses_chunked_and_closes() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(
        b"POST /echo HTTP/1.1\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n\
          2\r\nhi\r\n0\r\n\r\n",
    );
    let response = client.response();
    assert_eq!(response.body, b"hi");
    assert_eq!(response.header("connection"), Some("close"));
    assert!(client.at_eof());
}

#[test]
fn too_many_headers_get_431() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    let mut raw = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..300 {
        raw.extend(format!("x-h{i}: v\r\n").bytes());
    }
    raw.extend(b"\r\n");
    client.send(&raw);
    assert_eq!(client.response().status, 431);
}

/// Sends `path` and returns every byte the origin sent until it closed.
fn raw_answer(origin: &Origin, path: &str) -> Vec<u8> {
    let mut client = Client::connect(origin);
    client.send(&get(path));
    client.read_to_end()
}

fn split_head(mut raw: Vec<u8>) -> (String, Vec<u8>) {
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = raw.split_off(at);
    (String::from_utf8(raw).unwrap(), body)
}

#[test]
fn misbehaviours_are_byte_exact() {
    let origin = default_origin();

    let (head, body) = split_head(raw_answer(&origin, "/bad/close-mid-body"));
    assert!(head.contains("content-length: 1000\r\n"));
    assert_eq!(body, pattern(10));

    let (head, body) = split_head(raw_answer(&origin, "/bad/cl-and-te"));
    assert!(head.contains("content-length: 5\r\n") && head.contains("transfer-encoding: chunked"));
    assert_eq!(body, b"5\r\nhello\r\n0\r\n\r\n");

    let (head, body) = split_head(raw_answer(&origin, "/bad/dup-cl"));
    assert!(head.contains("content-length: 2\r\ncontent-length: 3\r\n"));
    assert_eq!(body, b"ok");

    let (head, body) = split_head(raw_answer(&origin, "/bad/chunked"));
    assert!(head.contains("transfer-encoding: chunked"));
    assert!(body.starts_with(b"zz\r\n"));

    let garbage = raw_answer(&origin, "/bad/garbage");
    assert!(!garbage.is_empty() && !garbage.starts_with(b"HTTP/"));

    assert!(raw_answer(&origin, "/bad/no-response").is_empty());

    let (head, body) = split_head(raw_answer(&origin, "/bad/huge-head"));
    assert!(head.len() > HUGE_HEADER_BYTES);
    assert_eq!(body, b"ok");

    let (head, body) = split_head(raw_answer(&origin, "/bad/until-close"));
    assert!(!head.contains("content-length") && !head.contains("transfer-encoding"));
    assert_eq!(body, pattern(1000));

    assert_eq!(origin.requests(), 8);
    assert_eq!(origin.connections(), 8);
}

#[test]
fn stall_holds_the_connection_until_shutdown() {
    let origin = default_origin();
    let addr = origin.addr();
    let mut client = Client::connect(&origin);
    client.send(&get("/bad/stall"));
    client.stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut byte = [0u8; 1];
    let err = client.stream.read(&mut byte).unwrap_err();
    assert!(matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    assert_eq!(origin.requests(), 1);

    let started = Instant::now();
    origin.shutdown();
    assert!(started.elapsed() < Duration::from_secs(5));
    client.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(client.stream.read(&mut byte).unwrap(), 0, "closed at shutdown");
    assert!(TcpStream::connect(addr).is_err(), "no longer accepting");
}

#[test]
fn drop_closes_idle_connections() {
    let origin = default_origin();
    let mut client = Client::connect(&origin);
    client.send(&get("/"));
    assert_eq!(client.response().body, b"ok");
    drop(origin);
    assert!(client.at_eof());
}
