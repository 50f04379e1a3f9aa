//! `RouteTable::find` over a fixed table with fuzzer-provided method, authority, path, header
//! and identity bytes: never panics, always finds a route (the last one matches everything),
//! and only a route whose conditions hold.
//!
//! The check itself is `checks/route.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/route.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
