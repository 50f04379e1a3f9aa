#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::*;
use proptest::prelude::*;

const CONN_PROTOCOL: FrameError = Connection(Reason::PROTOCOL_ERROR);
const CONN_SIZE: FrameError = Connection(Reason::FRAME_SIZE_ERROR);

/// Parses one whole frame from `bytes` (header and exactly its payload).
fn parse_all(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let head = parse_head(bytes).unwrap();
    assert_eq!(bytes.len(), HEAD_LEN + head.len as usize, "one whole frame");
    parse(&head, &bytes[HEAD_LEN..])
}

fn parse_raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let head = Head { len: payload.len() as u32, kind, flags, stream };
    parse(&head, payload)
}

// ---- Header and constants ------------------------------------------------------------------

#[test]
fn head_needs_nine_bytes_and_masks_reserved_bit() {
    assert_eq!(parse_head(&[0; 8]), None);
    let head = parse_head(&[0x12, 0x34, 0x56, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xaa]).unwrap();
    assert_eq!(head, Head { len: 0x12_3456, kind: 7, flags: 0xff, stream: MAX_WINDOW });
    assert!(head.has(flag::PADDED));
}

#[test]
fn reason_names() {
    assert_eq!(Reason::NO_ERROR.name(), "NO_ERROR");
    assert_eq!(Reason::FRAME_SIZE_ERROR.name(), "FRAME_SIZE_ERROR");
    assert_eq!(Reason::HTTP_1_1_REQUIRED, Reason(0xd));
    assert_eq!(Reason::HTTP_1_1_REQUIRED.name(), "HTTP_1_1_REQUIRED");
    assert_eq!(Reason(0xe).name(), "UNKNOWN");
    assert_eq!(Reason(0xe).to_string(), "UNKNOWN(0xe)");
    assert_eq!(Stream(3, Reason::CANCEL).to_string(), "stream 3 error CANCEL");
    assert_eq!(Stream(3, Reason::CANCEL).reason(), Reason::CANCEL);
    assert_eq!(PREFACE.len(), 24);
}

// ---- DATA ----------------------------------------------------------------------------------

#[test]
fn data_plain_and_padded() {
    let Ok(Frame::Data { stream: 1, data: b"hello", end_stream: true, flow_len: 5 }) =
        parse_raw(kind::DATA, flag::END_STREAM, 1, b"hello")
    else {
        panic!()
    };
    // Pad length 2: flow control counts all 8 bytes.
    let Ok(Frame::Data { data: b"hello", end_stream: false, flow_len: 8, .. }) =
        parse_raw(kind::DATA, flag::PADDED, 1, b"\x02hello\0\0")
    else {
        panic!()
    };
    // Padding may take all but the pad length byte.
    let Ok(Frame::Data { data: b"", flow_len: 3, .. }) = parse_raw(kind::DATA, flag::PADDED, 1, b"\x02\0\0") else {
        panic!()
    };
}

#[test]
fn data_on_stream_zero_is_connection_error() {
    assert_eq!(parse_raw(kind::DATA, 0, 0, b"x").unwrap_err(), CONN_PROTOCOL);
}

#[test]
fn data_padding_too_long_is_connection_error() {
    // Pad length equal to the payload length, greater, and a missing pad length byte.
    assert_eq!(parse_raw(kind::DATA, flag::PADDED, 1, b"\x03\0\0").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::DATA, flag::PADDED, 1, b"\xffab").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::DATA, flag::PADDED, 1, b"").unwrap_err(), CONN_PROTOCOL);
}

// ---- HEADERS -------------------------------------------------------------------------------

#[test]
fn headers_plain_padded_and_with_priority() {
    let Ok(Frame::Headers { stream: 3, block: b"abc", end_stream: true, end_headers: true, priority: None }) =
        parse_raw(kind::HEADERS, flag::END_STREAM | flag::END_HEADERS, 3, b"abc")
    else {
        panic!()
    };
    let Ok(Frame::Headers { block: b"abc", end_stream: false, end_headers: false, priority: None, .. }) =
        parse_raw(kind::HEADERS, flag::PADDED, 3, b"\x01abc\0")
    else {
        panic!()
    };
    let payload = b"\x02\x80\0\0\x01\x0fabc\0\0";
    let Ok(Frame::Headers { block: b"abc", priority: Some(p), .. }) =
        parse_raw(kind::HEADERS, flag::PADDED | flag::PRIORITY, 3, payload)
    else {
        panic!()
    };
    assert_eq!(p, Priority { dependency: 1, exclusive: true, weight: 15 });
}

