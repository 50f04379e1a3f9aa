#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use super::*;
use crate::frame::{self, flag, kind, Frame, Reason, PREFACE};

/// A header block of literal fields without indexing (new names, no Huffman).
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        b.push(0x00);
        push_str(&mut b, n.as_bytes());
        push_str(&mut b, v.as_bytes());
    }
    b
}

fn push_str(b: &mut Vec<u8>, s: &[u8]) {
    assert!(s.len() < 127);
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

fn get(path: &str) -> Vec<u8> {
    block(&[(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", path)])
}

fn post(len: usize) -> Vec<u8> {
    let l = len.to_string();
    block(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/up"),
        ("content-length", &l),
    ])
}

fn headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool) {
    let start = frame::write_headers_reserve(out);
    out.extend_from_slice(block);
    frame::finish_headers(out, start, stream, end_stream, 16_384);
}

/// The client's preface and an empty SETTINGS.
fn hello() -> Vec<u8> {
    let mut b = PREFACE.to_vec();
    frame::write_settings(&mut b, &[]);
    b
}

/// What the server wrote, as frames (kind, flags, stream, payload).
fn frames(out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 0;
    while let Some(h) = frame::parse_head(&out[at..]) {
        let end = at + 9 + h.len as usize;
        v.push((h.kind, h.flags, h.stream, out[at + 9..end].to_vec()));
        at = end;
    }
    assert_eq!(at, out.len(), "trailing bytes in the output");
    v
}

/// A connection past the preface, its start-up output dropped.
fn open(cfg: Config) -> Conn {
    let mut c = Conn::new(cfg);
    let mut ev = Vec::new();
    let input = hello();
    assert_eq!(c.recv(&input, &mut ev).unwrap(), input.len());
    assert!(ev.is_empty());
    c.out().clear();
    c
}

fn feed(c: &mut Conn, input: &[u8]) -> (Result<usize, ConnError>, Vec<Event>) {
    let mut ev = Vec::new();
    let r = c.recv(input, &mut ev);
    (r, ev)
}

fn resets(out: &[u8]) -> Vec<(u32, Reason)> {
    frames(out)
        .into_iter()
        .filter(|f| f.0 == kind::RST_STREAM)
        .map(|f| (f.2, Reason(u32::from_be_bytes(f.3[..4].try_into().unwrap()))))
        .collect()
}

fn goaway(out: &[u8]) -> Option<Reason> {
    frames(out)
        .into_iter()
        .find(|f| f.0 == kind::GOAWAY)
        .map(|f| Reason(u32::from_be_bytes(f.3[4..8].try_into().unwrap())))
}

#[test]
fn start_up_sends_settings_and_the_connection_window_then_acks_the_clients() {
    let mut c = Conn::new(Config::default());
    let f = frames(c.out());
    assert_eq!(f[0].0, kind::SETTINGS);
    assert_eq!(f[1].0, kind::WINDOW_UPDATE);
    assert_eq!(u32::from_be_bytes(f[1].3[..4].try_into().unwrap()), 1024 * 1024 - 65_535);
    c.out().clear();
    // The preface may come a byte at a time.
    let input = hello();
    let mut ev = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let end = (at + 1).max(at);
        let n = c.recv(&input[at..=end.min(input.len() - 1)], &mut ev).unwrap();
        if n == 0 {
            // An incomplete frame: give it again with more.
            let n = c.recv(&input[at..], &mut ev).unwrap();
            at += n;
        } else {
            at += n;
        }
    }
    let f = frames(c.out());
    assert_eq!((f[0].0, f[0].1), (kind::SETTINGS, flag::ACK));
}

#[test]
fn a_wrong_preface_or_a_first_frame_other_than_settings_is_a_protocol_error() {
    let mut c = Conn::new(Config::default());
    c.out().clear();
    let (r, _) = feed(&mut c, b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(r.unwrap_err().reason, Reason::PROTOCOL_ERROR);
    assert_eq!(goaway(c.out()), Some(Reason::PROTOCOL_ERROR));

    let mut c = Conn::new(Config::default());
    let mut input = PREFACE.to_vec();
    frame::write_ping_ack(&mut input, [0; 8]);
    let (r, _) = feed(&mut c, &input);
    assert_eq!(r.unwrap_err().reason, Reason::PROTOCOL_ERROR);
}

#[test]
fn a_get_becomes_a_request_and_its_answer_frames_that_decode_back() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/a?b=c"), true);
    let (r, ev) = feed(&mut c, &input);
    assert_eq!(r.unwrap(), input.len());
    let Event::Request { stream: 1, head, end_stream: true } = &ev[0] else { panic!("{ev:?}") };
    assert_eq!(head.method(), b"GET");
    assert_eq!(head.path(), Some(&b"/a?b=c"[..]));
    assert_eq!(head.authority(), Some(&b"example.com"[..]));
    assert_eq!(head.scheme(), Some(&b"https"[..]));
    assert_eq!(head.fields.len(), 0);

    let fields: [(&[u8], &[u8]); 2] = [(b"Content-Type", b"text/plain"), (b"server", b"nginx")];
    c.send_head(1, 200, fields, false).unwrap();
    assert_eq!(c.send_data(1, b"ok", true).unwrap(), 2);
    assert!(!c.is_open(1));
    let f = frames(c.out());
    assert_eq!((f[0].0, f[0].1 & flag::END_HEADERS, f[0].2), (kind::HEADERS, flag::END_HEADERS, 1));
    let mut dec = crate::hpack::Decoder::new(4096);
    let (mut buf, mut fl) = (Vec::new(), Vec::new());
    dec.decode(&f[0].3, &mut buf, &mut fl, 1 << 20).unwrap();
    let got: Vec<_> = fl.iter().map(|x| field_bytes(&buf, x)).collect();
    assert_eq!(got[0], (&b":status"[..], &b"200"[..]));
    assert_eq!(got[1], (&b"content-type"[..], &b"text/plain"[..]));
    assert_eq!((f[1].0, f[1].1, f[1].3.as_slice()), (kind::DATA, flag::END_STREAM, &b"ok"[..]));
    // Nothing more may be sent on it.
    assert_eq!(c.send_data(1, b"x", true), Err(SendError::Closed));
}

#[test]
fn a_body_arrives_as_ranges_of_the_input_and_must_match_content_length() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &post(5), false);
    frame::write_data(&mut input, 1, b"he", false);
    frame::write_data(&mut input, 1, b"llo", true);
    let (r, ev) = feed(&mut c, &input);
    assert_eq!(r.unwrap(), input.len());
    let body: Vec<u8> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Data { start, end, .. } => Some(input[*start..*end].to_vec()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .concat();
    assert_eq!(body, b"hello");
    assert!(matches!(ev.last(), Some(Event::Data { end_stream: true, .. })));
    assert_eq!(ev.len(), 3);

    // More than declared: a stream error, and the stream's owner hears of it.
    let mut input = Vec::new();
    headers(&mut input, 3, &post(1), false);
    frame::write_data(&mut input, 3, b"toolong", false);
    c.out().clear();
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(matches!(ev[1], Event::Reset { stream: 3, reason: Reason::PROTOCOL_ERROR, by_peer: false }));
    assert_eq!(resets(c.out()), vec![(3, Reason::PROTOCOL_ERROR)]);

    // Less than declared at END_STREAM.
    let mut input = Vec::new();
    headers(&mut input, 5, &post(4), false);
    frame::write_data(&mut input, 5, b"abc", true);
    c.out().clear();
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[1], Event::Reset { stream: 5, reason: Reason::PROTOCOL_ERROR, .. }));

    // A content-length above 0 on a request without a body.
    let mut input = Vec::new();
    headers(&mut input, 7, &post(4), true);
    c.out().clear();
    let (_, ev) = feed(&mut c, &input);
    assert!(ev.is_empty());
    assert_eq!(resets(c.out()), vec![(7, Reason::PROTOCOL_ERROR)]);
}

