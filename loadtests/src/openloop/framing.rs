//! Incremental HTTP/1.1 response framing: the head parsed by httparse, the body skipped by
//! Content-Length, chunked coding (a small state machine) or the end of the connection. Bodies
//! are not kept; bytes can arrive split anywhere.

use std::fmt;

/// Larger heads are refused.
pub const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server will close the connection (or already did): open a new one.
    pub close: bool,
}

/// Why a response could not be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    Head(httparse::Error),
    HeadTooLarge,
    BadContentLength,
    BadChunk,
    /// `101 Switching Protocols` to a request that asked for no upgrade.
    UnexpectedSwitch,
    /// The connection ended before the response did.
    Eof,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Head(e) => write!(f, "malformed response head: {e}"),
            FrameError::HeadTooLarge => write!(f, "response head above {MAX_HEAD} bytes"),
            FrameError::BadContentLength => write!(f, "invalid or conflicting Content-Length"),
            FrameError::BadChunk => write!(f, "invalid chunked body"),
            FrameError::UnexpectedSwitch => write!(f, "unexpected 101 Switching Protocols"),
            FrameError::Eof => write!(f, "connection closed mid-response"),
        }
    }
}

/// Reads one response after another (one at a time: no pipelining).
#[derive(Debug, Default)]
pub struct ResponseReader {
    state: State,
    pending: Option<Response>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size { size: u64, digits: u8 },
    Ext { size: u64 },
    SizeLf { size: u64 },
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    EndLf,
}

impl ResponseReader {
    /// Consumes bytes of the current response from the start of `buf`. Returns how many bytes
    /// were consumed and the response once it is complete; consumption stops at its end, so
    /// whatever follows is left in `buf`. Needs more input when it returns `(n, None)`.
    pub fn feed(&mut self, buf: &[u8]) -> Result<(usize, Option<Response>), FrameError> {
        let mut pos = 0;
        loop {
            let rest = buf.get(pos..).unwrap_or_default();
            match self.state {
                State::Head => match self.head(rest)? {
                    Some(n) => {
                        pos += n;
                        continue;
                    }
                    None => return Ok((pos, None)),
                },
                State::Length(remaining) => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    if take < remaining {
                        self.state = State::Length(remaining - take);
                        return Ok((pos, None));
                    }
                }
                State::Chunked(chunk) => {
                    let (n, next) = chunked(chunk, rest)?;
                    pos += n;
                    if let Some(chunk) = next {
                        self.state = State::Chunked(chunk);
                        return Ok((pos, None));
                    }
                }
                State::UntilClose => return Ok((buf.len(), None)),
            }
            // The body (or its absence) is complete.
            self.state = State::Head;
            return Ok((pos, self.pending.take()));
        }
    }

    /// The peer closed the connection: completes a response framed by the connection's end.
    pub fn eof(&mut self) -> Result<Response, FrameError> {
        let done = match self.state {
            State::UntilClose => self.pending.take().ok_or(FrameError::Eof),
            _ => Err(FrameError::Eof),
        };
        *self = ResponseReader::default();
        done
    }

    /// True between responses (nothing of the next one read yet).
    pub fn idle(&self) -> bool {
        self.state == State::Head
    }

    /// Parses a head; returns the bytes it took (the body state is set), or None if incomplete.
    /// An interim 1xx head is consumed and the state stays `Head` with nothing pending.
    fn head(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(FrameError::HeadTooLarge),
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(FrameError::Head(e)),
        };
        let status = resp.code.unwrap_or(0);
        if status == 101 {
            return Err(FrameError::UnexpectedSwitch);
        }
        if (100..200).contains(&status) {
            return Ok(Some(n));
        }
        let (mut close, mut keep_alive, mut chunked, mut coded) = (false, false, false, false);
        let mut length: Option<u64> = None;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                coded = true;
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or_default().trim_ascii();
                chunked = last.eq_ignore_ascii_case(b"chunked");
            } else if h.name.eq_ignore_ascii_case("content-length") {
                for value in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    let v = parse_decimal(value).ok_or(FrameError::BadContentLength)?;
                    if length.is_some_and(|l| l != v) {
                        return Err(FrameError::BadContentLength);
                    }
                    length = Some(v);
                }
            }
        }
        if resp.version == Some(0) && !keep_alive {
            close = true;
        }
        self.state = if status == 204 || status == 304 {
            State::Length(0)
        } else if coded && chunked {
            State::Chunked(Chunk::Size { size: 0, digits: 0 })
        } else if coded {
            close = true;
            State::UntilClose
        } else if let Some(len) = length {
            State::Length(len)
        } else {
            close = true;
            State::UntilClose
        };
        self.pending = Some(Response { status, close });
        Ok(Some(n))
    }
}