#[test]
fn headers_on_stream_zero_is_connection_error() {
    assert_eq!(parse_raw(kind::HEADERS, flag::END_HEADERS, 0, b"abc").unwrap_err(), CONN_PROTOCOL);
}

#[test]
fn headers_padding_too_long_is_connection_error() {
    assert_eq!(parse_raw(kind::HEADERS, flag::PADDED, 1, b"\x03ab").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::HEADERS, flag::PADDED, 1, b"").unwrap_err(), CONN_PROTOCOL);
    // Padding may not eat into the priority fields either (§6.2).
    let payload = b"\x02\0\0\0\x01\x0f\0";
    assert_eq!(parse_raw(kind::HEADERS, flag::PADDED | flag::PRIORITY, 3, payload).unwrap_err(), CONN_PROTOCOL);
}

#[test]
fn headers_priority_needs_five_bytes() {
    assert_eq!(parse_raw(kind::HEADERS, flag::PRIORITY, 1, b"\0\0\0\0").unwrap_err(), CONN_SIZE);
    assert_eq!(parse_raw(kind::HEADERS, flag::PADDED | flag::PRIORITY, 1, b"\0\0\0\0\0").unwrap_err(), CONN_SIZE);
    let Ok(Frame::Headers { block: b"", priority: Some(_), .. }) =
        parse_raw(kind::HEADERS, flag::PRIORITY, 1, b"\0\0\0\0\0")
    else {
        panic!()
    };
}

#[test]
fn headers_self_dependency_is_stream_error_and_block_stays_readable() {
    let payload = b"\0\0\0\x05\x10block";
    let head = Head { len: payload.len() as u32, kind: kind::HEADERS, flags: flag::PRIORITY, stream: 5 };
    assert_eq!(parse(&head, payload).unwrap_err(), Stream(5, Reason::PROTOCOL_ERROR));
    // Exclusive bit set, same id: still a self-dependency.
    assert_eq!(
        parse_raw(kind::HEADERS, flag::PRIORITY, 5, b"\x80\0\0\x05\x10").unwrap_err(),
        Stream(5, Reason::PROTOCOL_ERROR)
    );
    assert_eq!(header_block(&head, payload), Ok(&b"block"[..]));
}

// ---- PRIORITY ------------------------------------------------------------------------------

#[test]
fn priority_frame() {
    let Ok(Frame::Priority { stream: 3, priority }) = parse_raw(kind::PRIORITY, 0, 3, b"\0\0\0\x01\xff") else {
        panic!()
    };
    assert_eq!(priority, Priority { dependency: 1, exclusive: false, weight: 255 });
}

#[test]
fn priority_errors() {
    assert_eq!(parse_raw(kind::PRIORITY, 0, 0, b"\0\0\0\x01\x10").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::PRIORITY, 0, 3, b"\0\0\0\x01").unwrap_err(), Stream(3, Reason::FRAME_SIZE_ERROR));
    assert_eq!(parse_raw(kind::PRIORITY, 0, 3, b"\0\0\0\x01\x10\0").unwrap_err(), Stream(3, Reason::FRAME_SIZE_ERROR));
    assert_eq!(parse_raw(kind::PRIORITY, 0, 3, b"\0\0\0\x03\x10").unwrap_err(), Stream(3, Reason::PROTOCOL_ERROR));
}

// ---- RST_STREAM ----------------------------------------------------------------------------

#[test]
fn rst_stream_errors() {
    assert_eq!(parse_raw(kind::RST_STREAM, 0, 0, b"\0\0\0\x08").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::RST_STREAM, 0, 1, b"\0\0\x08").unwrap_err(), CONN_SIZE);
    assert_eq!(parse_raw(kind::RST_STREAM, 0, 1, b"\0\0\0\x08\0").unwrap_err(), CONN_SIZE);
}

