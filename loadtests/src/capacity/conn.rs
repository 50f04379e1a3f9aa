//! One connection of the capacity-limited origin: read a request head (and skip a
//! Content-Length body), wait for a slot, serve, answer; repeat until either side closes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;

use super::Shared;

/// The longest request head accepted; longer ones get 431 and the connection closes.
const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;

/// What a connection does after an answer.
enum Next {
    KeepAlive,
    Close,
}

/// One parsed request head.
struct Head {
    len: usize,
    target: Target,
    body_len: usize,
    close: bool,
}

enum Target {
    Stats,
    Reset,
    Work,
}

pub(super) fn serve(shared: &Shared, mut stream: &TcpStream) {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let head = match parse(&buf) {
            Ok(Some(head)) => head,
            Ok(None) if buf.len() >= MAX_HEAD => {
                let _ = answer(stream, 431, "request head too large\n", true);
                break;
            }
            Ok(None) => match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                    continue;
                }
            },
            Err(why) => {
                let _ = answer(stream, 400, why, true);
                break;
            }
        };
        if !skip_body(stream, &mut buf, head.len, head.body_len, &mut chunk) {
            break;
        }
        match respond(shared, stream, &head) {
            Next::KeepAlive => {}
            Next::Close => break,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn respond(shared: &Shared, stream: &TcpStream, head: &Head) -> Next {
    let written = match head.target {
        Target::Stats => match serde_json::to_string(&shared.gate.stats()) {
            Ok(json) => answer(stream, 200, &json, head.close),
            Err(_) => answer(stream, 500, "cannot encode the stats\n", head.close),
        },
        Target::Reset => {
            shared.gate.reset();
            answer(stream, 200, "reset\n", head.close)
        }
        Target::Work => {
            let Some(permit) = shared.gate.acquire() else {
                return Next::Close; // shutting down
            };
            thread::sleep(shared.model.service_time(permit.others));
            // A client that gave up has closed: the first write to it would still succeed.
            let written = if peer_gone(stream) {
                Err(std::io::ErrorKind::BrokenPipe.into())
            } else {
                answer(stream, 200, "ok", head.close)
            };
            if written.is_err() {
                shared.gate.note_unanswered();
            }
            drop(permit);
            written
        }
    };
    match written {
        Ok(()) if !head.close => Next::KeepAlive,
        _ => Next::Close,
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` while incomplete.
fn parse(buf: &[u8]) -> Result<Option<Head>, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err("malformed request head\n"),
    };
    let path = req.path.unwrap_or("/");
    let path = path.split('?').next().unwrap_or(path);
    let target = match path {
        "/__stats" => Target::Stats,
        "/__reset" => Target::Reset,
        _ => Target::Work,
    };
    let mut body_len = 0;
    let mut close = req.version != Some(1);
    for h in req.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            body_len = value.parse().map_err(|_| "bad content-length\n")?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err("request bodies must have a content-length\n");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        }
    }
    Ok(Some(Head { len, target, body_len, close }))
}

/// Drops the head and `body_len` body bytes from the front of `buf`, reading what is missing.
/// False if the connection ended first.
fn skip_body(mut stream: &TcpStream, buf: &mut Vec<u8>, head_len: usize, body_len: usize, chunk: &mut [u8]) -> bool {
    let mut wanted = head_len.saturating_add(body_len);
    while buf.len() < wanted {
        wanted -= buf.len();
        buf.clear();
        match stream.read(chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
        }
    }
    buf.drain(..wanted);
    true
}

/// The peer has closed its side (or reset): nothing it sends will be read and our answer is lost.
fn peer_gone(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let gone = match stream.peek(&mut [0u8; 1]) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    gone
}

fn answer(mut stream: &TcpStream, status: u16, body: &str, close: bool) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    };
    let content_type = if body.starts_with('{') { "application/json" } else { "text/plain" };
    let connection = if close { "connection: close\r\n" } else { "" };
    let out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{connection}\r\n{body}",
        body.len()
    );
    stream.write_all(out.as_bytes())
}
