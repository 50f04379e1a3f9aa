//! The order the benchmark scripts run their proxies in, round by round (`bench/lib.sh`
//! `in_round_order`): a Williams design, so that over N rounds (2N for an odd number of names)
//! every proxy runs in every place of a round equally often and follows every other proxy
//! equally often. In an A/B of two builds neither runs first, or at a round's edge, in every
//! round.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// `in_round_order ROUND NAMES...` as the scripts call it, through bash (with their `set -eu`).
fn order(round: u32, names: &[&str]) -> Option<Vec<String>> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/lib.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"set -euo pipefail; source "$0" && in_round_order "$@""#)
        .arg(&lib)
        .arg(round.to_string())
        .args(names)
        .output()
        .ok()?;
    assert!(out.status.success(), "in_round_order failed: {}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).expect("utf-8");
    Some(line.split_whitespace().map(str::to_owned).collect())
}

/// How often each name ran in each place (a round's 0-based index).
type Places = HashMap<(String, usize), u32>;
/// How often each name ran right after each other one within a round.
type Follows = HashMap<(String, String), u32>;

/// [`Places`] and [`Follows`] over `rounds` rounds.
fn tally(names: &[&str], rounds: u32) -> (Places, Follows) {
    let (mut places, mut follows) = (HashMap::new(), HashMap::new());
    for r in 1..=rounds {
        let row = order(r, names).unwrap();
        let mut sorted = row.clone();
        sorted.sort();
        let mut given: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        given.sort();
        assert_eq!(sorted, given, "round {r} runs every name once: {row:?}");
        for (place, name) in row.iter().enumerate() {
            *places.entry((name.clone(), place)).or_default() += 1;
        }
        for pair in row.windows(2) {
            *follows.entry((pair[0].clone(), pair[1].clone())).or_default() += 1;
        }
    }
    (places, follows)
}

#[test]
fn every_proxy_runs_in_every_place_equally_often() {
    let names = ["gateway-uring", "gateway-baseline", "gateway-epoll", "gateway-baseline-epoll"];
    let Some(first) = order(1, &names) else {
        eprintln!("skipped: no bash to source bench/lib.sh");
        return;
    };
    // The first round runs them as listed, except that the last two swap (0, 1, n-1, 2, ...).
    assert_eq!(first, ["gateway-uring", "gateway-baseline", "gateway-baseline-epoll", "gateway-epoll"]);
    assert_eq!(order(5, &names).unwrap(), first, "the design repeats every 4 rounds");
    for (list, rounds) in [(&names[..], 4), (&names[..3], 6), (&["a", "b", "c", "d", "e", "f"][..], 6)] {
        let (places, follows) = tally(list, rounds);
        let per_place = rounds / list.len() as u32;
        for name in list {
            for place in 0..list.len() {
                let n = places.get(&((*name).to_owned(), place)).copied().unwrap_or(0);
                assert_eq!(n, per_place, "{name} in place {place} over {rounds} rounds of {list:?}");
            }
        }
        if list.len() % 2 == 0 {
            // An even number: each ordered pair of neighbours exactly once.
            assert!(follows.values().all(|&n| n == 1), "{follows:?}");
            assert_eq!(follows.len(), list.len() * (list.len() - 1));
        }
    }
    // An A/B of two builds: A B, B A, ...
    assert_eq!(order(1, &names[..2]).unwrap(), ["gateway-uring", "gateway-baseline"]);
    assert_eq!(order(2, &names[..2]).unwrap(), ["gateway-baseline", "gateway-uring"]);
    // One name, or none: as given.
    assert_eq!(order(2, &["nginx"]).unwrap(), ["nginx"]);
    assert!(order(2, &[]).unwrap().is_empty());
}