// ---- SETTINGS ------------------------------------------------------------------------------

fn settings_payload(params: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(&mut out, params);
    out.split_off(HEAD_LEN)
}

fn settings_result(params: &[(u16, u32)]) -> Result<(), FrameError> {
    parse_raw(kind::SETTINGS, 0, 0, &settings_payload(params)).map(|_| ())
}

#[test]
fn settings_iterates_pairs_in_order_unknown_ids_included() {
    let params = [
        (setting::HEADER_TABLE_SIZE, u32::MAX),
        (setting::ENABLE_PUSH, 0),
        (setting::MAX_CONCURRENT_STREAMS, 0),
        (setting::INITIAL_WINDOW_SIZE, MAX_WINDOW),
        (setting::MAX_FRAME_SIZE, MAX_MAX_FRAME),
        (setting::MAX_FRAME_SIZE, DEFAULT_MAX_FRAME),
        (setting::MAX_HEADER_LIST_SIZE, 1),
        (setting::ENABLE_CONNECT_PROTOCOL, 1),
        (0xabcd, 0xdead_beef),
    ];
    let payload = settings_payload(&params);
    let Ok(Frame::Settings { ack: false, settings }) = parse_raw(kind::SETTINGS, 0, 0, &payload) else { panic!() };
    assert_eq!(settings.len(), params.len());
    assert!(!settings.is_empty());
    assert_eq!(settings.iter().collect::<Vec<_>>(), params);
}

#[test]
fn settings_ack() {
    let Ok(Frame::Settings { ack: true, settings }) = parse_raw(kind::SETTINGS, flag::ACK, 0, b"") else { panic!() };
    assert!(settings.is_empty());
    assert_eq!(settings.iter().count(), 0);
    assert_eq!(parse_raw(kind::SETTINGS, flag::ACK, 0, &[0; 6]).unwrap_err(), CONN_SIZE);
}

#[test]
fn settings_on_a_stream_is_connection_error() {
    assert_eq!(parse_raw(kind::SETTINGS, 0, 1, b"").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::SETTINGS, flag::ACK, 1, b"").unwrap_err(), CONN_PROTOCOL);
}

#[test]
fn settings_length_not_multiple_of_six() {
    for len in [1, 5, 7, 11, 13] {
        assert_eq!(parse_raw(kind::SETTINGS, 0, 0, &vec![0; len]).unwrap_err(), CONN_SIZE, "{len}");
    }
}

#[test]
fn settings_enable_push_must_be_boolean() {
    assert_eq!(settings_result(&[(setting::ENABLE_PUSH, 1)]), Ok(()));
    assert_eq!(settings_result(&[(setting::ENABLE_PUSH, 2)]), Err(CONN_PROTOCOL));
    assert_eq!(settings_result(&[(setting::ENABLE_PUSH, 0), (setting::ENABLE_PUSH, u32::MAX)]), Err(CONN_PROTOCOL));
}

#[test]
fn settings_initial_window_size_too_large_is_flow_control_error() {
    assert_eq!(settings_result(&[(setting::INITIAL_WINDOW_SIZE, MAX_WINDOW)]), Ok(()));
    assert_eq!(
        settings_result(&[(setting::INITIAL_WINDOW_SIZE, MAX_WINDOW + 1)]),
        Err(Connection(Reason::FLOW_CONTROL_ERROR))
    );
}

#[test]
fn settings_max_frame_size_range() {
    for ok in [DEFAULT_MAX_FRAME, 100_000, MAX_MAX_FRAME] {
        assert_eq!(settings_result(&[(setting::MAX_FRAME_SIZE, ok)]), Ok(()), "{ok}");
    }
    for bad in [0, DEFAULT_MAX_FRAME - 1, MAX_MAX_FRAME + 1, u32::MAX] {
        assert_eq!(settings_result(&[(setting::MAX_FRAME_SIZE, bad)]), Err(CONN_PROTOCOL), "{bad}");
    }
}

#[test]
fn settings_enable_connect_protocol_must_be_boolean() {
    assert_eq!(settings_result(&[(setting::ENABLE_CONNECT_PROTOCOL, 0)]), Ok(()));
    assert_eq!(settings_result(&[(setting::ENABLE_CONNECT_PROTOCOL, 2)]), Err(CONN_PROTOCOL));
}

