//! Reading requests off one connection: the head with httparse, then the body as its framing
//! says (Content-Length or chunked). Bytes that arrive early stay buffered for the next,
//! pipelined request.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use super::framing::{chunk_size, connection_semantics, expects_continue, field, framing, BodyFraming};

/// Most header fields in one request head; more -> 431.
pub(crate) const MAX_HEADERS: usize = 256;
/// Largest request head, and largest trailer section; larger -> 431 (400 for trailers).
pub(crate) const MAX_HEAD_BYTES: usize = 1 << 20;
/// Longest chunk-size line, extensions included.
const MAX_CHUNK_LINE: usize = 4096;
/// How much one read asks for.
const READ_SIZE: usize = 16 * 1024;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub method: String,
    pub target: String,
    pub version: u8,
    pub headers: Vec<(String, String)>,
}

/// A complete request.
#[derive(Debug)]
pub(crate) struct Request {
    pub head: Head,
    pub body: Vec<u8>,
    pub chunked: bool,
    pub trailers: Vec<(String, String)>,
    /// The connection must close after the answer (client asked, HTTP/1.0, or ambiguous
    /// framing that RFC 9112 says to close after).
    pub close: bool,
    /// An HTTP/1.0 client asked for keep-alive: the answer confirms it.
    pub keep_alive_1_0: bool,
}

#[derive(Debug)]
pub(crate) enum ReadError {
    /// The connection failed or the peer closed it mid-request: there is no one to answer.
    Closed,
    /// The request is malformed: answer `status` and close. `head` is set when the head parsed.
    Bad { status: u16, reason: &'static str, head: Option<Head> },
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Closed
    }
}

impl ReadError {
    fn with_head(self, head: Head) -> ReadError {
        match self {
            ReadError::Bad { status, reason, head: None } => ReadError::Bad { status, reason, head: Some(head) },
            other => other,
        }
    }
}

/// Reads requests, one after the other, from one connection.
pub(crate) struct Reader<'s> {
    stream: &'s TcpStream,
    buf: Vec<u8>,
}

impl<'s> Reader<'s> {
    pub fn new(stream: &'s TcpStream) -> Self {
        Reader { stream, buf: Vec::with_capacity(READ_SIZE) }
    }

    /// The bytes read behind the last request, leaving none buffered (for a protocol switch).
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The next complete request; `None` when the peer closed the connection cleanly between
    /// requests.
    pub fn next_request(&mut self) -> Result<Option<Request>, ReadError> {
        let Some(head) = self.read_head()? else {
            return Ok(None);
        };
        let framing = match framing(&head.headers) {
            Ok(framing) => framing,
            Err(reason) => return Err(bad(400, reason).with_head(head)),
        };
        let (close, keep_alive_1_0) = connection_semantics(&head);
        if framing.has_body() && head.version == 1 && expects_continue(&head.headers) {
            let mut out = self.stream;
            out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let mut body = Vec::new();
        let mut trailers = Vec::new();
        let read = match framing.body {
            BodyFraming::Length(len) => self.read_exact_into(&mut body, len),
            BodyFraming::Chunked => self.read_chunked(&mut body, &mut trailers),
        };
        if let Err(e) = read {
            return Err(e.with_head(head));
        }
        Ok(Some(Request {
            head,
            body,
            chunked: framing.body == BodyFraming::Chunked,
            trailers,
            close: close || framing.must_close,
            keep_alive_1_0,
        }))
    }

    fn read_head(&mut self) -> Result<Option<Head>, ReadError> {
        loop {
            if !self.buf.is_empty() {
                let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut parsed = httparse::Request::new(&mut slots);
                match parsed.parse(&self.buf) {
                    Ok(httparse::Status::Complete(len)) => {
                        let head = Head::from_parsed(&parsed);
                        self.buf.drain(..len);
                        return Ok(Some(head));
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD_BYTES => {
                        return Err(bad(431, "request head too large"));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(httparse::Error::TooManyHeaders) => {
                        return Err(bad(431, "too many header fields"));
                    }
                    Err(_) => return Err(bad(400, "malformed request head")),
                }
            }
            if self.fill()? == 0 {
                return if self.buf.is_empty() { Ok(None) } else { Err(eof()) };
            }
        }
    }

    fn read_chunked(&mut self, body: &mut Vec<u8>, trailers: &mut Vec<(String, String)>) -> Result<(), ReadError> {
        loop {
            let line = self.read_line(MAX_CHUNK_LINE)?;
            let size = chunk_size(&line).ok_or_else(|| bad(400, "invalid chunk size line"))?;
            if size == 0 {
                break;
            }
            self.read_exact_into(body, size)?;
            if !self.read_line(MAX_CHUNK_LINE)?.is_empty() {
                return Err(bad(400, "chunk data not followed by CRLF"));
            }
        }
        let mut trailer_bytes = 0;
        loop {
            let line = self.read_line(MAX_HEAD_BYTES)?;
            if line.is_empty() {
                return Ok(());
            }
            trailer_bytes += line.len();
            if trailer_bytes > MAX_HEAD_BYTES {
                return Err(bad(400, "trailer section too large"));
            }
            trailers.push(field(&line).ok_or_else(|| bad(400, "malformed trailer field"))?);
        }
    }

    /// Moves exactly `len` body bytes into `out`.
    fn read_exact_into(&mut self, out: &mut Vec<u8>, len: u64) -> Result<(), ReadError> {
        let mut left = len;
        loop {
            let take = usize::try_from(left).unwrap_or(usize::MAX).min(self.buf.len());
            out.extend(self.buf.drain(..take));
            left -= take as u64;
            if left == 0 {
                return Ok(());
            }
            if self.fill()? == 0 {
                return Err(eof());
            }
        }
    }

    /// One CRLF-terminated line (CRLF removed) of at most `limit` bytes.
    fn read_line(&mut self, limit: usize) -> Result<Vec<u8>, ReadError> {
        let mut scanned = 0;
        loop {
            let unscanned = self.buf.get(scanned..).unwrap_or_default();
            if let Some(at) = unscanned.iter().position(|&b| b == b'\n') {
                let end = scanned + at;
                if end > limit + 1 {
                    return Err(bad(400, "line too long in chunked body"));
                }
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                line.pop();
                if line.pop() != Some(b'\r') {
                    return Err(bad(400, "bare LF in chunked body"));
                }
                return Ok(line);
            }
            scanned = self.buf.len();
            if scanned > limit + 1 {
                return Err(bad(400, "line too long in chunked body"));
            }
            if self.fill()? == 0 {
                return Err(eof());
            }
        }
    }

    /// Appends what one read returns to the buffer; 0 at end of stream.
    fn fill(&mut self) -> io::Result<usize> {
        let old = self.buf.len();
        self.buf.resize(old + READ_SIZE, 0);
        let mut input = self.stream;
        let read = loop {
            match input.read(self.buf.get_mut(old..).unwrap_or_default()) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        self.buf.truncate(old + *read.as_ref().unwrap_or(&0));
        read
    }
}

impl Head {
    fn from_parsed(parsed: &httparse::Request<'_, '_>) -> Head {
        Head {
            method: parsed.method.unwrap_or_default().to_string(),
            target: parsed.path.unwrap_or_default().to_string(),
            version: parsed.version.unwrap_or(1),
            headers: parsed
                .headers
                .iter()
                .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                .collect(),
        }
    }
}

fn bad(status: u16, reason: &'static str) -> ReadError {
    ReadError::Bad { status, reason, head: None }
}

fn eof() -> ReadError {
    ReadError::Closed
}
