use serde_json::json;

use super::*;
use crate::suite::svg::tests::{bar_heights, well_formed};
use crate::suite::svg::PLOT_H;
use crate::suite::{norm_http, norm_tls};

#[test]
fn an_empty_summary_gives_notes_not_panics() {
    let plots = all(&Summary::default());
    assert_eq!(plots.len(), 5);
    for (name, svg) in &plots {
        well_formed(svg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(svg.contains("No data: no "), "{name}");
    }
}

#[test]
fn cpu_bars_are_relative_to_nginx() {
    let doc = json!({"summary": [{"proxy": "nginx", "cpu_us_per_req": 20.0}, {"proxy": "gateway-uring", "cpu_us_per_req": 10.0},
        {"proxy": "direct", "cpu_us_per_req": 0.0}]});
    let s = Summary { http: vec![norm_http::scenario("h1-small", &doc, &mut Vec::new())], ..Summary::default() };
    let svg = cpu(&s, "CPU");
    well_formed(&svg).unwrap();
    // gateway-uring first (legend order), then nginx; 1.0 x 1.1 headroom: the axis goes to 1.5;
    // direct is left out.
    let px = |v: f64| (PLOT_H * v / 1.5 * 10.0).round() / 10.0;
    assert_eq!(bar_heights(&svg), [px(0.5), px(1.0)]);
    assert!(svg.contains(">0.50</text>") && svg.contains("target 0.8x"));
    assert!(!svg.contains(">direct</text>"));
    assert!(svg.contains("Note: no h1-16k.json"));
}

/// A summary with the three HTTP scenarios (so that the CPU chart's notes are about tls-h2).
fn with_http_and_tls(tls: &serde_json::Value) -> Summary {
    let doc = json!({"summary": [{"proxy": "nginx", "cpu_us_per_req": 20.0}, {"proxy": "gateway-uring", "cpu_us_per_req": 10.0}]});
    let http = ["h1-small", "h1-16k", "https"].map(|n| norm_http::scenario(n, &doc, &mut Vec::new())).to_vec();
    Summary { http, tls_h2: Some(norm_tls::tls_h2(tls, &mut Vec::new())), ..Summary::default() }
}

fn group_label(name: &str) -> String {
    format!(r#"font-size="13">{name}</text>"#)
}

#[test]
fn cpu_bars_have_an_h2c_group() {
    let entry = |p: &str, cpu: f64, h2c: f64| json!({"proxy": p, "handshake": {"cpu_us": cpu}, "h2": {"cpu_us": cpu}, "h2c": {"cpu_us": h2c}});
    let doc = json!({"summary": [entry("nginx", 20.0, 8.0), entry("gateway-uring", 10.0, 2.0)]});
    let svg = cpu(&with_http_and_tls(&doc), "CPU");
    well_formed(&svg).unwrap();
    let labels: Vec<usize> = ["h2", "h2c", "handshake"].iter().map(|g| svg.find(&group_label(g)).unwrap()).collect();
    assert!(labels.windows(2).all(|w| w[0] < w[1]), "groups out of order: {labels:?}");
    // Three HTTP groups, h2, h2c, handshake; gateway-uring then nginx in each; the axis to 1.5.
    let px = |v: f64| (PLOT_H * v / 1.5 * 10.0).round() / 10.0;
    let heights = bar_heights(&svg);
    assert_eq!(heights.len(), 12);
    assert_eq!(heights[6..10], [px(0.5), px(1.0), px(0.25), px(1.0)]);
    assert!(svg.contains("<title>gateway-uring: 0.25</title>"));
    assert!(!svg.contains("Note:"), "{svg}");
}

#[test]
fn a_tls_file_from_before_h2c_has_no_h2c_group() {
    let doc: serde_json::Value = serde_json::from_str(include_str!("fixtures/tls-h2-before-h2c.json")).unwrap();
    let svg = cpu(&with_http_and_tls(&doc), "CPU");
    well_formed(&svg).unwrap();
    assert!(svg.contains(&group_label("h2")) && svg.contains(&group_label("handshake")));
    assert!(!svg.contains(&group_label("h2c")));
    assert!(svg.contains("Note: no h2c run in tls-h2.json"), "{svg}");
    // Two proxies in each HTTP group, four in h2 and in handshake.
    assert_eq!(bar_heights(&svg).len(), 14);
}

#[test]
fn latency_without_direct_is_a_note() {
    let doc = json!({"summary": [{"proxy": "nginx", "p50_us": 20.0}]});
    let s = Summary { http: vec![norm_http::scenario("latency", &doc, &mut Vec::new())], ..Summary::default() };
    let svg = latency(&s, "Added");
    well_formed(&svg).unwrap();
    assert!(svg.contains("No data: latency.json has no direct row"));
}

#[test]
fn legend_order_puts_the_gateway_first() {
    let names = ordered(["haproxy", "zeta", "nginx", "gateway-uring", "zeta", "alpha"].into_iter());
    assert_eq!(names, ["gateway-uring", "nginx", "haproxy", "zeta", "alpha"]);
}
