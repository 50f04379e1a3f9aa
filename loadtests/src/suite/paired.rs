//! The CPU targets round by round: in each round, the gateway's figure over the better of
//! nginx's and HAProxy's in that same round. The suite's other rows divide medians taken over
//! all rounds; on a shared VM the host speeds up and slows down between rounds, and a proxy
//! that happened to run in a quick stretch of one round moves its median. A ratio taken inside
//! one round compares runs a minute apart, and the rounds' spread says how far to trust it.

use serde::Serialize;
use serde_json::Value;

use super::targets::GATEWAY;

/// The peers a round compares the gateway with.
const PEERS: [&str; 2] = ["nginx", "haproxy"];

/// The per-round ratios of one figure in one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Rounds with the gateway's figure and at least one peer's.
    pub rounds: u64,
    /// Of those, rounds whose ratio was at or under the target.
    pub at_or_under: u64,
}

/// One scenario's per-round ratios, by CPU per request and by the proxy's CPU over the origin's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedRow {
    pub scenario: String,
    pub cpu: Option<Paired>,
    pub cpu_per_origin: Option<Paired>,
}

/// The per-round ratios of `key` over the runs of `doc` whose `test` is `test`, against
/// `target`. `None` when no round has the gateway's figure and a peer's. Figures that are
/// missing, not numbers, or not above zero are left out.
pub fn against_better_peer(doc: &Value, test: &str, key: &str, target: f64) -> Option<Paired> {
    let runs = doc.get("runs")?.as_array()?;
    let figure = |round: u64, proxy: &str| {
        runs.iter()
            .filter(|r| r.get("test").and_then(Value::as_str) == Some(test))
            .filter(|r| r.get("round").and_then(Value::as_u64) == Some(round))
            .filter(|r| r.get("proxy").and_then(Value::as_str) == Some(proxy))
            .find_map(|r| r.get(key).and_then(Value::as_f64))
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let mut rounds: Vec<u64> = runs.iter().filter_map(|r| r.get("round").and_then(Value::as_u64)).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let mut ratios: Vec<f64> = rounds
        .into_iter()
        .filter_map(|round| {
            let gateway = figure(round, GATEWAY)?;
            let best = PEERS.iter().filter_map(|p| figure(round, p)).min_by(f64::total_cmp)?;
            Some(gateway / best)
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let mid = |i: usize| ratios.get(i).copied().unwrap_or(f64::NAN);
    let median = if n % 2 == 1 { mid(n / 2) } else { (mid(n / 2 - 1) + mid(n / 2)) / 2.0 };
    Some(Paired {
        median,
        min: mid(0),
        max: mid(n - 1),
        rounds: n as u64,
        at_or_under: ratios.iter().filter(|r| **r <= target).count() as u64,
    })
}

/// The row of `scenario` from its file `doc`: its runs of `test`, CPU per request under `key`.
pub fn row(scenario: &str, doc: &Value, test: &str, key: &str, target: f64) -> Option<PairedRow> {
    let cpu = against_better_peer(doc, test, key, target);
    let cpu_per_origin = against_better_peer(doc, test, "cpu_per_origin_cpu", target);
    (cpu.is_some() || cpu_per_origin.is_some()).then(|| PairedRow {
        scenario: scenario.to_owned(),
        cpu,
        cpu_per_origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(test: &str, proxy: &str, round: u64, cpu: f64, ratio: f64) -> Value {
        json!({"test": test, "proxy": proxy, "round": round, "cpu_us_per_req": cpu, "cpu_per_origin_cpu": ratio})
    }

    #[test]
    fn each_round_against_its_own_better_peer() {
        let doc = json!({"runs": [
            // Round 1: nginx is the better peer; round 2: HAProxy; round 3: a quick host for all.
            run("wrk", "gateway-uring", 1, 16.0, 1.8), run("wrk", "nginx", 1, 20.0, 2.0), run("wrk", "haproxy", 1, 21.0, 2.1),
            run("wrk", "gateway-uring", 2, 18.0, 1.9), run("wrk", "nginx", 2, 25.0, 2.2), run("wrk", "haproxy", 2, 20.0, 2.0),
            run("wrk", "gateway-uring", 3, 12.0, 1.8), run("wrk", "nginx", 3, 14.0, 2.0), run("wrk", "haproxy", 3, 16.0, 2.1),
            // Another test, and a round without the gateway: not counted.
            run("peak", "gateway-uring", 1, 1.0, 1.0),
            run("wrk", "nginx", 4, 1.0, 1.0),
        ]});
        let p = against_better_peer(&doc, "wrk", "cpu_us_per_req", 0.8).unwrap();
        // 16/20 = 0.8, 18/20 = 0.9, 12/14 = 0.857.
        assert_eq!(p.rounds, 3);
        assert!((p.median - 12.0 / 14.0).abs() < 1e-9, "{p:?}");
        assert!((p.min - 0.8).abs() < 1e-9 && (p.max - 0.9).abs() < 1e-9, "{p:?}");
        assert_eq!(p.at_or_under, 1, "0.8 itself meets the target");
        let r = row("h1-small", &doc, "wrk", "cpu_us_per_req", 0.8).unwrap();
        let o = r.cpu_per_origin.unwrap();
        assert!((o.median - 0.9).abs() < 1e-9 && o.at_or_under == 0, "{o:?}");
    }

    #[test]
    fn an_even_number_of_rounds_takes_the_middle_two_and_bad_figures_are_left_out() {
        let doc = json!({"runs": [
            run("h2c", "gateway-uring", 1, 8.0, 1.0), run("h2c", "haproxy", 1, 10.0, 1.0),
            run("h2c", "gateway-uring", 2, 9.0, 1.0), run("h2c", "haproxy", 2, 10.0, 1.0),
            // Only nginx, with a zero figure: the round has no peer.
            run("h2c", "gateway-uring", 3, 9.0, 1.0), run("h2c", "nginx", 3, 0.0, 1.0),
        ]});
        let p = against_better_peer(&doc, "h2c", "cpu_us_per_req", 0.8).unwrap();
        assert_eq!(p.rounds, 2);
        assert!((p.median - 0.85).abs() < 1e-9, "{p:?}");
        assert_eq!(p.at_or_under, 1);
    }

    #[test]
    fn nothing_to_pair_is_none() {
        assert_eq!(against_better_peer(&json!({}), "wrk", "cpu_us_per_req", 0.8), None);
        let only_gateway = json!({"runs": [run("wrk", "gateway-uring", 1, 8.0, 1.0)]});
        assert_eq!(against_better_peer(&only_gateway, "wrk", "cpu_us_per_req", 0.8), None);
        assert_eq!(row("https", &only_gateway, "wrk", "cpu_us_per_req", 0.8), None);
    }
}
