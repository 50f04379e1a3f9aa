//! The tls-h2 scenario: handshakes, HTTP/2 over TLS and over h2c, idle memory per connection.

use serde_json::Value;

use super::load::{count, note_missing, num, stat, summary_entries, text};
use super::model::{ratios, Stat, TlsH2, TlsRow};

/// Idle connections a full run holds; fewer is noted.
pub const FULL_IDLE_CONNECTIONS: f64 = 10_000.0;

/// Normalises the tls-h2 file. Ratios are of medians: CPU per handshake, CPU per h2 and per h2c
/// request, idle PSS per connection. A file without h2c sections (from before the h2c test)
/// gives `None` h2c figures and a note.
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
            h2_cpu_per_origin: section(e, "h2", "cpu_per_origin_cpu"),
            h2_failed: failed(e, "h2"),
            h2c_per_s: section(e, "h2c", "per_s"),
            h2c_cpu_us: section(e, "h2c", "cpu_us"),
            h2c_cpu_per_origin: section(e, "h2c", "cpu_per_origin_cpu"),
            h2c_failed: failed(e, "h2c"),
            idle_tls_kib: section(e, "idle", "pss_kib"),
            idle_tls_opened: opened(e, "idle"),
            idle_plain_kib: section(e, "idle_plain", "pss_kib"),
            idle_plain_opened: opened(e, "idle_plain"),
            handshake_cpu_ratio: Default::default(),
            h2_cpu_ratio: Default::default(),
            h2c_cpu_ratio: Default::default(),
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
        row.h2c_cpu_ratio = ratios(m(row.h2c_cpu_us), &snapshot, |r| r.proxy.as_str(), |r| m(r.h2c_cpu_us));
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
    let no_h2c: Vec<&str> =
        rows.iter().filter(|r| r.h2c_cpu_us.is_none() && r.h2_cpu_us.is_some()).map(|r| r.proxy.as_str()).collect();
    if rows.iter().all(|r| r.h2c_cpu_us.is_none()) {
        if !no_h2c.is_empty() {
            notes.push("tls-h2: no h2c figures (a file from before the h2c test, or TESTS without h2c)".to_owned());
        }
    } else if !no_h2c.is_empty() {
        notes.push(format!("tls-h2: no h2c figure for {}", no_h2c.join(", ")));
    }
    TlsH2 { timestamp: text(doc, "timestamp"), rows }
}

/// The failed requests of an h2load section; `None` without the section or when it says it
/// has no runs (`"runs": 0`: the test was not run, its `failed` is a sum over nothing).
fn failed(entry: &Value, section: &str) -> Option<u64> {
    let s = entry.get(section)?;
    if count(s, "runs") == Some(0) {
        return None;
    }
    count(s, "failed").or_else(|| num(s, "failed").map(|f| f as u64))
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
    fn a_file_from_before_h2c_has_no_h2c_figures() {
        let doc: Value = serde_json::from_str(include_str!("fixtures/tls-h2-before-h2c.json")).unwrap();
        let mut notes = Vec::new();
        let t = tls_h2(&doc, &mut notes);
        let proxies: Vec<&str> = t.rows.iter().map(|r| r.proxy.as_str()).collect();
        assert_eq!(proxies, ["gateway-uring", "gateway-epoll", "nginx", "haproxy"]);
        for r in &t.rows {
            assert_eq!((r.h2c_per_s, r.h2c_cpu_us, r.h2c_failed), (None, None, None), "{}", r.proxy);
            assert_eq!(r.h2c_cpu_ratio, Default::default(), "{}", r.proxy);
            assert_eq!(r.h2_failed, Some(0), "{}", r.proxy);
        }
        let gw = &t.rows[0];
        assert!((gw.h2_cpu_us.unwrap().median - 13.3959).abs() < 1e-3);
        assert!((gw.h2_cpu_ratio.vs_nginx.unwrap() - 13.3959 / 18.7041).abs() < 1e-4);
        let h2c: Vec<&String> = notes.iter().filter(|n| n.contains("h2c")).collect();
        assert_eq!(h2c, ["tls-h2: no h2c figures (a file from before the h2c test, or TESTS without h2c)"]);
    }

    #[test]
    fn a_smoke_run_with_h2c() {
        // TESTS="h2 h2c": the other sections are there with no runs.
        let doc: Value = serde_json::from_str(include_str!("fixtures/tls-h2-h2c-smoke.json")).unwrap();
        let mut notes = Vec::new();
        let t = tls_h2(&doc, &mut notes);
        let cpu: Vec<(&str, f64)> =
            t.rows.iter().map(|r| (r.proxy.as_str(), (r.h2c_cpu_us.unwrap().median * 100.0).round() / 100.0)).collect();
        assert_eq!(cpu, [("gateway-uring", 9.65), ("gateway-epoll", 10.88), ("nginx", 17.73), ("haproxy", 9.42)]);
        let gw = &t.rows[0];
        assert_eq!(gw.h2c_per_s.map(|s| s.median.round()), Some(100_569.0));
        assert_eq!(gw.h2c_failed, Some(0));
        assert!((gw.h2c_cpu_ratio.vs_nginx.unwrap() - 0.5440).abs() < 1e-4);
        assert!((gw.h2c_cpu_ratio.vs_haproxy.unwrap() - 1.0242).abs() < 1e-4);
        assert!(gw.h2_cpu_us.is_some() && gw.handshake_cpu_us.is_none() && gw.idle_tls_kib.is_none());
        assert!(!notes.iter().any(|n| n.contains("h2c")), "{notes:?}");
    }

    #[test]
    fn h2c_figures_ratios_and_a_proxy_without_them() {
        let h2c = |cpu: f64, runs: u64| {
            json!({"runs": runs, "per_s": {"median": 9e4, "min": 8e4, "max": 1e5},
            "cpu_us": {"median": cpu, "min": cpu, "max": cpu}, "failed": 3})
        };
        let mut gw = entry("gateway-uring", 400.0, 15.0, 12.0, Some(3.0));
        gw["h2c"] = h2c(6.0, 1);
        let mut nginx = entry("nginx", 800.0, 20.0, 16.0, Some(4.0));
        nginx["h2c"] = h2c(10.0, 1);
        let mut haproxy = entry("haproxy", 1000.0, 30.0, 15.0, Some(4.0));
        // The script writes an empty section for a test that was not run.
        haproxy["h2c"] = json!({"runs": 0, "per_s": null, "cpu_us": null, "failed": 0});
        let mut notes = Vec::new();
        let t = tls_h2(&json!({"summary": [gw, nginx, haproxy]}), &mut notes);
        let gw = &t.rows[0];
        assert_eq!(gw.h2c_cpu_us, Some(Stat::one(6.0)));
        assert_eq!(gw.h2c_per_s.map(|s| (s.median, s.min, s.max)), Some((9e4, 8e4, 1e5)));
        assert_eq!(gw.h2c_failed, Some(3));
        assert_eq!(gw.h2c_cpu_ratio.vs_nginx, Some(0.6));
        assert_eq!(gw.h2c_cpu_ratio.vs_haproxy, None);
        assert_eq!(gw.h2_cpu_ratio.vs_nginx, Some(0.75));
        let haproxy = &t.rows[2];
        assert_eq!((haproxy.h2c_cpu_us, haproxy.h2c_failed), (None, None));
        assert!(notes.contains(&"tls-h2: no h2c figure for haproxy".to_owned()), "{notes:?}");
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