// ---- PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION, unknown ----------------------

#[test]
fn push_promise_from_client_is_connection_error() {
    assert_eq!(parse_raw(kind::PUSH_PROMISE, flag::END_HEADERS, 1, b"\0\0\0\x02abc").unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::PUSH_PROMISE, 0, 0, b"").unwrap_err(), CONN_PROTOCOL);
}

#[test]
fn ping_errors() {
    assert_eq!(parse_raw(kind::PING, 0, 1, &[0; 8]).unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::PING, 0, 0, &[0; 7]).unwrap_err(), CONN_SIZE);
    assert_eq!(parse_raw(kind::PING, 0, 0, &[0; 9]).unwrap_err(), CONN_SIZE);
    let Ok(Frame::Ping { ack: false, data: [1, 2, 3, 4, 5, 6, 7, 8] }) =
        parse_raw(kind::PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8])
    else {
        panic!()
    };
}

#[test]
fn goaway_errors() {
    assert_eq!(parse_raw(kind::GOAWAY, 0, 1, &[0; 8]).unwrap_err(), CONN_PROTOCOL);
    assert_eq!(parse_raw(kind::GOAWAY, 0, 0, &[0; 7]).unwrap_err(), CONN_SIZE);
    let Ok(Frame::GoAway { last_stream: 0, reason: Reason::NO_ERROR, debug: b"" }) =
        parse_raw(kind::GOAWAY, 0, 0, &[0; 8])
    else {
        panic!()
    };
}

#[test]
fn window_update_errors() {
    assert_eq!(parse_raw(kind::WINDOW_UPDATE, 0, 1, b"\0\0\x01").unwrap_err(), CONN_SIZE);
    assert_eq!(parse_raw(kind::WINDOW_UPDATE, 0, 0, b"\0\0\0\x01\0").unwrap_err(), CONN_SIZE);
    assert_eq!(parse_raw(kind::WINDOW_UPDATE, 0, 7, b"\0\0\0\0").unwrap_err(), Stream(7, Reason::PROTOCOL_ERROR));
    assert_eq!(parse_raw(kind::WINDOW_UPDATE, 0, 0, b"\0\0\0\0").unwrap_err(), CONN_PROTOCOL);
    // Only the reserved bit set: the increment is still 0.
    assert_eq!(parse_raw(kind::WINDOW_UPDATE, 0, 0, b"\x80\0\0\0").unwrap_err(), CONN_PROTOCOL);
    let Ok(Frame::WindowUpdate { stream: 7, increment: 1 }) = parse_raw(kind::WINDOW_UPDATE, 0, 7, b"\x80\0\0\x01")
    else {
        panic!()
    };
}

#[test]
fn continuation() {
    assert_eq!(parse_raw(kind::CONTINUATION, flag::END_HEADERS, 0, b"abc").unwrap_err(), CONN_PROTOCOL);
    // PADDED means nothing on CONTINUATION: the whole payload is block.
    let Ok(Frame::Continuation { stream: 1, block: b"\x05abc", end_headers: true }) =
        parse_raw(kind::CONTINUATION, flag::END_HEADERS | flag::PADDED, 1, b"\x05abc")
    else {
        panic!()
    };
}

#[test]
fn unknown_types_are_ignored() {
    for k in [10, 0x10, 0xff] {
        let Ok(Frame::Unknown { kind }) = parse_raw(k, 0xff, 0, b"anything") else { panic!() };
        assert_eq!(kind, k);
    }
}

// ---- Writers round trip ----------------------------------------------------------------------

#[test]
fn write_settings_round_trip() {
    let mut out = Vec::new();
    write_settings(&mut out, &[(setting::MAX_CONCURRENT_STREAMS, 100), (setting::INITIAL_WINDOW_SIZE, 65_535)]);
    assert_eq!(out.len(), HEAD_LEN + 12);
    let Ok(Frame::Settings { ack: false, settings }) = parse_all(&out) else { panic!() };
    assert_eq!(settings.iter().collect::<Vec<_>>(), [(3, 100), (4, 65_535)]);

    let mut out = Vec::new();
    write_settings(&mut out, &[]);
    let Ok(Frame::Settings { ack: false, settings }) = parse_all(&out) else { panic!() };
    assert!(settings.is_empty());
}

