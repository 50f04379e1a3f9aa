//! `gateway_config::parse` on arbitrary text: never panics; an accepted config summarises, and
//! a refused one renders its errors, each naming the source.
//!
//! The check itself is `checks/config.rs`, shared with the replay of the seeds and regression
//! inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/config.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
