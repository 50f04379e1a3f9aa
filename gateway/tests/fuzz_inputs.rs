//! Every fuzz target's check (`gateway/fuzz/checks/`, the same code `cargo fuzz` runs) on every
//! committed input of that target: the hand-written seeds (`gateway/fuzz/seeds/<target>/`) and
//! the inputs that once made a target fail (`gateway/fuzz/regressions/<target>/`, where the CI
//! fuzz run leaves what it finds). A normal `cargo test`: no nightly, no libFuzzer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, dead_code)]

use std::path::{Path, PathBuf};

#[path = "../fuzz/checks/admin_request.rs"]
mod admin_request;
#[path = "../fuzz/checks/chunked.rs"]
mod chunked;
#[path = "../fuzz/checks/config.rs"]
mod config;
#[path = "../fuzz/checks/h1_request.rs"]
mod h1_request;
#[path = "../fuzz/checks/h1_response.rs"]
mod h1_response;
#[path = "../fuzz/checks/h2_guard.rs"]
mod h2_guard;
#[path = "../fuzz/checks/h2_server.rs"]
mod h2_server;
#[path = "../fuzz/checks/proxy_protocol.rs"]
mod proxy_protocol;
#[path = "../fuzz/checks/route.rs"]
mod route;

/// A target's name and its check.
type Target = (&'static str, fn(&[u8]));

/// Every target with its check: must list every file of `gateway/fuzz/fuzz_targets/`.
const TARGETS: [Target; 9] = [
    ("admin_request", admin_request::check),
    ("chunked", chunked::check),
    ("config", config::check),
    ("h1_request", h1_request::check),
    ("h1_response", h1_response::check),
    ("h2_guard", h2_guard::check),
    ("h2_server", h2_server::check),
    ("proxy_protocol", proxy_protocol::check),
    ("route", route::check),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files directly in `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_regression_input_passes_its_target_check() {
    let mut failed = Vec::new();
    let mut inputs = 0;
    for (target, check) in TARGETS {
        for kind in ["seeds", "regressions"] {
            for file in files(&fuzz_dir().join(kind).join(target)) {
                let data = std::fs::read(&file).unwrap();
                inputs += 1;
                if std::panic::catch_unwind(|| check(&data)).is_err() {
                    failed.push(file.display().to_string());
                }
            }
        }
    }
    assert!(failed.is_empty(), "inputs failing their fuzz check (the panic is printed above): {failed:#?}");
    assert!(inputs >= TARGETS.len(), "every target has a seed ({inputs} inputs)");
}

#[test]
fn every_fuzz_target_is_replayed() {
    let mut targets: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    targets.sort();
    let replayed: Vec<&str> = TARGETS.iter().map(|(t, _)| *t).collect();
    assert_eq!(targets, replayed, "gateway/tests/fuzz_inputs.rs must list every fuzz target");
}
