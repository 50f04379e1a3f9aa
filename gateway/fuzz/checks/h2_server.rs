//! The gateway's HTTP/2 server codec (`gateway_h2::server::Conn`) fed a valid client preface and
//! then arbitrary bytes, in fuzzer-chosen chunk sizes, answering every request it reports (a
//! head, some DATA, sometimes trailers or a reset) and releasing every body byte: never panics,
//! never takes more than it was given, stops reading after a connection error, and only ever
//! writes whole, well-formed frames.
//!
//! Shared with the replay of the seeds and regression inputs in `cargo test`
//! (`gateway/tests/fuzz_inputs.rs`).

use gateway_h2::frame::{self, Reason};
use gateway_h2::server::{Config, Conn, Event};

/// Small limits, so every one of them is within reach of short inputs.
const CONFIG: Config = Config {
    max_concurrent_streams: 3,
    stream_window: 65_535,
    conn_window: 65_535,
    max_frame: 16_384,
    max_header_list: 1024,
    max_stream_errors: 5,
};

pub fn check(data: &[u8]) {
    let Some((&knobs, rest)) = data.split_first() else { return };
    // The chunk size of the reads, and whether the preface is given (else the input is all).
    let chunk = usize::from(knobs & 0x3f) + 1;
    let mut input = Vec::new();
    if knobs & 0x40 == 0 {
        input.extend_from_slice(frame::PREFACE);
        frame::write_settings(&mut input, &[]);
    }
    input.extend_from_slice(rest);

    let mut conn = Conn::new(CONFIG);
    let mut events = Vec::new();
    let mut held = Vec::new();
    let mut at = 0;
    let mut failed = false;
    while at < input.len() && !failed {
        let end = (at + chunk).min(input.len());
        held.extend_from_slice(&input[at..end]);
        at = end;
        match conn.recv(&held, &mut events) {
            Ok(n) => {
                assert!(n <= held.len(), "took {n} of {} bytes", held.len());
                answer(&mut conn, &mut events, &held);
                held.drain(..n);
            }
            Err(e) => {
                failed = true;
                events.clear();
                assert!(conn.out().len() >= 9, "a connection error ({:?}) writes GOAWAY", e.reason);
            }
        }
        check_frames(conn.out());
        conn.out().clear();
    }
    if failed {
        // Nothing more is read after a connection error.
        let mut ev = Vec::new();
        assert_eq!(conn.recv(b"\0\0\0\x04\0\0\0\0\0", &mut ev).unwrap_or(0), 0);
        assert!(ev.is_empty());
    }
    conn.shutdown();
    check_frames(conn.out());
}

/// Plays the application: answers requests, releases body bytes, lets ended streams go.
fn answer(conn: &mut Conn, events: &mut Vec<Event>, input: &[u8]) {
    for event in events.drain(..) {
        match event {
            Event::Request { stream, head, end_stream } => {
                let fields: Vec<(&[u8], &[u8])> = head.iter().collect();
                let _ = conn.send_head(stream, 200, fields.iter().copied(), false);
                let body = head.path().unwrap_or_default();
                let _ = conn.send_data(stream, body, end_stream && stream % 3 != 0);
                if stream % 5 == 0 {
                    let _ = conn.send_trailers(stream, [(&b"x-t"[..], &b"1"[..])]);
                }
                if stream % 7 == 0 {
                    conn.reset(stream, Reason::CANCEL);
                    conn.forget(stream);
                }
            }
            Event::Refused { stream, status } => {
                let _ = conn.send_head(stream, status, std::iter::empty(), true);
                conn.forget(stream);
            }
            Event::Data { stream, start, end, end_stream } => {
                assert!(start <= end && end <= input.len(), "DATA range {start}..{end} of {}", input.len());
                conn.release(stream, end - start);
                if end_stream {
                    let _ = conn.send_data(stream, b"", true);
                    conn.forget(stream);
                }
            }
            Event::Trailers { stream, .. } | Event::Reset { stream, .. } => conn.forget(stream),
            Event::Writable { stream } => {
                let _ = conn.send_data(stream, b"more", true);
            }
            Event::GoAway { .. } => {}
        }
    }
}

/// The output is a sequence of whole frames, each within the default frame size.
fn check_frames(out: &[u8]) {
    let mut at = 0;
    while at < out.len() {
        let head = frame::parse_head(&out[at..]).expect("a whole frame header");
        assert!(head.len <= frame::DEFAULT_MAX_FRAME, "frame of {} bytes", head.len);
        at += frame::HEAD_LEN + head.len as usize;
    }
    assert_eq!(at, out.len(), "a frame cut short");
}
