//! The HTTP scenarios in the `h1-small` format: h1-small, h1-16k, h1-large, https and latency.

use serde_json::Value;

use super::load::{count, note_missing, stat, summary_entries, text};
use super::model::{ratio, ratios, AddedLatency, HttpRow, HttpScenario};

/// The proxies a full suite run measures in each HTTP scenario (`direct` is absent in https).
pub const HTTP_PROXIES: [&str; 6] =
    ["gateway-uring", "gateway-epoll", "gateway-uring-log", "nginx", "haproxy", "direct"];

/// Normalises one scenario file; in `latency`, adds each proxy's latency over `direct`.
pub fn scenario(name: &str, doc: &Value, notes: &mut Vec<String>) -> HttpScenario {
    let entries = summary_entries(name, doc, notes);
    let mut rows: Vec<HttpRow> = entries
        .iter()
        .map(|(proxy, e)| HttpRow {
            proxy: proxy.clone(),
            rounds: count(e, "rounds"),
            rps: stat(e, "rps"),
            cpu_us_per_req: stat(e, "cpu_us_per_req"),
            cpu_per_origin: stat(e, "cpu_per_origin_cpu"),
            p50_us: stat(e, "p50_us"),
            p99_us: stat(e, "p99_us"),
            errors: count(e, "errors"),
            rps_ratio: Default::default(),
            cpu_ratio: Default::default(),
            added: None,
        })
        .collect();
    let median = |s: Option<super::model::Stat>| s.map(|s| s.median);
    let snapshot = rows.clone();
    for row in &mut rows {
        row.rps_ratio = ratios(median(row.rps), &snapshot, |r| &r.proxy, |r| median(r.rps));
        row.cpu_ratio = ratios(median(row.cpu_us_per_req), &snapshot, |r| &r.proxy, |r| median(r.cpu_us_per_req));
    }
    if !entries.is_empty() {
        let expected: Vec<&str> =
            HTTP_PROXIES.iter().copied().filter(|p| !(name == "https" && *p == "direct")).collect();
        let present: Vec<&str> = rows.iter().map(|r| r.proxy.as_str()).collect();
        note_missing(name, &expected, &present, notes);
    }
    if name == "latency" {
        add_latency_over_direct(&mut rows, notes);
    }
    HttpScenario { scenario: name.to_owned(), timestamp: text(doc, "timestamp"), rows }
}

/// Sets `added` on every row but `direct`'s: median p50/p99 minus direct's, and that over
/// nginx's added latency. Without a direct row nothing is added and a note says so.
fn add_latency_over_direct(rows: &mut [HttpRow], notes: &mut Vec<String>) {
    let Some(direct) = rows.iter().find(|r| r.proxy == "direct") else {
        notes.push("latency: no direct row, so no added latency per hop".to_owned());
        return;
    };
    let base = (direct.p50_us.map(|s| s.median), direct.p99_us.map(|s| s.median));
    let minus = |v: Option<f64>, b: Option<f64>| Some(v? - b?);
    let added_of = |r: &HttpRow| (minus(r.p50_us.map(|s| s.median), base.0), minus(r.p99_us.map(|s| s.median), base.1));
    let nginx = rows.iter().find(|r| r.proxy == "nginx").map(added_of);
    for row in rows.iter_mut().filter(|r| r.proxy != "direct") {
        let (p50, p99) = added_of(row);
        row.added = Some(AddedLatency {
            p50_us: p50,
            p99_us: p99,
            p50_vs_nginx: ratio(p50, nginx.and_then(|n| n.0)),
            p99_vs_nginx: ratio(p99, nginx.and_then(|n| n.1)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(proxy: &str, cpu: f64, p50: f64, p99: f64) -> Value {
        json!({"proxy": proxy, "rounds": 3, "rps": {"median": 1000.0 / cpu, "min": 1.0, "max": 2000.0},
               "cpu_us_per_req": {"median": cpu, "min": cpu - 1.0, "max": cpu + 1.0},
               "p50_us": {"median": p50, "min": p50, "max": p50}, "p99_us": p99, "errors": 0})
    }

    #[test]
    fn ratios_against_nginx_and_haproxy() {
        let doc = json!({"benchmark": "h1-small", "timestamp": "T", "summary": [
            entry("gateway-uring", 8.0, 100.0, 200.0), entry("nginx", 10.0, 90.0, 150.0),
            entry("haproxy", 16.0, 95.0, 170.0)]});
        let mut notes = Vec::new();
        let s = scenario("h1-small", &doc, &mut notes);
        let gw = &s.rows[0];
        assert_eq!(gw.cpu_ratio.vs_nginx, Some(0.8));
        assert_eq!(gw.cpu_ratio.vs_haproxy, Some(0.5));
        assert_eq!(gw.cpu_us_per_req.unwrap().min, 7.0);
        assert_eq!(gw.p99_us.unwrap().median, 200.0);
        assert_eq!(gw.added, None);
        assert_eq!(notes, ["h1-small: no gateway-epoll, gateway-uring-log, direct (shown as –)"]);
    }

    #[test]
    fn missing_nginx_leaves_the_ratio_empty() {
        let doc =
            json!({"summary": [entry("gateway-uring", 8.0, 1.0, 2.0), {"proxy": "haproxy", "cpu_us_per_req": null}]});
        let mut notes = Vec::new();
        let s = scenario("https", &doc, &mut notes);
        assert_eq!(s.rows[0].cpu_ratio.vs_nginx, None);
        assert_eq!(s.rows[0].cpu_ratio.vs_haproxy, None);
        assert_eq!(s.rows[1].cpu_us_per_req, None);
        assert!(notes[0].starts_with("https: no gateway-epoll, gateway-uring-log, nginx ("), "{notes:?}");
    }

    #[test]
    fn latency_is_added_over_direct() {
        let doc = json!({"summary": [entry("gateway-uring", 8.0, 60.0, 120.0), entry("nginx", 10.0, 70.0, 100.0),
            entry("direct", 5.0, 40.0, 60.0)]});
        let s = scenario("latency", &doc, &mut Vec::new());
        let gw = s.rows[0].added.unwrap();
        assert_eq!((gw.p50_us, gw.p99_us), (Some(20.0), Some(60.0)));
        assert_eq!((gw.p50_vs_nginx, gw.p99_vs_nginx), (Some(20.0 / 30.0), Some(1.5)));
        assert_eq!(s.rows[2].added, None);
    }

    #[test]
    fn latency_without_direct_is_a_note() {
        let doc = json!({"summary": [entry("gateway-uring", 8.0, 60.0, 120.0)]});
        let mut notes = Vec::new();
        let s = scenario("latency", &doc, &mut notes);
        assert_eq!(s.rows[0].added, None);
        assert!(notes.contains(&"latency: no direct row, so no added latency per hop".to_owned()));
    }
}
