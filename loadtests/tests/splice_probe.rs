//! splice-probe (the copy-against-splice micro-benchmark behind `runtime/splice.rs`'s
//! threshold) moves bodies both ways and prints one row per size.

use std::process::Command;

#[test]
fn splice_probe_moves_bodies_both_ways_and_reports_each_size() {
    let out = Command::new(env!("CARGO_BIN_EXE_splice-probe"))
        .args(["--sizes", "1000,70000,300000", "--iterations", "20", "--rounds", "1"])
        .output()
        .expect("run splice-probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "splice-probe failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    for size in ["1000", "70000", "300000"] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("| 1 | {size} |"))), "no row for {size}:\n{stdout}");
    }
}
