//! Raw HTTP/2 frames for the abuses (RFC 9113 section 4.1) and literal HPACK header blocks
//! (RFC 7541 section 6.2.2, no Huffman, no indexing).

pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;

/// SETTINGS_INITIAL_WINDOW_SIZE.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// RST_STREAM CANCEL.
pub const CANCEL: u32 = 0x8;

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One frame: 24-bit length, type, flags, 31-bit stream id, payload (at most 2^24-1 bytes;
/// longer payloads are cut).
pub fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let payload = payload.get(..payload.len().min((1 << 24) - 1)).unwrap_or_default();
    let len = u32::try_from(payload.len()).unwrap_or(0);
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&len.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(params.len() * 6);
    for (id, value) in params {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&value.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn ping(data: [u8; 8]) -> Vec<u8> {
    frame(PING, 0, 0, &data)
}

pub fn rst_stream(stream_id: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream_id, &code.to_be_bytes())
}

pub fn headers(stream_id: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { FLAG_END_STREAM } else { 0 } | if end_headers { FLAG_END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream_id, block)
}

pub fn continuation(stream_id: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(CONTINUATION, if end_headers { FLAG_END_HEADERS } else { 0 }, stream_id, block)
}

/// A GET request's header block for `path`.
pub fn get_block(path: &str) -> Vec<u8> {
    hpack_literal(&[(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "abuse.test")])
}

/// "Literal header field without indexing — new name" for each field.
pub fn hpack_literal(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        hpack_string(&mut out, name.as_bytes());
        hpack_string(&mut out, value.as_bytes());
    }
    out
}

/// A string literal: H = 0 and the length as a 7-bit prefix integer (RFC 7541 sections 5.1-5.2).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_header_layout() {
        let f = rst_stream(3, CANCEL);
        assert_eq!(f, [0, 0, 4, RST_STREAM, 0, 0, 0, 0, 3, 0, 0, 0, 8]);
        let h = headers(1, b"ab", true, false);
        assert_eq!(h.get(..9), Some(&[0, 0, 2, HEADERS, FLAG_END_STREAM, 0, 0, 0, 1][..]));
    }

    #[test]
    fn hpack_lengths_use_the_7_bit_prefix() {
        // RFC 7541 C.2.2-style literal: 0x00, name length, name, value length, value.
        assert_eq!(hpack_literal(&[("a", "bc")]), [0x00, 1, b'a', 2, b'b', b'c']);
        let long = "x".repeat(200);
        let block = hpack_literal(&[("n", &long)]);
        // 200 = 127 + 73: 0x7f then 73.
        assert_eq!(block.get(..5), Some(&[0x00, 1, b'n', 0x7f, 73][..]));
        assert_eq!(block.len(), 5 + 200);
    }
}
