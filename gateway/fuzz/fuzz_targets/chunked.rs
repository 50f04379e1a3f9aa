//! `ChunkedDecoder` on arbitrary bytes split at a fuzzer-chosen point: never panics, never
//! consumes more than it was given, stops short only at the end of the message, and decodes the
//! same (output, consumed bytes, error) in one call as in two.
//!
//! The check itself is `checks/chunked.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/chunked.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
