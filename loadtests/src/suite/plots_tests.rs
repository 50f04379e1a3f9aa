use serde_json::json;

use super::*;
use crate::suite::norm_http;
use crate::suite::svg::tests::{bar_heights, well_formed};
use crate::suite::svg::PLOT_H;

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