#[test]
fn malformed_requests_are_reset_and_never_reach_the_caller() {
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("uppercase name", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("X-Up", "1")]),
        ("connection field", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("connection", "close")]),
        ("te other than trailers", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("te", "gzip")]),
        ("no :path", vec![(":method", "GET"), (":scheme", "http")]),
        ("empty :path", vec![(":method", "GET"), (":scheme", "http"), (":path", "")]),
        ("no :method", vec![(":scheme", "http"), (":path", "/")]),
        ("pseudo after regular", vec![(":method", "GET"), ("accept", "*/*"), (":scheme", "http"), (":path", "/")]),
        ("duplicate :method", vec![(":method", "GET"), (":method", "GET"), (":scheme", "http"), (":path", "/")]),
        ("unknown pseudo", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), (":protocol", "ws")]),
        ("response pseudo", vec![(":status", "200"), (":method", "GET"), (":scheme", "http"), (":path", "/")]),
        ("value with LF", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("a", "b\nc")]),
        ("value with leading space", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("a", " b")]),
        (
            "two lengths",
            vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                ("content-length", "1"),
                ("content-length", "2"),
            ],
        ),
        ("length not digits", vec![(":method", "GET"), (":scheme", "http"), (":path", "/"), ("content-length", "+1")]),
        ("CONNECT with :path", vec![(":method", "CONNECT"), (":authority", "a:1"), (":path", "/")]),
        ("method not a token", vec![(":method", "G T"), (":scheme", "http"), (":path", "/")]),
    ];
    for (what, fields) in cases {
        let mut c = open(Config::default());
        let mut input = Vec::new();
        headers(&mut input, 1, &block(&fields), true);
        let (r, ev) = feed(&mut c, &input);
        assert_eq!(r.unwrap(), input.len(), "{what}");
        assert!(ev.is_empty(), "{what}: {ev:?}");
        assert_eq!(resets(c.out()), vec![(1, Reason::PROTOCOL_ERROR)], "{what}");
        // The connection serves on.
        let mut input = Vec::new();
        headers(&mut input, 3, &get("/"), true);
        let (_, ev) = feed(&mut c, &input);
        assert!(matches!(ev[0], Event::Request { stream: 3, .. }), "{what}");
    }
}

