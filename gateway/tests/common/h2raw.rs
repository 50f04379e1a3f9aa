//! A raw HTTP/2 client side for attack tests over a blocking `TcpStream`: frame writers
//! (RFC 9113 section 4.1 layout), a minimal HPACK encoder (RFC 7541 literal fields, no Huffman,
//! no indexing) and frame readers.
#![allow(dead_code)]

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;

/// GOAWAY / RST_STREAM error codes (RFC 9113 section 7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const CANCEL: u32 = 0x8;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// The client connection preface.
pub fn preface() -> Vec<u8> {
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
}

/// One frame: 24-bit length, type, flags, 31-bit stream id, payload.
pub fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("payload fits a frame");
    assert!(len < 1 << 24, "frame payload over 2^24-1 bytes");
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// SETTINGS with the given (identifier, value) pairs.
pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(params.len() * 6);
    for (id, value) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&value.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, FLAG_ACK, 0, &[])
}

pub fn ping(data: [u8; 8]) -> Vec<u8> {
    frame(PING, 0, 0, &data)
}

pub fn ping_ack(data: [u8; 8]) -> Vec<u8> {
    frame(PING, FLAG_ACK, 0, &data)
}

pub fn rst_stream(stream_id: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream_id, &code.to_be_bytes())
}

pub fn window_update(stream_id: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream_id, &(increment & 0x7fff_ffff).to_be_bytes())
}

pub fn data(stream_id: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { FLAG_END_STREAM } else { 0 }, stream_id, payload)
}

/// HEADERS carrying `block` (a header block fragment, e.g. from [`hpack_literal`]).
pub fn headers(stream_id: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { FLAG_END_STREAM } else { 0 } | if end_headers { FLAG_END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream_id, block)
}

pub fn continuation(stream_id: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(CONTINUATION, if end_headers { FLAG_END_HEADERS } else { 0 }, stream_id, block)
}

/// PRIORITY: non-exclusive dependency on stream 0, weight 16.
pub fn priority(stream_id: u32) -> Vec<u8> {
    frame(PRIORITY, 0, stream_id, &[0, 0, 0, 0, 15])
}

pub fn goaway(last_stream_id: u32, code: u32, debug: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + debug.len());
    p.extend_from_slice(&(last_stream_id & 0x7fff_ffff).to_be_bytes());
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(debug);
    frame(GOAWAY, 0, 0, &p)
}

/// A header block of "literal header field without indexing — new name" representations
/// (RFC 7541 section 6.2.2), no Huffman coding. Names must be lowercase for HTTP/2.
pub fn hpack_literal(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        hpack_string(&mut out, name.as_bytes());
        hpack_string(&mut out, value.as_bytes());
    }
    out
}

/// A string literal: H = 0 and the length as a 7-bit prefix integer (RFC 7541 section 5.1-5.2).
fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut len = s.len();
    if len < 0x7f {
        out.push(len as u8);
    } else {
        out.push(0x7f);
        len -= 0x7f;
        while len >= 0x80 {
            out.push((len % 0x80) as u8 | 0x80);
            len /= 0x80;
        }
        out.push(len as u8);
    }
    out.extend_from_slice(s);
}

/// Reads one frame: (type, flags, stream id, payload).
pub fn read_frame(r: &mut impl Read) -> io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut h = [0u8; 9];
    r.read_exact(&mut h)?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    let mut payload = vec![0; len];
    r.read_exact(&mut payload)?;
    Ok((h[3], h[4], stream, payload))
}

/// Reads frames until a GOAWAY (returns its error code) or EOF, an error or `timeout` (None).
/// Leaves the socket's read timeout changed.
pub fn read_until_goaway(s: &mut TcpStream, timeout: Duration) -> Option<u32> {
    let deadline = Instant::now() + timeout;
    for _ in 0..100_000 {
        let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        s.set_read_timeout(Some(left)).ok()?;
        let (kind, _, _, payload) = read_frame(s).ok()?;
        if kind == GOAWAY {
            return payload.get(4..8).map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_follow_the_rfc_9113_layout() {
        assert_eq!(preface().len(), 24);
        assert_eq!(settings(&[(0x3, 100)]), [0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 0x3, 0, 0, 0, 100]);
        assert_eq!(settings_ack(), [0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]);
        assert_eq!(ping([1, 2, 3, 4, 5, 6, 7, 8]), [0, 0, 8, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(rst_stream(3, CANCEL), [0, 0, 4, 0x3, 0, 0, 0, 0, 3, 0, 0, 0, 8]);
        assert_eq!(window_update(0, 0x1_0000), [0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(data(1, b"ab", true), [0, 0, 2, 0x0, 0x1, 0, 0, 0, 1, b'a', b'b']);
        assert_eq!(headers(5, &[0x82], true, true), [0, 0, 1, 0x1, 0x5, 0, 0, 0, 5, 0x82]);
        assert_eq!(headers(5, &[], false, false)[3..5], [0x1, 0]);
        assert_eq!(continuation(5, &[0x84], true), [0, 0, 1, 0x9, 0x4, 0, 0, 0, 5, 0x84]);
        assert_eq!(priority(7), [0, 0, 5, 0x2, 0, 0, 0, 0, 7, 0, 0, 0, 0, 15]);
        assert_eq!(goaway(1, ENHANCE_YOUR_CALM, b"x"), [0, 0, 9, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0xb, b'x']);
        assert_eq!(frame(0x0, 0, 0, &vec![0; 0x01_0203])[..3], [1, 2, 3]);
    }

    #[test]
    fn hpack_literal_matches_rfc_7541() {
        // RFC 7541 C.2.2: literal header field without indexing, indexed name ":path" = 0x04;
        // here with a new name, so the name is a literal too.
        assert_eq!(hpack_literal(&[(":path", "/sample/path")]), {
            let mut v = vec![0x00, 0x05];
            v.extend_from_slice(b":path");
            v.push(0x0c);
            v.extend_from_slice(b"/sample/path");
            v
        });
        // C.2.1's name and value, encoded without indexing.
        let mut want = vec![0x00, 0x0a];
        want.extend_from_slice(b"custom-key");
        want.push(0x0d);
        want.extend_from_slice(b"custom-header");
        assert_eq!(hpack_literal(&[("custom-key", "custom-header")]), want);
        // Lengths of 127 and more continue in following bytes (RFC 7541 C.1.2 style).
        let long = "v".repeat(1337);
        let block = hpack_literal(&[("x", &long)]);
        assert_eq!(block[..3], [0x00, 0x01, b'x']);
        let rest = 1337 - 127; // 1210 = 0x4ba: 0xba, 0x09
        assert_eq!(block[3..6], [0x7f, (rest % 128) as u8 | 0x80, (rest / 128) as u8]);
        assert_eq!(block.len(), 6 + 1337);
        assert_eq!(hpack_literal(&[("a", &"b".repeat(127))])[3..5], [0x7f, 0x00]);
    }

    #[test]
    fn read_frame_round_trips() {
        let mut bytes = settings(&[(0x4, 65_535)]);
        bytes.extend(goaway(3, ENHANCE_YOUR_CALM, b""));
        let mut r = &bytes[..];
        assert_eq!(read_frame(&mut r).unwrap(), (SETTINGS, 0, 0, vec![0, 4, 0, 0, 0xff, 0xff]));
        assert_eq!(read_frame(&mut r).unwrap(), (GOAWAY, 0, 0, vec![0, 0, 0, 3, 0, 0, 0, 0xb]));
        assert_eq!(read_frame(&mut r).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
