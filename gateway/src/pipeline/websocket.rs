//! WebSocket (RFC 6455) over HTTP/1.1: which handshakes are forwarded, and which upstream
//! answers switch. The tunnel itself is the HTTP/1.1 connection's (`downstream::h1::tunnel`);
//! the gateway does not parse frames.

use crate::codec::h1::{self, HeadScratch};
use crate::pipeline::answer::Refusal;
use crate::request::{Method, Request};

/// Checks the client's opening handshake (RFC 6455 §4.2.1) for a request with
/// `websocket` set on a route that allows WebSocket: GET without a body, exactly one
/// `Sec-WebSocket-Key` that is 16 bytes in base64 (else 400), and `Sec-WebSocket-Version: 13`
/// (400 when missing; any other version is 426 with `sec-websocket-version: 13`, §4.4).
pub fn check_handshake(req: &Request<'_>) -> Result<(), Refusal> {
    const BAD: Refusal = Refusal::status(400);
    const VERSION: Refusal =
        Refusal { status: 426, fields: std::borrow::Cow::Borrowed(b"sec-websocket-version: 13\r\n") };
    if req.method != Method::Get || !req.bodyless() {
        return Err(BAD);
    }
    let mut key = None;
    let mut version = None;
    for (name, value) in req.fields.iter() {
        let slot = if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            &mut key
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            &mut version
        } else {
            continue;
        };
        if slot.replace(value).is_some() {
            return Err(BAD);
        }
    }
    if !key.is_some_and(is_key) {
        return Err(BAD);
    }
    match version {
        None => Err(BAD),
        Some(b"13") => Ok(()),
        Some(_) => Err(VERSION),
    }
}

/// Whether the upstream's 101 accepts a WebSocket upgrade: its `Upgrade` lists `websocket`.
pub fn accepts_websocket(buf: &[u8], scratch: &HeadScratch) -> bool {
    scratch
        .headers()
        .iter()
        .any(|h| h.name(buf).eq_ignore_ascii_case(b"upgrade") && h1::list_contains(h.value(buf), b"websocket"))
}

/// `Sec-WebSocket-Key`: base64 of 16 bytes, i.e. 22 base64 characters and `==`.
fn is_key(value: &[u8]) -> bool {
    let is_b64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    value.len() == 24 && value.ends_with(b"==") && value.get(..22).is_some_and(|k| k.iter().all(is_b64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::codec::h1::{parse_request, RequestLimits};

    const LIMITS: RequestLimits = RequestLimits { max_request_line: 8192, max_header_bytes: 65536, max_headers: 64 };
    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    fn check(req: &str) -> Result<(), Refusal> {
        let mut scratch = HeadScratch::new(64);
        let head = parse_request(req.as_bytes(), &LIMITS, &mut scratch).unwrap().unwrap();
        assert!(head.websocket, "test request must be an upgrade");
        let client = crate::request::Client::for_tests();
        check_handshake(&Request::h1(req.as_bytes(), &head, &scratch, &client))
    }

    fn req(method: &str, extra: &str) -> String {
        format!("{method} /ws HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\nconnection: Upgrade\r\n{extra}\r\n")
    }

    #[test]
    fn a_complete_handshake_passes() {
        let ok = format!("sec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\n");
        assert_eq!(check(&req("GET", &ok)), Ok(()));
        assert_eq!(check(&req("GET", &format!("{ok}content-length: 0\r\n"))), Ok(()));
    }

    #[test]
    fn incomplete_handshakes_are_refused() {
        let bad = |r: &str| check(r).map_err(|e| e.status);
        let v13 = "sec-websocket-version: 13\r\n";
        assert_eq!(bad(&req("GET", v13)), Err(400), "no key");
        assert_eq!(bad(&req("GET", &format!("sec-websocket-key: abc\r\n{v13}"))), Err(400), "short key");
        let key = format!("sec-websocket-key: {KEY}\r\n");
        assert_eq!(bad(&req("GET", &format!("{key}{key}{v13}"))), Err(400), "two keys");
        assert_eq!(bad(&req("POST", &format!("{key}{v13}"))), Err(400), "not GET");
        assert_eq!(bad(&req("GET", &format!("{key}{v13}content-length: 3\r\n"))), Err(400), "body");
        assert_eq!(bad(&req("GET", &key)), Err(400), "no version");
        let old = check(&req("GET", &format!("{key}sec-websocket-version: 8\r\n")));
        assert_eq!(old.as_ref().map_err(|r| (r.status, &*r.fields)), Err((426, &b"sec-websocket-version: 13\r\n"[..])));
    }

    #[test]
    fn keys_are_16_bytes_of_base64() {
        assert!(is_key(KEY.as_bytes()));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25jZQ="));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25j!Q=="));
        assert!(!is_key(b"dGhlIHNhbXBsZSBub25jZQ==="));
    }
}
