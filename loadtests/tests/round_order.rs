//! The order the benchmark scripts run their proxies in, round by round (`bench/lib.sh`
//! `in_round_order`): as listed in odd rounds, reversed in even ones, so that in an A/B of two
//! builds neither runs first in every round.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::Command;

/// `in_round_order ROUND NAMES...` as the scripts call it, through bash.
fn order(round: u32, names: &[&str]) -> Option<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/lib.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$0" && in_round_order "$@""#)
        .arg(&lib)
        .arg(round.to_string())
        .args(names)
        .output()
        .ok()?;
    assert!(out.status.success(), "in_round_order failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).expect("utf-8").trim_end().to_owned())
}

#[test]
fn proxies_run_as_listed_in_odd_rounds_and_reversed_in_even_ones() {
    let names = ["gateway-uring", "gateway-baseline", "gateway-epoll", "gateway-baseline-epoll"];
    let Some(first) = order(1, &names) else {
        eprintln!("skipped: no bash to source bench/lib.sh");
        return;
    };
    assert_eq!(first, "gateway-uring gateway-baseline gateway-epoll gateway-baseline-epoll");
    assert_eq!(order(2, &names).unwrap(), "gateway-baseline-epoll gateway-epoll gateway-baseline gateway-uring");
    assert_eq!(order(3, &names).unwrap(), first);
    // Over an even number of rounds, each of two builds runs first as often as the other.
    let firsts: Vec<String> =
        (1..=6).map(|r| order(r, &names[..2]).unwrap().split(' ').next().unwrap().to_owned()).collect();
    assert_eq!(firsts.iter().filter(|f| *f == "gateway-uring").count(), 3);
    // One name, or none: as given.
    assert_eq!(order(2, &["nginx"]).unwrap(), "nginx");
    assert_eq!(order(2, &[]).unwrap(), "");
}