#[test]
fn refused_streams_still_feed_hpack_so_later_blocks_decode() {
    let mut c = open(Config { max_concurrent_streams: 1, ..Config::default() });
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/"), false);
    // Stream 3 is over the limit; its block inserts `x-a: 1` into the dynamic table.
    let mut b = get("/");
    b.push(0x40);
    push_str(&mut b, b"x-a");
    push_str(&mut b, b"1");
    headers(&mut input, 3, &b, true);
    // Stream 5 (after stream 1 ended) refers to it by index 62.
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!(resets(c.out()), vec![(3, Reason::REFUSED_STREAM)]);
    c.send_head(1, 204, std::iter::empty(), true).unwrap();
    c.forget(1);
    let mut input = Vec::new();
    let mut b = get("/");
    b.push(0x80 | 62);
    headers(&mut input, 5, &b, true);
    let (_, ev) = feed(&mut c, &input);
    let Event::Request { head, .. } = &ev[0] else { panic!("{ev:?}") };
    assert_eq!(head.get(b"x-a"), Some(&b"1"[..]));
}

#[test]
fn a_list_over_the_limit_is_refused_431_on_its_stream_only() {
    let mut c = open(Config { max_header_list: 200, ..Config::default() });
    let big = "v".repeat(100);
    let mut b = get("/");
    for n in ["x-1", "x-2"] {
        b.push(0x00);
        push_str(&mut b, n.as_bytes());
        push_str(&mut b, big.as_bytes());
    }
    let mut input = Vec::new();
    headers(&mut input, 1, &b, true);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(matches!(ev[0], Event::Refused { stream: 1, status: 431 }));
    c.send_head(1, 431, std::iter::empty(), true).unwrap();
    assert!(!c.is_open(1));
}

