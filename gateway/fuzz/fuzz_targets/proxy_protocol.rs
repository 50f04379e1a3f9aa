//! `proxy_protocol::parse` on arbitrary bytes under a mode chosen by the first byte: never
//! panics; a header never claims more bytes than it was given (nor past the v1/v2 limits); an
//! incomplete answer stays incomplete or becomes the same decision on any prefix; a header
//! parses the same from exactly its own bytes (so reading no further than it is safe).
//!
//! The check itself is `checks/proxy_protocol.rs`, shared with the replay of the seeds and
//! regression inputs in `cargo test` (`gateway/tests/fuzz_inputs.rs`).
#![no_main]

#[path = "../checks/proxy_protocol.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