/// Advances the chunked-body machine over `buf`: the bytes taken and the state to continue in,
/// or None when the body (with its trailers) ended.
fn chunked(mut state: Chunk, buf: &[u8]) -> Result<(usize, Option<Chunk>), FrameError> {
    let mut pos = 0;
    while pos < buf.len() {
        if let Chunk::Data(remaining) = state {
            let take = remaining.min((buf.len() - pos) as u64);
            pos += take as usize;
            state = if take == remaining { Chunk::DataCr } else { Chunk::Data(remaining - take) };
            continue;
        }
        let b = buf.get(pos).copied().unwrap_or_default();
        pos += 1;
        state = match (state, b) {
            (Chunk::Size { size, digits }, _) if b.is_ascii_hexdigit() => {
                if digits >= 16 {
                    return Err(FrameError::BadChunk);
                }
                let d = u64::from((b as char).to_digit(16).unwrap_or(0));
                Chunk::Size { size: size << 4 | d, digits: digits + 1 }
            }
            (Chunk::Size { size, digits: 1.. }, b';' | b' ' | b'\t') => Chunk::Ext { size },
            (Chunk::Size { size, digits: 1.. } | Chunk::Ext { size }, b'\r') => Chunk::SizeLf { size },
            (Chunk::Ext { .. }, b'\n') => return Err(FrameError::BadChunk),
            (Chunk::Ext { size }, _) => Chunk::Ext { size },
            (Chunk::SizeLf { size: 0 }, b'\n') => Chunk::TrailerStart,
            (Chunk::SizeLf { size }, b'\n') => Chunk::Data(size),
            (Chunk::DataCr, b'\r') => Chunk::DataLf,
            (Chunk::DataLf, b'\n') => Chunk::Size { size: 0, digits: 0 },
            (Chunk::TrailerStart, b'\r') => Chunk::EndLf,
            (Chunk::TrailerStart | Chunk::TrailerLine, b'\n') => return Err(FrameError::BadChunk),
            (Chunk::TrailerLine, b'\r') => Chunk::TrailerLf,
            (Chunk::TrailerStart | Chunk::TrailerLine, _) => Chunk::TrailerLine,
            (Chunk::TrailerLf, b'\n') => Chunk::TrailerStart,
            (Chunk::EndLf, b'\n') => return Ok((pos, None)),
            _ => return Err(FrameError::BadChunk),
        };
    }
    Ok((pos, Some(state)))
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces cut at `cuts`, the way reads would deliver them into a buffer
    /// that keeps unconsumed bytes; returns the responses and the bytes left over.
    fn feed_split(input: &[u8], cuts: &[usize]) -> Result<(Vec<Response>, Vec<u8>), FrameError> {
        let mut reader = ResponseReader::default();
        let mut buf = Vec::new();
        let mut done = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            buf.extend_from_slice(&input[from..cut]);
            from = cut;
            loop {
                let (n, resp) = reader.feed(&buf)?;
                buf.drain(..n);
                match resp {
                    Some(r) => done.push(r),
                    None => break,
                }
            }
        }
        Ok((done, buf))
    }

    /// Every way of cutting `input` in two and byte by byte gives the same result as in one piece.
    fn all_splits(input: &[u8]) -> Result<(Vec<Response>, Vec<u8>), FrameError> {
        let whole = feed_split(input, &[]);
        for cut in 0..=input.len() {
            assert_eq!(feed_split(input, &[cut]), whole, "cut at {cut}");
        }
        let bytewise: Vec<usize> = (1..input.len()).collect();
        assert_eq!(feed_split(input, &bytewise), whole, "byte by byte");
        whole
    }

    const OK: Response = Response { status: 200, close: false };

    #[test]
    fn content_length_in_any_split() {
        let input =
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let (done, rest) = all_splits(input).unwrap();
        assert_eq!(done, [OK, Response { status: 404, close: false }]);
        assert!(rest.is_empty());
    }

    #[test]
    fn stops_at_the_end_of_a_response() {
        let mut reader = ResponseReader::default();
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA";
        assert_eq!(reader.feed(input), Ok((input.len() - 5, Some(OK))));
        assert!(reader.idle());
    }

    #[test]
    fn chunked_in_any_split() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            5\r\nhello\r\n1A;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: done\r\n\r\n\
            HTTP/1.1 500 Oops\r\ntransfer-encoding: gzip, chunked\r\nconnection: close\r\n\r\n0\r\n\r\n";
        let (done, rest) = all_splits(input).unwrap();
        assert_eq!(done, [OK, Response { status: 500, close: true }]);
        assert!(rest.is_empty());
    }

    #[test]
    fn bad_chunks_are_refused() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for body in [
            "zz\r\nhello\r\n0\r\n\r\n",
            "5\r\nhelloX\r\n",
            "5\nhello\r\n",
            "\r\n",
            "11111111111111111\r\n",
            "0\r\nbare\nlf\r\n\r\n",
            "5;ext\nhello",
        ] {
            let input = format!("{head}{body}0\r\n\r\n");
            assert_eq!(all_splits(input.as_bytes()), Err(FrameError::BadChunk), "{body:?}");
        }
    }

    #[test]
    fn bodiless_statuses_and_interim_answers() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
        let (done, _) = all_splits(input).unwrap();
        assert_eq!(done, [Response { status: 204, close: false }, Response { status: 304, close: false }]);
        let mut reader = ResponseReader::default();
        assert_eq!(reader.feed(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"), Err(FrameError::UnexpectedSwitch));
    }

    #[test]
    fn connection_close_and_http_1_0() {
        let cases: [(&[u8], bool); 4] = [
            (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", true),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false),
            (b"HTTP/1.1 200 OK\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n", false),
        ];
        for (input, close) in cases {
            let (done, _) = all_splits(input).unwrap();
            assert_eq!(done, [Response { status: 200, close }], "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn body_until_close() {
        let mut reader = ResponseReader::default();
        let plain = b"HTTP/1.1 200 OK\r\n\r\nsome bytes";
        assert_eq!(reader.feed(plain), Ok((plain.len(), None)));
        assert_eq!(reader.feed(b"more"), Ok((4, None)));
        assert_eq!(reader.eof(), Ok(Response { status: 200, close: true }));
        let mut reader = ResponseReader::default();
        let coded = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx";
        assert_eq!(reader.feed(coded), Ok((coded.len(), None)));
        assert_eq!(reader.eof(), Ok(Response { status: 200, close: true }));
    }

    #[test]
    fn eof_mid_response_is_an_error() {
        for input in [&b""[..], b"HTTP/1.1 200", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"] {
            let mut reader = ResponseReader::default();
            let _ = reader.feed(input);
            assert_eq!(reader.eof(), Err(FrameError::Eof));
            assert!(reader.idle(), "eof resets the reader");
        }
    }

    #[test]
    fn bad_heads_and_lengths() {
        let mut reader = ResponseReader::default();
        assert!(matches!(reader.feed(b"\x00\x01 not http\r\n\r\n"), Err(FrameError::Head(_))));
        for cl in
            ["Content-Length: 2\r\nContent-Length: 3", "Content-Length: -1", "Content-Length: 2, 3", "Content-Length: "]
        {
            let input = format!("HTTP/1.1 200 OK\r\n{cl}\r\n\r\nok");
            assert_eq!(ResponseReader::default().feed(input.as_bytes()), Err(FrameError::BadContentLength), "{cl}");
        }
        let agreeing = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok";
        assert_eq!(ResponseReader::default().feed(agreeing), Ok((agreeing.len(), Some(OK))));
        let huge = format!("HTTP/1.1 200 OK\r\nx-big: {}", "a".repeat(MAX_HEAD));
        assert_eq!(ResponseReader::default().feed(huge.as_bytes()), Err(FrameError::HeadTooLarge));
    }
}
