use serde_json::{json, Value};

use super::*;
use crate::suite::model::Summary;
use crate::suite::{norm_http, norm_tls};

fn http(name: &str, rows: &[(&str, f64, f64, f64)]) -> crate::suite::model::HttpScenario {
    let summary: Vec<Value> = rows
        .iter()
        .map(|(p, cpu, p50, p99)| json!({"proxy": p, "cpu_us_per_req": cpu, "p50_us": p50, "p99_us": p99}))
        .collect();
    norm_http::scenario(name, &json!({ "summary": summary }), &mut Vec::new())
}

fn find<'a>(targets: &'a [Target], prefix: &str) -> &'a Target {
    targets.iter().find(|t| t.target.starts_with(prefix)).unwrap()
}

#[test]
fn cpu_targets_met_missed_and_missing() {
    let mut s = Summary::default();
    s.http.push(http(
        "h1-small",
        &[("gateway-uring", 8.0, 0.0, 0.0), ("nginx", 10.0, 0.0, 0.0), ("haproxy", 9.0, 0.0, 0.0)],
    ));
    s.http.push(http("https", &[("gateway-uring", 8.0, 0.0, 0.0), ("haproxy", 12.0, 0.0, 0.0)]));
    let t = evaluate(&s);
    let nginx = find(&t, "h1-small: CPU µs/request ≤ 0.8x nginx");
    assert_eq!((nginx.met, nginx.measured.as_str()), (Verdict::Yes, "0.80x; 8.00 vs 10.0 µs"));
    assert_eq!(find(&t, "h1-small: CPU µs/request ≤ 0.8x HAProxy").met, Verdict::No);
    let no_nginx = find(&t, "https: CPU µs/request ≤ 0.8x nginx");
    assert_eq!((no_nginx.met, no_nginx.measured.as_str()), (Verdict::Missing, "– (no nginx figure)"));
    assert_eq!(no_nginx.met.label(), "–");
    assert_eq!(find(&t, "https: CPU µs/request ≤ 0.8x HAProxy").met, Verdict::Yes);
    let no_file = find(&t, "h1-16k: CPU");
    assert_eq!((no_file.met, no_file.measured.as_str()), (Verdict::Missing, "– (no h1-16k.json)"));
    assert_eq!(find(&t, "h2: CPU").measured, "– (no tls-h2.json)");
}

#[test]
fn latency_targets_use_the_added_latency() {
    let mut s = Summary::default();
    s.http.push(http(
        "latency",
        &[("gateway-uring", 1.0, 60.0, 140.0), ("nginx", 1.0, 70.0, 100.0), ("direct", 1.0, 40.0, 50.0)],
    ));
    let t = evaluate(&s);
    let p50 = find(&t, "added latency per hop: p50");
    assert_eq!((p50.met, p50.measured.as_str()), (Verdict::Yes, "0.67x; 20.0 vs 30.0 µs"));
    let p99 = find(&t, "added latency per hop: p99");
    assert_eq!((p99.met, p99.measured.as_str()), (Verdict::No, "1.80x; 90.0 vs 50.0 µs"));
}

#[test]
fn tls_targets_fall_back_to_the_plain_gateway_name() {
    let entry = |p: &str, hs: f64, h2: f64, idle: f64| json!({"proxy": p, "handshake": {"cpu_us": hs}, "h2": {"cpu_us": h2}, "idle": {"pss_kib": idle}});
    let doc = json!({"summary": [entry("gateway", 400.0, 15.0, 14.0), entry("nginx", 800.0, 20.0, 13.0)]});
    let s = Summary { tls_h2: Some(norm_tls::tls_h2(&doc, &mut Vec::new())), ..Summary::default() };
    let t = evaluate(&s);
    assert_eq!(find(&t, "TLS handshake: CPU per handshake ≤ nginx (gateway)").met, Verdict::Yes);
    assert_eq!(find(&t, "h2: CPU µs/request ≤ 0.8x nginx").met, Verdict::Yes);
    assert_eq!(find(&t, "h2: CPU µs/request ≤ 0.8x HAProxy").measured, "– (no HAProxy figure)");
    assert_eq!(find(&t, "idle memory per TLS").met, Verdict::No);
    assert_eq!(find(&t, "idle memory per plain").measured, "– (no gateway figure)");
}

