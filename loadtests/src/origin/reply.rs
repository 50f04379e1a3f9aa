//! Writing well-formed responses: one write for a small response, pieces of at most
//! [`PIECE`] bytes for a large one, and one write per chunk for chunked bodies.

use std::io::{self, Write};
use std::net::TcpStream;

use super::pattern_byte;

/// Largest single write of a Content-Length framed body.
const PIECE: usize = 64 * 1024;
/// Sizes of successive chunks of a `/chunked/{n}` body, repeated until `n` bytes are sent.
const CHUNK_SIZES: [u64; 7] = [1, 10, 100, 1000, 3, 4096, 16384];
/// The trailer section every chunked body ends with.
pub(crate) const TRAILER: &[u8] = b"0\r\nx-origin-trailer: done\r\n\r\n";

/// The head of a response.
pub(crate) struct Reply<'a> {
    pub status: u16,
    /// Send `Connection: close` (the caller closes after).
    pub close: bool,
    /// Send `Connection: keep-alive` (an HTTP/1.0 client asked for it).
    pub keep_alive_1_0: bool,
    /// Goes out as `x-origin-conn`, so tests can tell upstream connections apart.
    pub connection: u64,
    pub extra: &'a [(&'a str, &'a str)],
    /// A HEAD request: the head says what the body would be, the body is not sent.
    pub head_only: bool,
}

pub(crate) enum Body<'a> {
    Bytes(&'a [u8]),
    /// Pattern bytes, Content-Length framed.
    Pattern(u64),
    /// Pattern bytes, chunked, ending with [`TRAILER`].
    Chunked(u64),
}

/// Writes `reply` and `body`, reusing `out` as the write buffer. 204 and 304 get no body and
/// no framing headers.
pub(crate) fn send(stream: &TcpStream, out: &mut Vec<u8>, reply: &Reply<'_>, body: Body<'_>) -> io::Result<()> {
    let mut stream = stream;
    let bodyless = matches!(reply.status, 204 | 304);
    out.clear();
    write!(out, "HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status))?;
    write!(out, "content-type: text/plain\r\nx-origin-conn: {}\r\n", reply.connection)?;
    for (name, value) in reply.extra {
        write!(out, "{name}: {value}\r\n")?;
    }
    if reply.close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if reply.keep_alive_1_0 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    match body {
        _ if bodyless => {}
        Body::Bytes(bytes) => write!(out, "content-length: {}\r\n", bytes.len())?,
        Body::Pattern(len) => write!(out, "content-length: {len}\r\n")?,
        Body::Chunked(_) => out.extend_from_slice(b"transfer-encoding: chunked\r\ntrailer: x-origin-trailer\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    if bodyless || reply.head_only {
        return stream.write_all(out);
    }
    match body {
        Body::Bytes(bytes) if out.len() + bytes.len() <= PIECE => {
            out.extend_from_slice(bytes);
            stream.write_all(out)
        }
        Body::Bytes(bytes) => {
            stream.write_all(out)?;
            stream.write_all(bytes)
        }
        Body::Pattern(len) => {
            let mut sent = 0;
            loop {
                let room = PIECE.saturating_sub(out.len()) as u64;
                let end = len.min(sent + room);
                out.extend((sent..end).map(pattern_byte));
                stream.write_all(out)?;
                sent = end;
                if sent == len {
                    return Ok(());
                }
                out.clear();
            }
        }
        Body::Chunked(len) => {
            // The head goes alone, then one write per chunk, so that a proxy sees the body
            // arrive in pieces.
            stream.write_all(out)?;
            let mut sent = 0;
            for size in CHUNK_SIZES.iter().cycle() {
                if sent == len {
                    break;
                }
                let end = len.min(sent + size);
                out.clear();
                write!(out, "{:x}\r\n", end - sent)?;
                out.extend((sent..end).map(pattern_byte));
                out.extend_from_slice(b"\r\n");
                stream.write_all(out)?;
                sent = end;
            }
            stream.write_all(TRAILER)
        }
    }
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