#[test]
fn write_settings_ack_round_trip() {
    let mut out = Vec::new();
    write_settings_ack(&mut out);
    assert_eq!(out, [0, 0, 0, kind::SETTINGS, flag::ACK, 0, 0, 0, 0]);
    let Ok(Frame::Settings { ack: true, .. }) = parse_all(&out) else { panic!() };
}

#[test]
fn write_ping_ack_round_trip() {
    let mut out = Vec::new();
    write_ping_ack(&mut out, *b"12345678");
    let Ok(Frame::Ping { ack: true, data }) = parse_all(&out) else { panic!() };
    assert_eq!(&data, b"12345678");
}

#[test]
fn write_window_update_round_trip() {
    for (stream, increment) in [(0, 1), (5, MAX_WINDOW), (MAX_WINDOW, 65_535)] {
        let mut out = Vec::new();
        write_window_update(&mut out, stream, increment);
        let Ok(Frame::WindowUpdate { stream: s, increment: i }) = parse_all(&out) else { panic!() };
        assert_eq!((s, i), (stream, increment));
    }
}

#[test]
fn write_rst_round_trip() {
    let mut out = Vec::new();
    write_rst(&mut out, 9, Reason::REFUSED_STREAM);
    let Ok(Frame::Reset { stream: 9, reason: Reason::REFUSED_STREAM }) = parse_all(&out) else { panic!() };
}

#[test]
fn write_goaway_round_trip() {
    let mut out = Vec::new();
    write_goaway(&mut out, 41, Reason::ENHANCE_YOUR_CALM, b"slow down");
    let Ok(Frame::GoAway { last_stream: 41, reason: Reason::ENHANCE_YOUR_CALM, debug: b"slow down" }) = parse_all(&out)
    else {
        panic!()
    };
    // Oversized debug data is cut to fit the smallest frame size a peer may allow.
    let mut out = Vec::new();
    write_goaway(&mut out, 1, Reason::NO_ERROR, &vec![b'x'; 20_000]);
    assert_eq!(parse_head(&out).unwrap().len, DEFAULT_MAX_FRAME);
    let Ok(Frame::GoAway { debug, .. }) = parse_all(&out) else { panic!() };
    assert_eq!(debug.len(), DEFAULT_MAX_FRAME as usize - 8);
}

#[test]
fn write_data_round_trip() {
    let mut out = b"prefix".to_vec();
    write_data(&mut out, 3, b"body", false);
    write_data(&mut out, 3, b"", true);
    let (first, second) = out[6..].split_at(HEAD_LEN + 4);
    let Ok(Frame::Data { stream: 3, data: b"body", end_stream: false, flow_len: 4 }) = parse_all(first) else {
        panic!()
    };
    let Ok(Frame::Data { stream: 3, data: b"", end_stream: true, flow_len: 0 }) = parse_all(second) else { panic!() };
}

// ---- finish_headers ------------------------------------------------------------------------------

/// Writes `block` as a header block after `prefix` and returns the buffer and block_start.
fn headers_out(prefix: &[u8], block: &[u8], stream: u32, end_stream: bool, max_frame: u32) -> Vec<u8> {
    let mut out = prefix.to_vec();
    let block_start = write_headers_reserve(&mut out);
    assert_eq!(block_start, prefix.len() + HEAD_LEN);
    out.extend_from_slice(block);
    finish_headers(&mut out, block_start, stream, end_stream, max_frame);
    out
}

