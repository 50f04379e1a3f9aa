use super::*;

refuse! {
    // Request-target forms.
    absolute_form_host_differs: b"GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n"
        => BadRequest("Host differs from request-target authority");
    absolute_form_port_differs: b"GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("Host differs from request-target authority");
    absolute_form_without_host_on_1_1: b"GET http://a.example/ HTTP/1.1\r\n\r\n" => BadRequest("missing Host");
    absolute_form_other_scheme: b"GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("request-target is neither origin-form nor an http(s) URI");
    absolute_form_single_slash: b"GET http:/a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("request-target is neither origin-form nor an http(s) URI");
    absolute_form_userinfo: b"GET http://u:p@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("userinfo in request-target");
    absolute_form_empty_host: b"GET http:///x HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("invalid authority in request-target");
    absolute_form_fragment: b"GET http://a.example/x#f HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("fragment in request-target");
    authority_form_without_connect: b"GET a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n"
        => BadRequest("request-target is neither origin-form nor an http(s) URI");
    connect: b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n" => NotImplemented("CONNECT");
    asterisk_without_options: b"GET * HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("asterisk-form is only for OPTIONS");
    asterisk_with_more: b"OPTIONS *a HTTP/1.1\r\nHost: a\r\n\r\n"
        => BadRequest("request-target is neither origin-form nor an http(s) URI");
    origin_form_without_slash: b"GET index.html HTTP/1.1\r\nHost: a\r\n\r\n"
        => BadRequest("request-target is neither origin-form nor an http(s) URI");
    fragment_in_path: b"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("fragment in request-target");
    fragment_in_query: b"GET /a?b#c HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("fragment in request-target");
    quote_in_path: b"GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
    brace_in_query: b"GET /a?{b} HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
    backslash_in_path: b"GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
    utf8_in_path: b"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid byte in request-target");
    non_utf8_in_path: b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid request line");
    bad_percent: b"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid percent-encoding in request-target");
    truncated_percent: b"GET /a%4 HTTP/1.1\r\nHost: a\r\n\r\n" => BadRequest("invalid percent-encoding in request-target");
}

#[test]
fn absolute_form() {
    let buf = b"GET http://a.example/x/y?q=1 HTTP/1.1\r\nHost: A.EXAMPLE\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.authority_bytes(buf), Some(&b"a.example"[..]));
    assert_eq!(head.path_bytes(buf), b"/x/y");
    assert_eq!(head.query_bytes(buf), Some(&b"q=1"[..]));

    let buf = b"GET HTTPS://a.example:8443 HTTP/1.1\r\nHost: a.example:8443\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.authority_bytes(buf), Some(&b"a.example:8443"[..]));
    assert_eq!(head.path_bytes(buf), b"/");
    assert_eq!(head.query, None);

    let buf = b"GET http://a.example:?q HTTP/1.1\r\nHost: a.example\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.authority_bytes(buf), Some(&b"a.example"[..]));
    assert_eq!(head.path_bytes(buf), b"/");
    assert_eq!(head.query_bytes(buf), Some(&b"q"[..]));

    // HTTP/1.0 needs no Host: the target names the authority.
    let buf = b"GET http://[::1]:81/ HTTP/1.0\r\n\r\n";
    assert_eq!(ok(buf).authority_bytes(buf), Some(&b"[::1]:81"[..]));
}

#[test]
fn asterisk_form() {
    let buf = b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.method, Method::Options);
    assert_eq!(head.path_bytes(buf), b"*");
    assert_eq!(head.authority_bytes(buf), Some(&b"a"[..]));
}

#[test]
fn origin_form_characters_and_queries() {
    let buf = b"GET /a-._~!$&'()*+,;=:@%2F/?/?:@ HTTP/1.1\r\nHost: a\r\n\r\n";
    let head = ok(buf);
    assert_eq!(head.path_bytes(buf), b"/a-._~!$&'()*+,;=:@%2F/");
    assert_eq!(head.query_bytes(buf), Some(&b"/?:@"[..]));
    let buf = b"GET /? HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(ok(buf).query_bytes(buf), Some(&b""[..]));
}