#[test]
fn send_data_stops_at_the_window_and_resumes_on_window_update() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[(frame::setting::INITIAL_WINDOW_SIZE, 10)]);
    headers(&mut input, 1, &get("/"), true);
    let (r, _) = feed(&mut c, &input);
    r.unwrap();
    c.send_head(1, 200, std::iter::empty(), false).unwrap();
    assert_eq!(c.send_capacity(1), 10);
    assert_eq!(c.send_data(1, &[7; 25], true).unwrap(), 10);
    assert!(c.is_open(1));
    let mut input = Vec::new();
    frame::write_window_update(&mut input, 1, 100);
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[..], [Event::Writable { stream: 1 }]));
    assert_eq!(c.send_data(1, &[7; 15], true).unwrap(), 15);
    assert!(!c.is_open(1));
    let data: usize = frames(c.out()).iter().filter(|f| f.0 == kind::DATA).map(|f| f.3.len()).sum();
    assert_eq!(data, 25);

    // A SETTINGS change moves open streams' windows (down, below zero, then up).
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[(frame::setting::INITIAL_WINDOW_SIZE, 5)]);
    headers(&mut input, 3, &get("/"), true);
    let (r, _) = feed(&mut c, &input);
    r.unwrap();
    c.send_head(3, 200, std::iter::empty(), false).unwrap();
    assert_eq!(c.send_data(3, &[1; 5], false).unwrap(), 5);
    assert_eq!(c.send_data(3, &[1; 5], false).unwrap(), 0);
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[(frame::setting::INITIAL_WINDOW_SIZE, 2)]);
    let _ = feed(&mut c, &input);
    assert_eq!(c.send_capacity(3), 0);
    let mut input = Vec::new();
    frame::write_settings(&mut input, &[(frame::setting::INITIAL_WINDOW_SIZE, 9)]);
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[..], [Event::Writable { stream: 3 }]));
    assert_eq!(c.send_capacity(3), 4);
}

#[test]
fn the_connection_window_bounds_every_stream_and_its_update_wakes_them_all() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/"), true);
    headers(&mut input, 3, &get("/"), true);
    let _ = feed(&mut c, &input);
    for s in [1, 3] {
        c.send_head(s, 200, std::iter::empty(), false).unwrap();
    }
    assert_eq!(c.send_data(1, &vec![0; 70_000], false).unwrap(), 65_535);
    assert_eq!(c.send_data(3, b"x", false).unwrap(), 0);
    let mut input = Vec::new();
    frame::write_window_update(&mut input, 0, 10);
    let (_, ev) = feed(&mut c, &input);
    let mut woken: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Writable { stream } => Some(*stream),
            _ => None,
        })
        .collect();
    woken.sort_unstable();
    assert_eq!(woken, vec![3]); // stream 1's own window is still 0
                                // DATA frames respect the client's max frame size (16 384 by default).
    assert!(frames(c.out()).iter().filter(|f| f.0 == kind::DATA).all(|f| f.3.len() <= 16_384));
}

#[test]
fn receive_windows_are_enforced_and_given_back_when_released() {
    let cfg = Config { stream_window: 65_535, conn_window: 65_535 * 2, ..Config::default() };
    let mut c = open(cfg);
    let mut input = Vec::new();
    headers(&mut input, 1, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    for _ in 0..4 {
        frame::write_data(&mut input, 1, &[0; 16_000], false);
    }
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert_eq!(ev.len(), 5);
    c.out().clear();
    c.release(1, 16_000);
    assert!(c.out().is_empty(), "less than half a window released");
    c.release(1, 32_000);
    let ups: Vec<_> = frames(c.out()).into_iter().filter(|f| f.0 == kind::WINDOW_UPDATE).map(|f| f.2).collect();
    assert_eq!(ups, vec![1], "the stream's window; the connection's is not half used");
    // Beyond the stream's window (49 535 left): a stream error.
    let mut input = Vec::new();
    for _ in 0..4 {
        frame::write_data(&mut input, 1, &[0; 16_000], false);
    }
    c.out().clear();
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(ev.iter().any(|e| matches!(e, Event::Reset { stream: 1, reason: Reason::FLOW_CONTROL_ERROR, .. })));
}

#[test]
fn the_connection_window_overrun_is_a_connection_error() {
    let cfg = Config { stream_window: 1 << 20, conn_window: 65_535, ..Config::default() };
    let mut c = open(cfg);
    let mut input = Vec::new();
    headers(&mut input, 1, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    for _ in 0..5 {
        frame::write_data(&mut input, 1, &[0; 16_000], false);
    }
    let (r, _) = feed(&mut c, &input);
    assert_eq!(r.unwrap_err().reason, Reason::FLOW_CONTROL_ERROR);
    assert_eq!(goaway(c.out()), Some(Reason::FLOW_CONTROL_ERROR));
}

#[test]
fn stream_identifier_rules() {
    // Even.
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 2, &get("/"), true);
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::PROTOCOL_ERROR);
    // DATA, WINDOW_UPDATE, RST_STREAM on an idle stream.
    for f in [
        |b: &mut Vec<u8>| frame::write_data(b, 9, b"x", false),
        |b: &mut Vec<u8>| frame::write_window_update(b, 9, 1),
        |b: &mut Vec<u8>| frame::write_rst(b, 9, Reason::CANCEL),
    ] {
        let mut c = open(Config::default());
        let mut input = Vec::new();
        f(&mut input);
        assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::PROTOCOL_ERROR);
    }
    // A lower identifier than one already used.
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 5, &get("/"), true);
    headers(&mut input, 3, &get("/"), true);
    assert!(feed(&mut c, &input).0.is_err());
}

