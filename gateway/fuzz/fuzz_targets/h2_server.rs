//! The gateway's HTTP/2 server codec over arbitrary client bytes; the check is
//! `checks/h2_server.rs`, shared with the replay of the seeds and regression inputs in
//! `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/h2_server.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
