//! `parse_response` on arbitrary bytes: never panics; a parsed head lies inside the input and
//! `max_header_bytes`, its status is 100..=599, responses without a body are framed so, and the
//! head alone parses the same.

use gateway::codec::h1::{parse_response, HeadScratch, ResponseFraming};

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let Some((&pick, buf)) = data.split_first() else { return };
    let request_was_head = pick & 1 == 1;
    let max_header_bytes = if pick & 2 == 0 { 256 } else { 64 * 1024 };
    let mut scratch = HeadScratch::new(if pick & 4 == 0 { 8 } else { 100 });
    let Ok(Some(head)) = parse_response(buf, max_header_bytes, request_was_head, &mut scratch) else { return };
    assert!(head.head_len <= buf.len() && head.head_len <= max_header_bytes);
    assert!((100..=599).contains(&head.status), "status {}", head.status);
    assert!(head.reason.start <= head.reason.end && head.reason.end <= head.head_len);
    for h in scratch.headers() {
        assert!(h.name_range().end <= head.head_len && h.value_range().end <= head.head_len);
    }
    if request_was_head || head.status < 200 || head.status == 204 || head.status == 304 {
        assert_eq!(head.framing, ResponseFraming::None, "status {}", head.status);
    }
    if head.framing == ResponseFraming::UntilClose {
        assert!(!head.keep_alive);
    }
    let mut again = HeadScratch::new(scratch.max_headers());
    assert_eq!(parse_response(&buf[..head.head_len], max_header_bytes, request_was_head, &mut again), Ok(Some(head)));
}
