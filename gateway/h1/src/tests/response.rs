use super::*;

fn resp(bytes: &[u8], head: bool) -> Result<Option<ResponseHead>, ResponseError> {
    parse_response(bytes, 256, head, &mut HeadScratch::new(8))
}

fn resp_ok(bytes: &[u8], head: bool) -> ResponseHead {
    match resp(bytes, head) {
        Ok(Some(h)) => h,
        other => panic!("{other:?} for {:?}", String::from_utf8_lossy(bytes)),
    }
}

fn invalid(bytes: &[u8], reason: &'static str) {
    assert_eq!(resp(bytes, false), Err(ResponseError::Invalid(reason)), "{:?}", String::from_utf8_lossy(bytes));
}

#[test]
fn response_framing_by_fields() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let head = resp_ok(buf, false);
    assert_eq!((head.status, head.version_minor, head.head_len), (200, 1, buf.len() - 5));
    assert_eq!((head.framing, head.keep_alive), (ResponseFraming::Length(5), true));
    assert_eq!(head.reason_bytes(buf), b"OK");
    let chunked = resp_ok(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false);
    assert_eq!((chunked.framing, chunked.keep_alive), (ResponseFraming::Chunked, true));
    let until_close = resp_ok(b"HTTP/1.1 200 OK\r\n\r\n", false);
    assert_eq!((until_close.framing, until_close.keep_alive), (ResponseFraming::UntilClose, false));
}

#[test]
fn responses_without_body() {
    for (buf, head) in [
        (&b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"[..], true),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", true),
        (b"HTTP/1.1 100 Continue\r\n\r\n", false),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", false),
        (b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false),
        (b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip\r\n\r\n", false),
    ] {
        let parsed = resp_ok(buf, head);
        assert_eq!((parsed.framing, parsed.keep_alive), (ResponseFraming::None, true));
    }
    assert_eq!(
        resp(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", true),
        Err(ResponseError::Invalid("invalid Content-Length"))
    );
    invalid(
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "Content-Length with Transfer-Encoding",
    );
    invalid(
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "conflicting Content-Length",
    );
}

#[test]
fn response_framing_refusals() {
    invalid(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding");
    invalid(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", "unsupported Transfer-Encoding");
    invalid(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "Content-Length with Transfer-Encoding",
    );
    invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "conflicting Content-Length");
    invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 3,3\r\n\r\n", "invalid Content-Length");
    invalid(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer-Encoding in HTTP/1.0");
}

#[test]
fn response_status_line_refusals() {
    invalid(b"HTTP/1.1 099 Odd\r\n\r\n", "status code out of range");
    invalid(b"HTTP/1.1 600 Odd\r\n\r\n", "status code out of range");
    invalid(b"HTTP/1.1 20 OK\r\n\r\n", "invalid status line");
    invalid(b"HTTP/1.1 2000 OK\r\n\r\n", "invalid status line");
    invalid(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "no SP after status code");
    invalid(b"HTTP/1.1  200 OK\r\n\r\n", "invalid status line");
    invalid(b"HTTP/2.0 200 OK\r\n\r\n", INVALID_VERSION);
    invalid(b"HTTP/1.1 200 O\x7fK\r\n\r\n", "invalid status line");
    invalid(b"\r\nHTTP/1.1 200 OK\r\n\r\n", "empty line before status line");
    invalid(b"\nHTTP/1.1 200 OK\r\n\r\n", "empty line before status line");
}

#[test]
fn response_line_and_field_refusals() {
    invalid(b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", BARE_LF);
    invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", BARE_LF);
    invalid(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", BARE_LF);
    invalid(b"HTTP/1.1 200 OK\n\n", BARE_LF);
    invalid(b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", "invalid field name");
    invalid(b"HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", "invalid field name");
    invalid(b"HTTP/1.1 200 OK\r\nX: a\0\r\nContent-Length: 0\r\n\r\n", "invalid field value");
    invalid(b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 0\r\n\r\n", "invalid field value");
    invalid(b"HTTP/1.1 200 OK\r\nConnection: close, host\r\n\r\n", "Connection names an end-to-end field");
}

#[test]
fn response_reason_phrase() {
    let buf = b"HTTP/1.1 404 Not \t Found \xe9\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"Not \t Found \xe9");
    let buf = b"HTTP/1.1 200 \r\n\r\n";
    assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"");
    let buf = b"HTTP/1.1 200 OK\r\n\r\n";
    assert_eq!(resp_ok(buf, false).reason_bytes(buf), b"OK");
}

#[test]
fn response_connection_rules() {
    let close = resp_ok(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false);
    assert!(!close.keep_alive);
    let old = resp_ok(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert!(!old.keep_alive);
    let old_ka = resp_ok(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false);
    assert!(old_ka.keep_alive && old_ka.version_minor == 0);
}

#[test]
fn response_limits_and_incomplete() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    for end in 0..buf.len() {
        assert_eq!(resp(&buf[..end], false), Ok(None), "prefix of {end} bytes");
    }
    let big = format!("HTTP/1.1 200 OK\r\nX: {}", "y".repeat(300));
    assert_eq!(resp(big.as_bytes(), false), Err(ResponseError::TooLarge));
    let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "X: y\r\n".repeat(9));
    assert_eq!(resp(many.as_bytes(), false), Err(ResponseError::TooLarge));
}

#[test]
fn response_fields_and_hop_by_hop() {
    let buf = b"HTTP/1.1 200 OK\r\nConnection: x-up\r\nX-Up: 1\r\nContent-Length: 0\r\n\r\n";
    let mut scratch = HeadScratch::new(8);
    assert!(parse_response(buf, 256, false, &mut scratch).unwrap().is_some());
    assert_eq!(scratch.headers().len(), 3);
    assert_eq!(scratch.headers()[1].value(buf), b"1");
    assert!(is_hop_by_hop(b"X-Up", buf, &scratch));
    assert!(!is_hop_by_hop(b"Content-Length", buf, &scratch));
}
