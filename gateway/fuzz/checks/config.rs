//! `gateway_config::parse` on arbitrary text: never panics; an accepted config summarises, and
//! a refused one renders its errors, each naming the source.

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match gateway_config::parse(&text, "fuzz.toml") {
        Ok(config) => {
            assert!(!config.summary().is_empty());
        }
        Err(errors) => {
            assert!(!errors.errors.is_empty());
            assert!(errors.to_string().starts_with("fuzz.toml"));
        }
    }
}
