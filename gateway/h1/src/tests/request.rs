use super::*;

fn s<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a str {
    std::str::from_utf8(&buf[range.clone()]).unwrap()
}

refuse! {
    // Line endings: httparse takes a bare LF anywhere.
    bare_lf_after_request_line: b"GET / HTTP/1.1\nHost: a\r\n\r\n" => BadRequest(BARE_LF);
    bare_lf_after_field_line: b"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n" => BadRequest(BARE_LF);
    bare_lf_after_last_field_line: b"GET / HTTP/1.1\r\nHost: a\n\r\n" => BadRequest(BARE_LF);
    bare_lf_as_empty_line: b"GET / HTTP/1.1\r\nHost: a\r\n\n" => BadRequest(BARE_LF);
    bare_lf_without_fields: b"GET / HTTP/1.0\n\r\n" => BadRequest(BARE_LF);
    bare_lf_in_incomplete_head: b"GET / HTTP/1.1\nHost: a" => BadRequest(BARE_LF);
    bare_lf_before_request_line: b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest(BARE_LF);
    bare_cr_before_request_line: b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("bare CR");
    bare_cr_in_target: b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    bare_cr_after_version: b"GET / HTTP/1.1\rHost: a\r\n\r\n" => BadRequest("invalid line ending");
    bare_cr_in_field_value: b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n" => BadRequest("invalid field value");
    bare_cr_ending_field_line: b"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n" => BadRequest("invalid field value");
    cr_cr_lf_line_end: b"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n" => BadRequest("invalid field value");
    two_empty_lines_before_request_line: b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
        => BadRequest("more than one empty line before request line");
    crlf_lf_before_request_line: b"\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
        => BadRequest("more than one empty line before request line");
    space_before_request_line: b" GET / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    // Request line.
    invalid_method_token: b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    method_with_slash: b"GE/T / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    tab_as_delimiter: b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    two_spaces_after_method: b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    two_spaces_after_target: b"GET /  HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
    space_after_version: b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n" => BadRequest("invalid line ending");
    http_2_0: b"GET / HTTP/2.0\r\nHost: a\r\n\r\n" => VersionNotSupported;
    http_1_2: b"GET / HTTP/1.2\r\nHost: a\r\n\r\n" => VersionNotSupported;
    http_0_9_shaped: b"GET / HTTP/0.9\r\n\r\n" => VersionNotSupported;
    h2_preface: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" => VersionNotSupported;
    version_without_minor: b"GET / HTTP/1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
    lowercase_version: b"GET / http/1.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
    two_digit_major: b"GET / HTTP/11.1\r\nHost: a\r\n\r\n" => BadRequest(INVALID_VERSION);
    two_digit_minor: b"GET / HTTP/1.10\r\nHost: a\r\n\r\n" => BadRequest("invalid line ending");
    missing_version: b"GET /\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    // Limits (LIMITS: line 64, head 256, 8 fields).
    request_line_too_long: format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(51)) => UriTooLong;
    request_line_too_long_incomplete: format!("GET /{}", "a".repeat(70)) => UriTooLong;
    too_many_fields: format!("GET / HTTP/1.1\r\nHost: a\r\n{}\r\n", "X: y\r\n".repeat(8)) => HeadersTooLarge;
    head_too_large_complete: get_with(&format!("X: {}\r\n", "y".repeat(250))) => HeadersTooLarge;
    head_too_large_incomplete: format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "y".repeat(250)) => HeadersTooLarge;
}

#[test]
fn simple_get() {
    let buf = b"GET /a/b?c=d&e HTTP/1.1\r\nHost: a.example:8080\r\nAccept: */*\r\n\r\nNEXT";
    let head = ok(buf);
    assert_eq!(head.head_len, buf.len() - 4);
    assert_eq!(head.method, Method::Get);
    assert_eq!(head.method_bytes(buf), b"GET");
    assert_eq!(s(buf, &head.target), "/a/b?c=d&e");
    assert_eq!(head.path_bytes(buf), b"/a/b");
    assert_eq!(head.query_bytes(buf), Some(&b"c=d&e"[..]));
    assert_eq!(head.authority_bytes(buf), Some(&b"a.example:8080"[..]));
    assert_eq!(head.version_minor, 1);
    assert_eq!(head.body, BodyFraming::None);
    assert!(head.keep_alive && !head.expect_continue && !head.upgrade);
}