/// Walks the frames in `bytes`: checks the HEADERS + CONTINUATION sequence and flags, and
/// returns the reassembled block and the number of frames.
fn reassemble(mut bytes: &[u8], stream: u32, end_stream: bool, max_frame: u32) -> (Vec<u8>, usize) {
    let mut block = Vec::new();
    let mut frames = 0;
    while !bytes.is_empty() {
        let head = parse_head(bytes).unwrap();
        assert!(head.len <= max_frame);
        let (frame, rest) = bytes[HEAD_LEN..].split_at(head.len as usize);
        bytes = rest;
        let last = bytes.is_empty();
        match parse(&head, frame).unwrap() {
            Frame::Headers { stream: s, block: b, end_stream: es, end_headers, priority: None } => {
                assert_eq!(frames, 0, "HEADERS comes first");
                assert_eq!((s, es, end_headers), (stream, end_stream, last));
                block.extend_from_slice(b);
            }
            Frame::Continuation { stream: s, block: b, end_headers } => {
                assert!(frames > 0, "CONTINUATION follows HEADERS");
                assert_eq!((s, end_headers), (stream, last));
                assert_eq!(head.flags & flag::END_STREAM, 0, "END_STREAM only on HEADERS");
                assert!(!b.is_empty());
                block.extend_from_slice(b);
            }
            other => panic!("unexpected {other:?}"),
        }
        frames += 1;
    }
    (block, frames)
}

#[test]
fn finish_headers_single_frame() {
    let out = headers_out(b"xy", b"encoded block", 1, true, DEFAULT_MAX_FRAME);
    assert_eq!(&out[..2], b"xy");
    assert_eq!(out.len(), 2 + HEAD_LEN + 13);
    let head = parse_head(&out[2..]).unwrap();
    assert_eq!(head, Head { len: 13, kind: kind::HEADERS, flags: flag::END_STREAM | flag::END_HEADERS, stream: 1 });
    assert_eq!(reassemble(&out[2..], 1, true, DEFAULT_MAX_FRAME), (b"encoded block".to_vec(), 1));

    let out = headers_out(b"", b"", 3, false, DEFAULT_MAX_FRAME);
    assert_eq!(out, [0, 0, 0, kind::HEADERS, flag::END_HEADERS, 0, 0, 0, 3]);
}

#[test]
fn finish_headers_splits_into_continuations() {
    let block: Vec<u8> = (0..100u8).collect();
    for len in [16, 17, 31, 32, 33, 48, 100] {
        for end_stream in [false, true] {
            let out = headers_out(b"before", &block[..len], 5, end_stream, 16);
            assert_eq!(&out[..6], b"before");
            let (got, frames) = reassemble(&out[6..], 5, end_stream, 16);
            assert_eq!(got, &block[..len], "{len}");
            assert_eq!(frames, len.div_ceil(16), "{len}");
            assert_eq!(out.len(), 6 + frames * HEAD_LEN + len);
        }
    }
    // Exact layout for 17 bytes at max 16: HEADERS(16) then CONTINUATION(1) with END_HEADERS.
    let out = headers_out(b"", &block[..17], 1, true, 16);
    assert_eq!(&out[..HEAD_LEN], [0, 0, 16, kind::HEADERS, flag::END_STREAM, 0, 0, 0, 1]);
    assert_eq!(&out[HEAD_LEN + 16..2 * HEAD_LEN + 16], [0, 0, 1, kind::CONTINUATION, flag::END_HEADERS, 0, 0, 0, 1]);
    assert_eq!(out[2 * HEAD_LEN + 16], 16);
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), kind in 0u8..12, flags in any::<u8>()) {
        if let Some(mut head) = parse_head(&bytes) {
            // As the caller does: the payload is exactly head.len bytes (cut to what is there).
            let payload = &bytes[HEAD_LEN..];
            let payload = &payload[..payload.len().min(head.len as usize)];
            head.len = payload.len() as u32;
            let _ = parse(&head, payload);
            // And with a known frame type and random flags, to reach every rule.
            let head = Head { kind, flags, ..head };
            if let Ok(Frame::Settings { settings, .. }) = parse(&head, payload) {
                prop_assert_eq!(settings.iter().count() * 6, payload.len());
            }
            // A header that disagrees with the payload must not panic either.
            let _ = parse(&Head { len: u32::MAX, ..head }, payload);
        }
    }

    #[test]
    fn finish_headers_round_trips(block in proptest::collection::vec(any::<u8>(), 0..200), max in 1u32..40, end_stream in any::<bool>()) {
        let out = headers_out(b"p", &block, 7, end_stream, max);
        let (got, frames) = reassemble(&out[1..], 7, end_stream, max);
        prop_assert_eq!(got, block.clone());
        prop_assert_eq!(frames, block.len().div_ceil(max as usize).max(1));
    }
}
