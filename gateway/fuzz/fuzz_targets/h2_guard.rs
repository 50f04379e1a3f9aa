//! `FrameGuard` over an in-memory transport carrying a valid connection preface and then
//! arbitrary bytes, read in fuzzer-chosen chunk and buffer sizes: never panics, always makes
//! progress, and delivers a prefix of the input: all of it at EOF, and once tripped nothing more.
//!
//! The check itself is `checks/h2_guard.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/h2_guard.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