#[test]
fn frames_on_closed_streams() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    let _ = feed(&mut c, &input);
    // The server answers before the body ended: RST_STREAM NO_ERROR, and DATA the client sent
    // before it saw that is ignored.
    c.send_head(1, 413, std::iter::empty(), true).unwrap();
    assert_eq!(resets(c.out()), vec![(1, Reason::NO_ERROR)]);
    let mut input = Vec::new();
    frame::write_data(&mut input, 1, b"late", true);
    frame::write_window_update(&mut input, 1, 5);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(ev.is_empty());

    // Half closed (remote): DATA is a stream error STREAM_CLOSED.
    let mut input = Vec::new();
    headers(&mut input, 3, &get("/"), true);
    frame::write_data(&mut input, 3, b"x", false);
    c.out().clear();
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(matches!(ev[1], Event::Reset { stream: 3, reason: Reason::STREAM_CLOSED, .. }));

    // Closed by both sides: DATA is a connection error.
    let mut input = Vec::new();
    headers(&mut input, 5, &get("/"), true);
    let _ = feed(&mut c, &input);
    c.send_head(5, 204, std::iter::empty(), true).unwrap();
    for s in 0..RECENT_RESETS as u32 {
        // Push stream 1 out of the recent resets' memory.
        c.write_reset(1001 + 2 * s, Reason::CANCEL);
    }
    let mut input = Vec::new();
    frame::write_data(&mut input, 5, b"x", false);
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::STREAM_CLOSED);
}

#[test]
fn continuation_frames_complete_a_block_and_nothing_may_come_between() {
    let mut c = open(Config::default());
    let b = get("/long");
    let mut input = Vec::new();
    let start = frame::write_headers_reserve(&mut input);
    input.extend_from_slice(&b);
    frame::finish_headers(&mut input, start, 1, true, 10);
    assert!(frames(&input).iter().filter(|f| f.0 == kind::CONTINUATION).count() > 1);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    let Event::Request { head, .. } = &ev[0] else { panic!() };
    assert_eq!(head.path(), Some(&b"/long"[..]));

    let mut c = open(Config::default());
    let mut input = Vec::new();
    frame::write_head(&mut input, 3, kind::HEADERS, 0, 1);
    input.extend_from_slice(&b[..3]);
    frame::write_ping_ack(&mut input, [0; 8]);
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::PROTOCOL_ERROR);

    // A block that never ends grows only to the list limit.
    let mut c = open(Config { max_header_list: 1024, ..Config::default() });
    let mut input = Vec::new();
    frame::write_head(&mut input, 3, kind::HEADERS, 0, 1);
    input.extend_from_slice(&b[..3]);
    for _ in 0..10 {
        frame::write_head(&mut input, 500, kind::CONTINUATION, 0, 1);
        input.extend_from_slice(&[0; 500]);
    }
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn trailers_end_the_body_and_must_end_the_stream() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    frame::write_data(&mut input, 1, b"abc", false);
    headers(&mut input, 1, &block(&[("grpc-status", "0")]), true);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    let Event::Trailers { stream: 1, head } = &ev[2] else { panic!("{ev:?}") };
    assert_eq!(head.get(b"grpc-status"), Some(&b"0"[..]));

    let mut input = Vec::new();
    headers(&mut input, 3, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    headers(&mut input, 3, &block(&[("x", "1")]), false);
    c.out().clear();
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[1], Event::Reset { stream: 3, reason: Reason::PROTOCOL_ERROR, .. }));

    let mut input = Vec::new();
    headers(&mut input, 5, &block(&[(":method", "POST"), (":scheme", "http"), (":path", "/")]), false);
    headers(&mut input, 5, &block(&[(":path", "/x")]), true);
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[1], Event::Reset { stream: 5, reason: Reason::PROTOCOL_ERROR, .. }));
}

