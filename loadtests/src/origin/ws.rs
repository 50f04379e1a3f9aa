//! `/ws/echo`: the server side of a WebSocket opening handshake (RFC 6455 §4.2.2), then an echo
//! of raw bytes.
//!
//! After the 101 the origin does not parse frames: it writes back every byte it reads. A
//! client's frames are masked and a server's must not be, so a strict WebSocket client would
//! refuse the echo; the gateway's tests send and compare raw bytes, which is all a byte tunnel
//! needs to be tested with. SHA-1 and base64 are written here (a few dozen lines) so the test
//! origin needs no crypto dependency; SHA-1 is only used for the handshake token.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;

use super::Shared;

/// The GUID a server appends to the client's key (RFC 6455 §1.3).
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
pub fn accept_token(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(GUID.as_bytes());
    base64(&sha1(&input))
}

/// Answers the handshake in `headers`: 101 and the echo when it asks for WebSocket with a key,
/// else 426. `early` holds bytes the client sent behind its head.
pub(crate) fn serve(shared: &Shared, stream: &TcpStream, headers: &[(String, String)], early: &[u8]) -> io::Result<()> {
    let mut out = stream;
    let field = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    let wants = field("upgrade").is_some_and(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case("websocket")));
    let key = field("sec-websocket-key");
    let Some(key) = key.filter(|_| wants) else {
        let body = "websocket upgrade required\n";
        let head = format!(
            "HTTP/1.1 426 Upgrade Required\r\nupgrade: websocket\r\nconnection: upgrade, close\r\n\
             content-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        return out.write_all(head.as_bytes());
    };
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-accept: {}\r\n\r\n",
        accept_token(key)
    );
    out.write_all(head.as_bytes())?;
    out.write_all(early)?;
    echo(shared, stream)
}

/// Writes back what it reads until the peer closes (or fails); then counts the tunnel closed.
fn echo(shared: &Shared, stream: &TcpStream) -> io::Result<()> {
    let mut io = stream;
    let mut buf = vec![0u8; 16 * 1024];
    let result = loop {
        match io.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if let Err(e) = io.write_all(buf.get(..n).unwrap_or_default()) {
                    break Err(e);
                }
            }
            Err(e) => break Err(e),
        }
    };
    shared.ws_closed.fetch_add(1, Ordering::SeqCst);
    result
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            if let (Some(slot), Ok(bytes)) = (w.get_mut(i), <[u8; 4]>::try_from(word)) {
                *slot = u32::from_be_bytes(bytes);
            }
        }
        for i in 16..80 {
            let at = |j: usize| w.get(j).copied().unwrap_or(0);
            let v = (at(i - 3) ^ at(i - 8) ^ at(i - 14) ^ at(i - 16)).rotate_left(1);
            if let Some(slot) = w.get_mut(i) {
                *slot = v;
            }
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6u32),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (hv, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hv = hv.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, v) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&v.to_be_bytes());
    }
    out
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sym = |i: u32| char::from(ALPHABET.get((i & 63) as usize).copied().unwrap_or(b'A'));
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(sym(n >> 18));
        out.push(sym(n >> 12));
        out.push(if chunk.len() > 1 { sym(n >> 6) } else { '=' });
        out.push(if chunk.len() > 2 { sym(n) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_and_base64_match_known_values() {
        let hex: String = sha1(b"abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = sha1(&[b'a'; 1000]);
        assert_eq!(base64(&long), "KR6abGaZSUm1e6XmUDYemPw2sbo=");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn accept_token_of_the_rfc_example() {
        assert_eq!(accept_token("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }
}
