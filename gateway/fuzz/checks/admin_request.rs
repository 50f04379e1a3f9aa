//! The admin server's `parse_request` on arbitrary bytes: never panics; an accepted request's
//! body is exactly its Content-Length (at most `MAX_BODY`) and bytes after it change nothing.

use gateway_admin::{parse_request, MAX_BODY};

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let parsed = parse_request(data);
    match &parsed {
        Ok(Some(req)) => {
            assert!(req.body.len() <= MAX_BODY && req.body.len() <= data.len());
            let declared = req.header("content-length").map_or(Some(0), |v| v.trim().parse::<usize>().ok());
            assert_eq!(declared, Some(req.body.len()));
            assert!(req.headers.iter().all(|(n, _)| !n.bytes().any(|b| b.is_ascii_uppercase())));
            let mut longer = data.to_vec();
            longer.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(parse_request(&longer), parsed);
        }
        Ok(None) => {}
        Err(status) => assert!([400, 413, 431, 501].contains(status), "status {status}"),
    }
}