#[test]
fn ping_is_answered_and_goaway_is_reported() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    frame::write_head(&mut input, 8, kind::PING, 0, 0);
    input.extend_from_slice(b"12345678");
    frame::write_goaway(&mut input, 0, Reason::NO_ERROR, b"");
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    let f = frames(c.out());
    assert_eq!((f[0].0, f[0].1, f[0].3.as_slice()), (kind::PING, flag::ACK, &b"12345678"[..]));
    assert!(matches!(ev[..], [Event::GoAway { reason: Reason::NO_ERROR }]));
    assert!(c.is_done());
}

/// The GOAWAYs in `out`: (last stream, reason).
fn goaways(out: &[u8]) -> Vec<(u32, Reason)> {
    frames(out)
        .into_iter()
        .filter(|f| f.0 == kind::GOAWAY)
        .map(|f| {
            (
                u32::from_be_bytes(f.3[..4].try_into().unwrap()),
                Reason(u32::from_be_bytes(f.3[4..8].try_into().unwrap())),
            )
        })
        .collect()
}

fn ping_ack(data: [u8; 8]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::write_head(&mut b, 8, kind::PING, flag::ACK, 0);
    b.extend_from_slice(&data);
    b
}

/// A connection with stream 1 open whose graceful shutdown just started (its output holds the
/// first GOAWAY and the PING).
fn shutting_down() -> Conn {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/"), true);
    let _ = feed(&mut c, &input);
    c.out().clear();
    c.shutdown();
    c
}

#[test]
fn a_graceful_shutdown_takes_the_streams_sent_before_the_client_read_it() {
    let mut c = shutting_down();
    // First the GOAWAY that stops new streams, naming no stream, then a PING.
    let f = frames(c.out());
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(goaways(c.out()), [(frame::MAX_STREAM, Reason::NO_ERROR)]);
    let (kind, flags, _, payload) = &f[1];
    assert_eq!((*kind, *flags), (kind::PING, 0));
    let data: [u8; 8] = payload.as_slice().try_into().unwrap();
    assert!(c.shutdown_pending());
    c.out().clear();
    // A stream the client opened before it read the GOAWAY is taken.
    let mut input = Vec::new();
    headers(&mut input, 3, &get("/"), true);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(matches!(ev[..], [Event::Request { stream: 3, .. }]), "{ev:?}");
    // Another PING's ACK is not the one.
    let (r, _) = feed(&mut c, &ping_ack(*b"someping"));
    r.unwrap();
    assert!(c.out().is_empty());
    assert!(c.shutdown_pending());
    // The ACK: the final GOAWAY names the last stream the client opened.
    let (r, _) = feed(&mut c, &ping_ack(data));
    r.unwrap();
    assert_eq!(goaways(c.out()), [(3, Reason::NO_ERROR)]);
    assert!(!c.shutdown_pending());
    c.out().clear();
    // Streams above it are ignored (HPACK still sees them); the connection ends once the two it
    // took are answered.
    let mut input = Vec::new();
    headers(&mut input, 5, &get("/"), true);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(ev.is_empty(), "{ev:?}");
    assert!(c.out().is_empty());
    assert!(!c.is_done());
    c.send_head(1, 200, std::iter::empty(), true).unwrap();
    assert!(!c.is_done());
    c.send_head(3, 200, std::iter::empty(), true).unwrap();
    assert!(c.is_done());
    // Shutting down again writes nothing.
    c.out().clear();
    c.shutdown();
    c.finish_shutdown();
    assert!(c.out().is_empty());
}

#[test]
fn a_shutdown_the_client_does_not_acknowledge_is_finished_by_the_caller() {
    let mut c = shutting_down();
    let data: [u8; 8] = frames(c.out())[1].3.as_slice().try_into().unwrap();
    c.out().clear();
    c.send_head(1, 200, std::iter::empty(), true).unwrap();
    // No stream left, but the final GOAWAY has not gone out: not done yet.
    assert!(!c.is_done());
    c.out().clear();
    c.finish_shutdown();
    assert_eq!(goaways(c.out()), [(1, Reason::NO_ERROR)]);
    assert!(c.is_done());
    // A late ACK changes nothing.
    c.out().clear();
    let (r, _) = feed(&mut c, &ping_ack(data));
    r.unwrap();
    assert!(c.out().is_empty());
}