#[test]
fn one_leading_crlf_is_skipped_and_counted() {
    let buf = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.head_len, buf.len());
    assert_eq!(head.method_range, 2..5);
}

#[test]
fn methods() {
    for (token, method) in [
        ("GET", Method::Get),
        ("HEAD", Method::Head),
        ("POST", Method::Post),
        ("PUT", Method::Put),
        ("DELETE", Method::Delete),
        ("OPTIONS", Method::Options),
        ("PATCH", Method::Patch),
        ("TRACE", Method::Trace),
        ("get", Method::Other),
        ("PROPFIND", Method::Other),
        ("X-!#$%&'*+.^_`|~", Method::Other),
    ] {
        let buf = format!("{token} / HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes();
        let head = ok(&buf);
        assert_eq!(head.method, method, "{token}");
        assert_eq!(head.method_bytes(&buf), token.as_bytes());
    }
}

#[test]
fn limits_are_inclusive() {
    // A request line of exactly 64 bytes, a head of exactly 256 bytes, exactly 8 fields.
    let line = format!("GET /{} HTTP/1.1", "a".repeat(64 - 14));
    assert_eq!(line.len(), 64);
    let fields = "X: y\r\n".repeat(7);
    let pad = 256 - (line.len() + 2 + "Host: ".len() + 2 + fields.len() + 2);
    let buf = format!("{line}\r\nHost: {}\r\n{fields}\r\n", "a".repeat(pad)).into_bytes();
    assert_eq!(buf.len(), 256);
    assert_eq!(ok(&buf).head_len, 256);
    // One more byte of request line is 414, complete or not.
    let long = format!("GET /{} HTTP/1.1", "a".repeat(51));
    assert_eq!(req(format!("{long}\r\nHost: a\r\n\r\n").as_bytes()), Err(UriTooLong));
    assert_eq!(req(long.as_bytes()), Err(UriTooLong));
    assert_eq!(req(format!("{line}\r").as_bytes()), Ok(None));
}

#[test]
fn scratch_caps_the_field_count_too() {
    let buf = get_with("X: 1\r\nX: 2\r\n");
    assert_eq!(parse_request(&buf, &LIMITS, &mut HeadScratch::new(2)), Err(HeadersTooLarge));
    assert!(parse_request(&buf, &LIMITS, &mut HeadScratch::new(3)).unwrap().is_some());
    assert_eq!(HeadScratch::new(usize::MAX).max_headers(), MAX_HEADERS);
}

#[test]
fn version_prefixes_wait_for_more() {
    for partial in ["GET / HTTP/2", "GET / HTTP/2.", "GET / HTTP/2.0", "GET / HTTP/1.2\r", "GET / HTTP/1.1\r"] {
        assert_eq!(req(partial.as_bytes()), Ok(None), "{partial}");
    }
    assert_eq!(req(b"GET / HTTP/2.0\r\n"), Err(VersionNotSupported));
    assert_eq!(req(b"GET / HTTP/2.x"), Err(BadRequest(INVALID_VERSION)));
}

#[test]
fn every_prefix_of_a_valid_head_is_incomplete() {
    let buf = b"\r\nPOST /p?q HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\nX: y\r\n\r\n";
    for end in 0..buf.len() {
        assert_eq!(req(&buf[..end]), Ok(None), "prefix of {end} bytes");
    }
    assert_eq!(ok(buf).body, BodyFraming::Length(3));
}

#[test]
fn pipelined_bytes_are_not_part_of_the_head() {
    let first = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
    let mut buf = first.to_vec();
    buf.extend_from_slice(b"helloGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let head = ok(&buf);
    assert_eq!(head.head_len, first.len());
    assert_eq!(ok(&buf[first.len() + 5..]).method, Method::Get);
}

#[test]
fn error_statuses() {
    let cases = [
        (BadRequest("x"), 400),
        (UriTooLong, 414),
        (ExpectationFailed, 417),
        (HeadersTooLarge, 431),
        (NotImplemented("CONNECT"), 501),
        (VersionNotSupported, 505),
    ];
    for (error, status) in cases {
        assert_eq!(error.status(), status);
        assert!(!error.reason().is_empty());
    }
    assert_eq!(BadRequest("x").reason(), "x");
}
