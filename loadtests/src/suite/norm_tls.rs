//! The tls-h2 scenario: handshakes, HTTP/2 over TLS, idle memory per connection.

use serde_json::Value;

use super::load::{count, note_missing, num, stat, summary_entries, text};
use super::model::{ratios, Stat, TlsH2, TlsRow};

/// Idle connections a full run holds; fewer is noted.
pub const FULL_IDLE_CONNECTIONS: f64 = 10_000.0;

/// Normalises the tls-h2 file. Ratios are of medians: CPU per handshake, CPU per h2 request,
/// idle PSS per connection.
pub fn tls_h2(doc: &Value, notes: &mut Vec<String>) -> TlsH2 {
    let entries = summary_entries("tls-h2", doc, notes);
    let section = |e: &Value, s: &str, k: &str| e.get(s).and_then(|v| stat(v, k));
    let opened = |e: &Value, s: &str| e.get(s).and_then(|v| stat(v, "opened")).map(|o| o.median);
    let mut rows: Vec<TlsRow> = entries
        .iter()
        .map(|(proxy, e)| TlsRow {
            proxy: proxy.clone(),
            handshake_per_s: section(e, "handshake", "per_s"),
            handshake_cpu_us: section(e, "handshake", "cpu_us"),
            h2_per_s: section(e, "h2", "per_s"),
            h2_cpu_us: section(e, "h2", "cpu_us"),
            h2_failed: e.get("h2").and_then(|h| count(h, "failed").or_else(|| num(h, "failed").map(|f| f as u64))),
            idle_tls_kib: section(e, "idle", "pss_kib"),
            idle_tls_opened: opened(e, "idle"),
            idle_plain_kib: section(e, "idle_plain", "pss_kib"),
            idle_plain_opened: opened(e, "idle_plain"),
            handshake_cpu_ratio: Default::default(),
            h2_cpu_ratio: Default::default(),
            idle_tls_ratio: Default::default(),
            idle_plain_ratio: Default::default(),
        })
        .collect();
    let m = |s: Option<Stat>| s.map(|s| s.median);
    let snapshot = rows.clone();
    for row in &mut rows {
        row.handshake_cpu_ratio =
            ratios(m(row.handshake_cpu_us), &snapshot, |r| r.proxy.as_str(), |r| m(r.handshake_cpu_us));
        row.h2_cpu_ratio = ratios(m(row.h2_cpu_us), &snapshot, |r| r.proxy.as_str(), |r| m(r.h2_cpu_us));
        row.idle_tls_ratio = ratios(m(row.idle_tls_kib), &snapshot, |r| r.proxy.as_str(), |r| m(r.idle_tls_kib));
        row.idle_plain_ratio = ratios(m(row.idle_plain_kib), &snapshot, |r| r.proxy.as_str(), |r| m(r.idle_plain_kib));
    }
    if !entries.is_empty() {
        let present: Vec<&str> = rows.iter().map(|r| r.proxy.as_str()).collect();
        let gateway = ["gateway-uring", "gateway"].iter().any(|g| present.contains(g));
        let expected: &[&str] = if gateway { &["nginx", "haproxy"] } else { &["gateway-uring", "nginx", "haproxy"] };
        note_missing("tls-h2", expected, &present, notes);
    }
    for (what, opened) in
        [("TLS", (|r: &TlsRow| r.idle_tls_opened) as fn(&TlsRow) -> Option<f64>), ("plain", |r| r.idle_plain_opened)]
    {
        let short: Vec<String> = rows
            .iter()
            .filter_map(|r| opened(r).filter(|n| *n < FULL_IDLE_CONNECTIONS).map(|n| format!("{} {n}", r.proxy)))
            .collect();
        if !short.is_empty() {
            notes.push(format!("tls-h2: idle {what} connections held: {} (a full run holds 10,000)", short.join(", ")));
        }
    }
    let no_plain: Vec<&str> = rows
        .iter()
        .filter(|r| r.idle_plain_kib.is_none() && r.idle_tls_kib.is_some())
        .map(|r| r.proxy.as_str())
        .collect();
    if !no_plain.is_empty() {
        notes.push(format!("tls-h2: no plain-TCP idle figure for {}", no_plain.join(", ")));
    }
    TlsH2 { timestamp: text(doc, "timestamp"), rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(proxy: &str, hs_cpu: f64, h2_cpu: f64, idle: f64, plain: Option<f64>) -> Value {
        let mut e = json!({"proxy": proxy,
            "handshake": {"per_s": {"median": 600.0, "min": 500.0, "max": 700.0}, "cpu_us": {"median": hs_cpu, "min": hs_cpu, "max": hs_cpu}},
            "h2": {"per_s": {"median": 5e4, "min": 4e4, "max": 6e4}, "cpu_us": {"median": h2_cpu, "min": h2_cpu, "max": h2_cpu}, "failed": 0},
            "idle": {"pss_kib": {"median": idle, "min": idle, "max": idle}, "opened": {"median": 10000, "min": 10000, "max": 10000}}});
        if let Some(p) = plain {
            e["idle_plain"] = json!({"pss_kib": {"median": p, "min": p, "max": p}, "opened": {"median": 2000, "min": 2000, "max": 2000}});
        }
        e
    }

    #[test]
    fn ratios_and_idle_figures() {
        let doc = json!({"summary": [entry("gateway", 400.0, 15.0, 12.0, Some(3.0)), entry("nginx", 800.0, 20.0, 16.0, Some(4.0)),
            entry("haproxy", 1000.0, 30.0, 15.0, None)]});
        let mut notes = Vec::new();
        let t = tls_h2(&doc, &mut notes);
        let gw = &t.rows[0];
        assert_eq!(gw.handshake_cpu_ratio.vs_nginx, Some(0.5));
        assert_eq!(gw.h2_cpu_ratio.vs_nginx, Some(0.75));
        assert_eq!(gw.h2_cpu_ratio.vs_haproxy, Some(0.5));
        assert_eq!(gw.idle_tls_ratio.vs_nginx, Some(0.75));
        assert_eq!(gw.idle_plain_ratio.vs_nginx, Some(0.75));
        assert_eq!(gw.idle_plain_ratio.vs_haproxy, None);
        assert_eq!(gw.h2_failed, Some(0));
        assert_eq!(gw.idle_tls_opened, Some(10_000.0));
        assert!(
            notes.contains(
                &"tls-h2: idle plain connections held: gateway 2000, nginx 2000 (a full run holds 10,000)".to_owned()
            ),
            "{notes:?}"
        );
        assert!(notes.contains(&"tls-h2: no plain-TCP idle figure for haproxy".to_owned()), "{notes:?}");
    }

    #[test]
    fn a_missing_section_is_none() {
        let doc = json!({"summary": [{"proxy": "gateway-uring", "h2": null}]});
        let mut notes = Vec::new();
        let t = tls_h2(&doc, &mut notes);
        assert_eq!(t.rows[0].h2_cpu_us, None);
        assert_eq!(t.rows[0].handshake_cpu_ratio.vs_nginx, None);
        assert_eq!(notes, ["tls-h2: no nginx, haproxy (shown as –)"]);
    }
}
