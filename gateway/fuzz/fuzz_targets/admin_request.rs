//! The admin server's `parse_request` on arbitrary bytes: never panics; an accepted request's
//! body is exactly its Content-Length (at most `MAX_BODY`) and bytes after it change nothing.
//!
//! The check itself is `checks/admin_request.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/admin_request.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