#[test]
fn a_shutdown_before_the_client_started_is_final_at_once() {
    let mut c = Conn::new(Config::default());
    c.out().clear();
    c.shutdown();
    assert_eq!(goaways(c.out()), [(0, Reason::NO_ERROR)]);
    assert!(frames(c.out()).iter().all(|f| f.0 != kind::PING));
    assert!(!c.shutdown_pending());
    assert!(c.is_done());
}

#[test]
fn a_connection_error_during_a_shutdown_ends_it() {
    let mut c = open(Config::default());
    c.shutdown();
    c.out().clear();
    let mut input = Vec::new();
    headers(&mut input, 2, &get("/"), true);
    let (r, _) = feed(&mut c, &input);
    assert!(r.is_err());
    assert_eq!(goaways(c.out()), [(0, Reason::PROTOCOL_ERROR)]);
    assert!(!c.shutdown_pending());
    c.out().clear();
    c.finish_shutdown();
    assert!(c.out().is_empty());
}

#[test]
fn a_reset_stream_holds_its_slot_until_its_owner_lets_it_go() {
    // Rapid reset: a client that resets its streams at once must not get more streams in the
    // works than the limit.
    let mut c = open(Config { max_concurrent_streams: 1, ..Config::default() });
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/"), true);
    frame::write_rst(&mut input, 1, Reason::CANCEL);
    headers(&mut input, 3, &get("/"), true);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    assert!(matches!(ev[1], Event::Reset { stream: 1, reason: Reason::CANCEL, by_peer: true }));
    assert_eq!(ev.len(), 2);
    assert_eq!(resets(c.out()), vec![(3, Reason::REFUSED_STREAM)]);
    assert_eq!(c.send_head(1, 200, std::iter::empty(), true), Err(SendError::Closed));
    c.forget(1);
    let mut input = Vec::new();
    headers(&mut input, 5, &get("/"), true);
    let (_, ev) = feed(&mut c, &input);
    assert!(matches!(ev[0], Event::Request { stream: 5, .. }));
    // Letting go of a stream still open resets it.
    c.out().clear();
    c.forget(5);
    assert_eq!(resets(c.out()), vec![(5, Reason::CANCEL)]);
}

#[test]
fn interim_heads_precede_the_final_one() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &get("/"), true);
    let _ = feed(&mut c, &input);
    c.out().clear();
    c.send_head(1, 103, [(&b"link"[..], &b"</a.css>; rel=preload"[..])], true).unwrap();
    assert!(c.is_open(1), "a 1xx head never ends the stream");
    c.send_head(1, 200, std::iter::empty(), false).unwrap();
    assert_eq!(c.send_head(1, 200, std::iter::empty(), false), Err(SendError::Order));
    c.send_trailers(1, [(&b"x-t"[..], &b"1"[..])]).unwrap();
    assert!(!c.is_open(1));
    let f = frames(c.out());
    assert_eq!(f.iter().filter(|f| f.0 == kind::HEADERS).count(), 3);
    assert_eq!(f[0].1 & flag::END_STREAM, 0);
    assert_eq!(f[2].1 & flag::END_STREAM, flag::END_STREAM);
}

#[test]
fn input_split_anywhere_gives_the_same_events() {
    let mut input = hello();
    headers(&mut input, 1, &post(3), false);
    frame::write_data(&mut input, 1, b"abc", true);
    headers(&mut input, 3, &get("/x"), true);
    let summary = |c: &mut Conn, input: &[u8], split: usize| {
        let mut ev = Vec::new();
        let mut kept = input[..split].to_vec();
        let n = c.recv(&kept, &mut ev).unwrap();
        let mut out: Vec<String> = ev.iter().map(|e| describe(e, &kept)).collect();
        kept.drain(..n);
        kept.extend_from_slice(&input[split..]);
        ev.clear();
        let n2 = c.recv(&kept, &mut ev).unwrap();
        assert_eq!(n2, kept.len());
        out.extend(ev.iter().map(|e| describe(e, &kept)));
        out
    };
    let whole = summary(&mut Conn::new(Config::default()), &input, 0);
    for split in 1..input.len() {
        let got = summary(&mut Conn::new(Config::default()), &input, split);
        // DATA may be reported in the same pieces only: compare the bytes.
        assert_eq!(got.concat(), whole.concat(), "split at {split}");
    }
}

