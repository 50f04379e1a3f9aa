//! `parse_response` on arbitrary bytes: never panics; a parsed head lies inside the input and
//! `max_header_bytes`, its status is 100..=599, responses without a body are framed so, and the
//! head alone parses the same.
//!
//! The check itself is `checks/h1_response.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/h1_response.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
