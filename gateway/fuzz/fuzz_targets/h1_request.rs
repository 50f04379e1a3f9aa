//! `parse_request` on arbitrary bytes: never panics; a parsed head lies inside the input and
//! within the limits, every range it reports is inside the head, and the head alone parses the
//! same.
//!
//! The check itself is `checks/h1_request.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/h1_request.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