fn describe(e: &Event, input: &[u8]) -> String {
    match e {
        Event::Request { stream, head, end_stream } => {
            format!("req {stream} {:?} {end_stream};", String::from_utf8_lossy(head.path().unwrap_or_default()))
        }
        Event::Data { start, end, end_stream, .. } => {
            format!("{}{}", String::from_utf8_lossy(&input[*start..*end]), if *end_stream { ";end;" } else { "" })
        }
        other => format!("{other:?};"),
    }
}

#[test]
fn padded_data_counts_its_padding_and_delivers_only_the_data() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &post(2), false);
    frame::write_head(&mut input, 1 + 2 + 5, kind::DATA, flag::PADDED | flag::END_STREAM, 1);
    input.push(5);
    input.extend_from_slice(b"hi");
    input.extend_from_slice(&[0; 5]);
    let (r, ev) = feed(&mut c, &input);
    r.unwrap();
    let Event::Data { start, end, end_stream: true, .. } = ev[1] else { panic!("{ev:?}") };
    assert_eq!(&input[start..end], b"hi");
}

#[test]
fn frames_larger_than_advertised_are_a_frame_size_error() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    frame::write_head(&mut input, 16_385, kind::DATA, 0, 1);
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::FRAME_SIZE_ERROR);
}

#[test]
fn hpack_garbage_is_a_compression_error() {
    let mut c = open(Config::default());
    let mut input = Vec::new();
    headers(&mut input, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], true);
    assert_eq!(feed(&mut c, &input).0.unwrap_err().reason, Reason::COMPRESSION_ERROR);
    let _ = Frame::Unknown { kind: 0xff };
}

#[test]
fn a_client_that_keeps_breaking_stream_rules_is_cut_with_enhance_your_calm() {
    let mut c = open(Config { max_stream_errors: 2, ..Config::default() });
    let bad = block(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), ("X-Up", "1")]);
    for stream in [1, 3] {
        let mut input = Vec::new();
        headers(&mut input, stream, &bad, true);
        assert_eq!(feed(&mut c, &input).0.unwrap(), input.len());
    }
    assert_eq!(resets(c.out()), vec![(1, Reason::PROTOCOL_ERROR), (3, Reason::PROTOCOL_ERROR)]);
    let mut input = Vec::new();
    headers(&mut input, 5, &bad, true);
    let e = feed(&mut c, &input).0.unwrap_err();
    assert_eq!((e.reason, e.what), (Reason::ENHANCE_YOUR_CALM, TOO_MANY_STREAM_ERRORS));
    assert_eq!(goaway(c.out()), Some(Reason::ENHANCE_YOUR_CALM));
}

#[test]
fn field_values_are_checked_for_nul_cr_and_lf_at_every_position() {
    // The word-at-a-time check against the byte-at-a-time rule, for every byte value at every
    // position of values of 1 to 24 bytes (whole words, remainders, both).
    let bytewise = |v: &[u8]| {
        !v.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
            && !matches!(v.first(), Some(b' ' | b'\t'))
            && !matches!(v.last(), Some(b' ' | b'\t'))
    };
    for len in 1..=24usize {
        for at in 0..len {
            for b in 0..=255u8 {
                let mut v = vec![b'a'; len];
                v[at] = b;
                assert_eq!(valid_value(&v), bytewise(&v), "byte {b:#04x} at {at} of {len}");
            }
        }
    }
    assert!(valid_value(b""));
}

#[test]
fn field_names_are_lowercase_tokens_byte_by_byte() {
    // RFC 9110 §5.6.2 tchar, less uppercase (RFC 9113 §8.2.1), for every byte value.
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    for b in 0..=255u8 {
        let name = [b'x', b, b'y'];
        assert_eq!(valid_name(&name), tchar(b) && !b.is_ascii_uppercase(), "byte {b:#04x}");
        assert_eq!(is_tchar(b), tchar(b), "byte {b:#04x}");
    }
    assert!(!valid_name(b""));
}
