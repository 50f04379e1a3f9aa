use super::*;

refuse! {
    // Field syntax.
    space_before_colon: b"GET / HTTP/1.1\r\nHost : a\r\n\r\n" => BadRequest("invalid field name");
    tab_before_colon: b"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n" => BadRequest("invalid field name");
    obs_fold_space: b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n" => BadRequest("invalid field name");
    obs_fold_tab: b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n" => BadRequest("invalid field name");
    space_before_first_field: b"GET / HTTP/1.1\r\n Host: a\r\n\r\n" => BadRequest("invalid field name");
    empty_field_name: b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n" => BadRequest("invalid field name");
    field_without_colon: b"GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n" => BadRequest("invalid field name");
    del_in_field_name: b"GET / HTTP/1.1\r\nHost: a\r\nX\x7f: b\r\n\r\n" => BadRequest("invalid field name");
    nul_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n" => BadRequest("invalid field value");
    soh_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n" => BadRequest("invalid field value");
    vt_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x0bb\r\n\r\n" => BadRequest("invalid field value");
    esc_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x1bb\r\n\r\n" => BadRequest("invalid field value");
    del_in_field_value: b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n" => BadRequest("invalid field value");
    // Content-Length and Transfer-Encoding.
    cl_plus_sign: get_with("Content-Length: +5\r\n") => BadRequest("invalid Content-Length");
    cl_minus_sign: get_with("Content-Length: -5\r\n") => BadRequest("invalid Content-Length");
    cl_inner_space: get_with("Content-Length: 5 5\r\n") => BadRequest("invalid Content-Length");
    cl_list: get_with("Content-Length: 5, 5\r\n") => BadRequest("invalid Content-Length");
    cl_list_no_space: get_with("Content-Length: 5,5\r\n") => BadRequest("invalid Content-Length");
    cl_empty: get_with("Content-Length:\r\n") => BadRequest("invalid Content-Length");
    cl_hex: get_with("Content-Length: 0x5\r\n") => BadRequest("invalid Content-Length");
    cl_trailing_garbage: get_with("Content-Length: 5a\r\n") => BadRequest("invalid Content-Length");
    cl_overflow: get_with("Content-Length: 18446744073709551616\r\n") => BadRequest("invalid Content-Length");
    cl_differing: get_with("Content-Length: 5\r\nContent-Length: 6\r\n") => BadRequest("conflicting Content-Length");
    cl_and_te: get_with("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
        => BadRequest("Content-Length with Transfer-Encoding");
    te_and_cl: get_with("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")
        => BadRequest("Content-Length with Transfer-Encoding");
    te_gzip_chunked: get_with("Transfer-Encoding: gzip, chunked\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_chunked_chunked: get_with("Transfer-Encoding: chunked, chunked\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_chunked_twice: get_with("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")
        => BadRequest("unsupported Transfer-Encoding");
    te_split_over_fields: get_with("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")
        => BadRequest("unsupported Transfer-Encoding");
    te_identity: get_with("Transfer-Encoding: identity\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_xchunked: get_with("Transfer-Encoding: xchunked\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_with_parameter: get_with("Transfer-Encoding: chunked;q=1\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_trailing_comma: get_with("Transfer-Encoding: chunked,\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_empty: get_with("Transfer-Encoding:\r\n") => BadRequest("unsupported Transfer-Encoding");
    te_in_http_1_0: b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" => BadRequest("Transfer-Encoding in HTTP/1.0");
    // Host.
    missing_host: b"GET / HTTP/1.1\r\n\r\n" => BadRequest("missing Host");
    two_hosts: get_with("Host: a.example\r\n") => BadRequest("more than one Host");
    empty_host: b"GET / HTTP/1.1\r\nHost:\r\n\r\n" => BadRequest("invalid Host");
    host_with_space: b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n" => BadRequest("invalid Host");
    host_with_slash: b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n" => BadRequest("invalid Host");
    host_with_userinfo: b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n" => BadRequest("invalid Host");
    host_bad_port: b"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n" => BadRequest("invalid Host");
    host_port_too_big: b"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n" => BadRequest("invalid Host");
    host_port_too_long: b"GET / HTTP/1.1\r\nHost: a:000080\r\n\r\n" => BadRequest("invalid Host");
    host_two_colons: b"GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n" => BadRequest("invalid Host");
    host_unclosed_ipv6: b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n" => BadRequest("invalid Host");
    host_bad_ipv6: b"GET / HTTP/1.1\r\nHost: [::g]\r\n\r\n" => BadRequest("invalid Host");
    host_ipv6_without_brackets: b"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n" => BadRequest("invalid Host");
    host_ipv6_zone: b"GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n" => BadRequest("invalid Host");
    host_ipvfuture: b"GET / HTTP/1.1\r\nHost: [v1.x]\r\n\r\n" => BadRequest("invalid Host");
    host_bad_percent: b"GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n" => BadRequest("invalid Host");
    host_non_ascii: b"GET / HTTP/1.1\r\nHost: \xc3\xa9.example\r\n\r\n" => BadRequest("invalid Host");
    // Connection, Expect.
    connection_invalid_option: get_with("Connection: close, a/b\r\n") => BadRequest("invalid Connection option");
    connection_names_content_length: get_with("Connection: Content-Length\r\nContent-Length: 1\r\n")
        => BadRequest("Connection names an end-to-end field");
    connection_names_host: get_with("Connection: keep-alive, HOST\r\n") => BadRequest("Connection names an end-to-end field");
    expect_other: get_with("Expect: something\r\n") => ExpectationFailed;
    expect_list: get_with("Expect: 100-continue, x\r\n") => ExpectationFailed;
    expect_continue_then_other: get_with("Expect: 100-continue\r\nExpect: x\r\n") => ExpectationFailed;
    expect_other_on_1_0: b"GET / HTTP/1.0\r\nExpect: x\r\n\r\n" => ExpectationFailed;
}

#[test]
fn field_values_keep_htab_and_obs_text_and_lose_ows() {
    let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX-A: \t a\tb\xff \t\r\n\r\n";
    let mut scratch = HeadScratch::new(8);
    assert!(parse_request(buf, &LIMITS, &mut scratch).unwrap().is_some());
    let x = scratch.headers()[1];
    assert_eq!(x.name(buf), b"X-A");
    assert_eq!(x.value(buf), b"a\tb\xff");
}

#[test]
fn content_length_framing() {
    assert_eq!(ok(&get_with("Content-Length: 0\r\n")).body, BodyFraming::Length(0));
    assert_eq!(ok(&get_with("Content-Length:  42 \r\n")).body, BodyFraming::Length(42));
    assert_eq!(ok(&get_with("Content-Length: 18446744073709551615\r\n")).body, BodyFraming::Length(u64::MAX));
    let same = get_with("Content-Length: 7\r\ncontent-length: 007\r\n");
    assert_eq!(ok(&same).body, BodyFraming::Length(7));
}

#[test]
fn chunked_framing() {
    assert_eq!(ok(&get_with("Transfer-Encoding: chunked\r\n")).body, BodyFraming::Chunked);
    assert_eq!(ok(&get_with("transfer-encoding:  CHUNKED \r\n")).body, BodyFraming::Chunked);
}

#[test]
fn valid_hosts() {
    for (host, route) in [
        ("a.example", "a.example"),
        ("A.Example:8080", "A.Example:8080"),
        ("a.example:", "a.example"),
        ("127.0.0.1:80", "127.0.0.1:80"),
        ("[::1]", "[::1]"),
        ("[2001:db8::7]:443", "[2001:db8::7]:443"),
        ("[::ffff:192.0.2.1]:", "[::ffff:192.0.2.1]"),
        ("xn--bcher-kva.example:65535", "xn--bcher-kva.example:65535"),
        ("a%41b", "a%41b"),
        ("a!$&'()*+,;=b", "a!$&'()*+,;=b"),
    ] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
        assert_eq!(ok(&buf).authority_bytes(&buf), Some(route.as_bytes()), "{host}");
    }
}

#[test]
fn http_1_0_connection_rules() {
    let head = ok(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!((head.version_minor, head.authority, head.keep_alive), (0, None, false));
    assert!(ok(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    assert!(!ok(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
    let buf = b"GET / HTTP/1.0\r\nHost: a.example\r\n\r\n";
    assert_eq!(ok(buf).authority_bytes(buf), Some(&b"a.example"[..]));
}

#[test]
fn http_1_1_connection_rules() {
    assert!(ok(&get_with("Connection: keep-alive\r\n")).keep_alive);
    assert!(!ok(&get_with("Connection: close\r\n")).keep_alive);
    assert!(!ok(&get_with("Connection: x-a, , CLOSE\r\n")).keep_alive);
    assert!(!ok(&get_with("Connection: x-a\r\nConnection: close\r\n")).keep_alive);
}

#[test]
fn upgrade_and_expect() {
    assert!(ok(&get_with("Upgrade: websocket\r\nConnection: upgrade\r\n")).upgrade);
    assert!(ok(&get_with("Expect: 100-Continue\r\n")).expect_continue);
    assert!(!ok(b"GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
}

#[test]
fn websocket_upgrade_needs_both_fields_and_http_1_1() {
    assert!(ok(&get_with("Upgrade: websocket\r\nConnection: upgrade\r\n")).websocket);
    assert!(ok(&get_with("Upgrade: h2c, WebSocket\r\nConnection: keep-alive, Upgrade\r\n")).websocket);
    assert!(ok(&get_with("Connection: upgrade\r\nUpgrade: foo\r\nUpgrade: websocket\r\n")).websocket);
    assert!(!ok(&get_with("Upgrade: websocket\r\n")).websocket);
    assert!(!ok(&get_with("Connection: upgrade\r\n")).websocket);
    assert!(!ok(&get_with("Upgrade: h2c\r\nConnection: upgrade\r\n")).websocket);
    assert!(!ok(&get_with("Upgrade: websocket/13\r\nConnection: upgrade\r\n")).websocket);
    let http10 = b"GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    assert!(ok(http10).upgrade && !ok(http10).websocket);
}

#[test]
fn header_ranges_without_reallocation() {
    let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nx-two:2\r\n\r\n";
    let mut scratch = HeadScratch::new(8);
    let (ptr, cap) = (scratch.headers.as_ptr(), scratch.headers.capacity());
    for _ in 0..3 {
        assert!(parse_request(buf, &LIMITS, &mut scratch).unwrap().is_some());
    }
    assert_eq!((scratch.headers.as_ptr(), scratch.headers.capacity()), (ptr, cap));
    let fields: Vec<(&[u8], &[u8])> = scratch.headers().iter().map(|h| (h.name(buf), h.value(buf))).collect();
    assert_eq!(fields, [(&b"Host"[..], &b"a"[..]), (b"X-One", b"1"), (b"x-two", b"2")]);
    assert_eq!(scratch.headers()[1].name_range(), 25..30);
}

#[test]
fn hop_by_hop_fields() {
    let buf = get_with("Connection: X-Secret, keep-alive\r\nconnection: x-other\r\nX-Secret: 1\r\n");
    let mut scratch = HeadScratch::new(8);
    assert!(parse_request(&buf, &LIMITS, &mut scratch).unwrap().is_some());
    let hop = |name: &[u8]| is_hop_by_hop(name, &buf, &scratch);
    for name in [
        &b"Connection"[..],
        b"keep-alive",
        b"TE",
        b"Trailer",
        b"Transfer-Encoding",
        b"Upgrade",
        b"Proxy-Connection",
        b"x-secret",
        b"X-OTHER",
    ] {
        assert!(hop(name), "{}", String::from_utf8_lossy(name));
    }
    for name in [&b"Host"[..], b"Content-Length", b"Expect", b"X-Secre", b"Trailers", b"Accept"] {
        assert!(!hop(name), "{}", String::from_utf8_lossy(name));
    }
}

/// A Connection field that names only fixed hop-by-hop fields is not read again for each field
/// (the parse leaves it out of the scratch's list), and the fields named by the others still are
/// hop-by-hop, `close` included, in whichever order the Connection fields come.
#[test]
fn connection_options_beyond_the_fixed_fields_are_hop_by_hop_whatever_the_order() {
    for (extra, named) in [
        ("Connection: keep-alive\r\nConnection: x-late\r\nX-Late: 1\r\n", &b"X-Late"[..]),
        ("Connection: x-early, Keep-Alive\r\nConnection: keep-alive\r\n", b"x-early"),
        ("Connection: close\r\nClose: 1\r\n", b"Close"),
    ] {
        let buf = get_with(extra);
        let mut scratch = HeadScratch::new(8);
        assert!(parse_request(&buf, &LIMITS, &mut scratch).unwrap().is_some(), "{extra}");
        assert!(is_hop_by_hop(named, &buf, &scratch), "{extra}");
        assert!(is_hop_by_hop(b"keep-alive", &buf, &scratch), "{extra}");
        assert!(!is_hop_by_hop(b"Accept", &buf, &scratch), "{extra}");
    }
    let buf = get_with("Connection: keep-alive, Upgrade, TE\r\nX-Late: 1\r\n");
    let mut scratch = HeadScratch::new(8);
    assert!(parse_request(&buf, &LIMITS, &mut scratch).unwrap().is_some());
    assert!(!is_hop_by_hop(b"X-Late", &buf, &scratch));
    assert!(is_hop_by_hop(b"upgrade", &buf, &scratch) && is_hop_by_hop(b"te", &buf, &scratch));
}