#[test]
fn h2c_targets_and_the_io_uring_comparison() {
    let entry = |p: &str, h2: f64, h2c: f64| json!({"proxy": p, "h2": {"cpu_us": h2}, "h2c": {"cpu_us": h2c}});
    let doc = json!({"summary": [entry("gateway-uring", 15.0, 8.0), entry("gateway-epoll", 16.0, 10.0),
        entry("nginx", 20.0, 12.0), entry("haproxy", 18.0, 9.0)]});
    let s = Summary { tls_h2: Some(norm_tls::tls_h2(&doc, &mut Vec::new())), ..Summary::default() };
    let t = evaluate(&s);
    let nginx = find(&t, "h2c: CPU µs/request ≤ 0.8x nginx");
    assert_eq!((nginx.met, nginx.measured.as_str()), (Verdict::Yes, "0.67x; 8.00 vs 12.0 µs"));
    let haproxy = find(&t, "h2c: CPU µs/request ≤ 0.8x HAProxy");
    assert_eq!((haproxy.met, haproxy.measured.as_str()), (Verdict::No, "0.89x; 8.00 vs 9.00 µs"));
    // The h2 rows still read the h2 figures.
    assert_eq!(find(&t, "h2: CPU µs/request ≤ 0.8x nginx").measured, "0.75x; 15.0 vs 20.0 µs");
    let io = find(&t, "h2c: io_uring vs epoll");
    assert_eq!((io.met, io.measured.as_str()), (Verdict::Stated, "io_uring cheaper: 8.00 vs 10.0 µs (0.80x)"));
    // The smoke run of the h2c test: under 0.8x nginx, not under HAProxy.
    let doc: Value = serde_json::from_str(include_str!("fixtures/tls-h2-h2c-smoke.json")).unwrap();
    let smoke = evaluate(&Summary { tls_h2: Some(norm_tls::tls_h2(&doc, &mut Vec::new())), ..Summary::default() });
    let nginx = find(&smoke, "h2c: CPU µs/request ≤ 0.8x nginx");
    assert_eq!((nginx.met, nginx.measured.as_str()), (Verdict::Yes, "0.54x; 9.65 vs 17.7 µs"));
    let haproxy = find(&smoke, "h2c: CPU µs/request ≤ 0.8x HAProxy");
    assert_eq!((haproxy.met, haproxy.measured.as_str()), (Verdict::No, "1.02x; 9.65 vs 9.42 µs"));
    // Next to the h2 rows, in the report's order.
    let pos = |prefix: &str| t.iter().position(|x| x.target.starts_with(prefix)).unwrap();
    assert_eq!(pos("h2c: CPU µs/request ≤ 0.8x nginx"), pos("h2: CPU µs/request ≤ 0.8x HAProxy") + 1);
}

#[test]
fn a_file_from_before_h2c_misses_only_the_h2c_rows() {
    let doc: Value = serde_json::from_str(include_str!("fixtures/tls-h2-before-h2c.json")).unwrap();
    let s = Summary { tls_h2: Some(norm_tls::tls_h2(&doc, &mut Vec::new())), ..Summary::default() };
    let t = evaluate(&s);
    for prefix in ["h2c: CPU µs/request ≤ 0.8x nginx", "h2c: CPU µs/request ≤ 0.8x HAProxy"] {
        let row = find(&t, prefix);
        assert_eq!((row.met, row.measured.as_str()), (Verdict::Missing, "– (no h2c run in tls-h2.json)"));
    }
    assert!(!t.iter().any(|x| x.target.starts_with("h2c: io_uring")), "{t:?}");
    let h2 = find(&t, "h2: CPU µs/request ≤ 0.8x nginx");
    assert_eq!((h2.met, h2.measured.as_str()), (Verdict::Yes, "0.72x; 13.4 vs 18.7 µs"));
    assert_eq!(find(&t, "h2: io_uring vs epoll").met, Verdict::Stated);
}

#[test]
fn access_log_and_io_uring_are_stated() {
    let mut s = Summary::default();
    s.http.push(http(
        "h1-small",
        &[("gateway-uring", 10.0, 0.0, 0.0), ("gateway-uring-log", 11.0, 0.0, 0.0), ("gateway-epoll", 12.5, 0.0, 0.0)],
    ));
    let t = evaluate(&s);
    let log = find(&t, "h1-small: access log cost");
    assert_eq!((log.met, log.measured.as_str()), (Verdict::Stated, "+1.00 µs (+10.0%): 11.0 vs 10.0"));
    let io = find(&t, "h1-small: io_uring vs epoll");
    assert_eq!(io.measured, "io_uring cheaper: 10.0 vs 12.5 µs (0.80x)");
}

