//! `parse_request` on arbitrary bytes: never panics; a parsed head lies inside the input and
//! within the limits, every range it reports is inside the head, and the head alone parses the
//! same.

use gateway::codec::h1::{parse_request, HeadScratch, RequestLimits, MAX_HEADERS};

/// The test suite's small limits (so the 414/431 paths are reachable) and production-like ones.
const LIMITS: [RequestLimits; 2] = [
    RequestLimits { max_request_line: 64, max_header_bytes: 256, max_headers: 8 },
    RequestLimits { max_request_line: 8 * 1024, max_header_bytes: 64 * 1024, max_headers: 100 },
];

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let Some((&pick, buf)) = data.split_first() else { return };
    let limits = LIMITS[usize::from(pick & 1)];
    let mut scratch = HeadScratch::new(MAX_HEADERS);
    let Ok(Some(head)) = parse_request(buf, &limits, &mut scratch) else { return };
    assert!(head.head_len <= buf.len(), "head_len {} > input {}", head.head_len, buf.len());
    assert!(head.head_len <= limits.max_header_bytes.max(limits.max_request_line + 2));
    assert!(scratch.headers().len() <= limits.max_headers);
    let ranges =
        [Some(&head.method_range), Some(&head.target), Some(&head.path), head.query.as_ref(), head.authority.as_ref()];
    for r in ranges.into_iter().flatten() {
        assert!(r.start <= r.end && r.end <= head.head_len, "range {r:?} outside head of {}", head.head_len);
    }
    for h in scratch.headers() {
        assert!(h.name_range().end <= head.head_len && h.value_range().end <= head.head_len);
    }
    assert!(head.version_minor <= 1);
    let mut again = HeadScratch::new(MAX_HEADERS);
    assert_eq!(parse_request(&buf[..head.head_len], &limits, &mut again), Ok(Some(head)));
    assert_eq!(again.headers(), scratch.headers());
}