#[test]
fn an_empty_summary_has_only_missing_rows() {
    let t = evaluate(&Summary::default());
    assert!(t.iter().all(|t| t.met == Verdict::Missing), "{t:?}");
    assert_eq!(t.len(), 17);
}

#[test]
fn the_origin_ratio_is_stated_against_the_better_peer() {
    let ratio = |v: f64| json!({"median": v, "min": v, "max": v});
    let row = |p: &str, cpu: f64, r: Option<f64>| json!({"proxy": p, "cpu_us_per_req": cpu, "cpu_per_origin_cpu": r.map(ratio)});
    let mut s = Summary::default();
    let doc = json!({"summary": [row("gateway-uring", 18.7, Some(1.889)), row("nginx", 21.2, Some(2.0)),
        row("haproxy", 22.0, Some(2.063))]});
    s.http.push(norm_http::scenario("h1-small", &doc, &mut Vec::new()));
    // No figure for the peers: no row.
    let doc = json!({"summary": [row("gateway-uring", 30.0, Some(1.4)), row("nginx", 35.0, None)]});
    s.http.push(norm_http::scenario("h1-16k", &doc, &mut Vec::new()));
    let entry = |p: &str, h2: f64, h2c: f64| {
        json!({"proxy": p, "h2": {"cpu_us": 10.0, "cpu_per_origin_cpu": ratio(h2)},
               "h2c": {"cpu_us": 10.0, "cpu_per_origin_cpu": ratio(h2c)}})
    };
    let doc = json!({"summary": [entry("gateway-uring", 1.515, 1.543), entry("nginx", 2.311, 2.566),
        entry("haproxy", 1.663, 1.516)]});
    s.tls_h2 = Some(norm_tls::tls_h2(&doc, &mut Vec::new()));
    let t = evaluate(&s);
    let small = find(&t, "h1-small: proxy CPU over origin CPU");
    assert_eq!((small.met, small.measured.as_str()), (Verdict::Stated, "0.94x nginx; 1.89 vs 2.00"));
    assert!(!t.iter().any(|x| x.target.starts_with("h1-16k: proxy CPU over origin CPU")), "{t:?}");
    assert_eq!(find(&t, "h2: proxy CPU over origin CPU").measured, "0.91x HAProxy; 1.51 vs 1.66");
    assert_eq!(find(&t, "h2c: proxy CPU over origin CPU").measured, "1.02x HAProxy; 1.54 vs 1.52");
    // After the CPU targets, before the stated costs.
    let pos = |prefix: &str| t.iter().position(|x| x.target.starts_with(prefix)).unwrap();
    assert!(pos("h1-small: proxy CPU over origin CPU") > pos("idle memory per TLS"));
    assert!(pos("h2c: proxy CPU over origin CPU") < pos("access log cost"));
}

#[test]
fn round_by_round_rows_are_stated_after_the_origin_ratio() {
    let run = |p: &str, round: u64, cpu: f64, r: f64| json!({"test": "wrk", "proxy": p, "round": round, "cpu_us_per_req": cpu, "cpu_per_origin_cpu": r});
    let doc = json!({"runs": [
        run("gateway-uring", 1, 16.0, 1.8), run("nginx", 1, 20.0, 2.0), run("haproxy", 1, 21.0, 2.2),
        run("gateway-uring", 2, 18.0, 1.9), run("nginx", 2, 25.0, 2.1), run("haproxy", 2, 20.0, 2.0),
    ]});
    let mut s = Summary::default();
    s.paired.extend(crate::suite::paired::row("https", &doc, "wrk", "cpu_us_per_req", CPU_TARGET));
    // A scenario without the gateway's runs has no row at all.
    let no_gateway = json!({"runs": [run("nginx", 1, 20.0, 2.0)]});
    s.paired.extend(crate::suite::paired::row("h1-16k", &no_gateway, "wrk", "cpu_us_per_req", CPU_TARGET));
    let t = evaluate(&s);
    let https = find(&t, "https: round by round");
    assert_eq!(https.met, Verdict::Stated);
    assert_eq!(
        https.measured,
        "by µs 0.85x (0.80–0.90), ≤ 0.8x in 1 of 2 rounds; by the origin ratio 0.93x (0.90–0.95), ≤ 0.8x in 0 of 2 rounds"
    );
    assert!(!t.iter().any(|x| x.target.starts_with("h1-16k: round by round")), "{t:?}");
    let pos = |prefix: &str| t.iter().position(|x| x.target.starts_with(prefix)).unwrap();
    assert!(pos("https: round by round") > pos("idle memory per TLS"));
}
