//! The per-scenario tables of `summary.md`.

use std::fmt::Write;

use super::markdown::{int, med, opt, range, ratios, table, x, DASH};
use super::model::{HttpScenario, OpenLoop, Overload, TlsH2};

/// h1-small, h1-16k, h1-large, https.
pub fn http(md: &mut String, sc: &HttpScenario) {
    let _ = writeln!(md, "## {}\n", sc.scenario);
    let head =
        ["proxy", "req/s", "µs CPU/req (min–max)", "p50 µs", "p99 µs", "errors", "CPU vs nginx", "CPU vs HAProxy"];
    let rows: Vec<Vec<String>> = sc
        .rows
        .iter()
        .map(|r| {
            let [vs_nginx, vs_haproxy] = ratios(r.cpu_ratio);
            vec![
                r.proxy.clone(),
                med(r.rps),
                range(r.cpu_us_per_req),
                med(r.p50_us),
                med(r.p99_us),
                int(r.errors),
                vs_nginx,
                vs_haproxy,
            ]
        })
        .collect();
    table(md, &head, &rows);
}

/// The latency scenario: one connection, one request at a time; added = minus direct.
pub fn latency(md: &mut String, sc: &HttpScenario) {
    let _ = writeln!(md, "## {}\n", sc.scenario);
    md.push_str("One connection, one request at a time. Added: this proxy's median minus direct's.\n\n");
    let head = [
        "proxy",
        "p50 µs",
        "p99 µs",
        "added p50 µs",
        "added p99 µs",
        "added p50 vs nginx",
        "added p99 vs nginx",
        "µs CPU/req",
        "errors",
    ];
    let rows: Vec<Vec<String>> = sc
        .rows
        .iter()
        .map(|r| {
            let a = r.added.unwrap_or_default();
            let (p50, p99, v50, v99) = if r.added.is_some() {
                (opt(a.p50_us), opt(a.p99_us), x(a.p50_vs_nginx), x(a.p99_vs_nginx))
            } else {
                (DASH.into(), DASH.into(), DASH.into(), DASH.into())
            };
            vec![
                r.proxy.clone(),
                med(r.p50_us),
                med(r.p99_us),
                p50,
                p99,
                v50,
                v99,
                med(r.cpu_us_per_req),
                int(r.errors),
            ]
        })
        .collect();
    table(md, &head, &rows);
}

pub fn tls_h2(md: &mut String, t: &TlsH2) {
    md.push_str("## tls-h2\n\n");
    md.push_str("Full TLS 1.3 handshakes, HTTP/2 over TLS (h2), the same load over cleartext HTTP/2 with prior knowledge (h2c), PSS KiB per idle keep-alive connection (connections held in brackets).\n\n");
    let head = [
        "proxy",
        "handshakes/s",
        "µs CPU/handshake",
        "vs nginx",
        "h2 req/s",
        "µs CPU/h2 req",
        "vs nginx",
        "vs HAProxy",
        "h2 failed",
        "h2c req/s",
        "µs CPU/h2c req",
        "vs nginx",
        "vs HAProxy",
        "h2c failed",
        "idle KiB/conn plain",
        "idle KiB/conn TLS",
    ];
    let held = |kib: Option<super::model::Stat>, opened: Option<f64>| match (kib, opened) {
        (Some(_), Some(n)) => format!("{} ({n:.0})", med(kib)),
        _ => med(kib),
    };
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let [h2_nginx, h2_haproxy] = ratios(r.h2_cpu_ratio);
            let [h2c_nginx, h2c_haproxy] = ratios(r.h2c_cpu_ratio);
            vec![
                r.proxy.clone(),
                med(r.handshake_per_s),
                range(r.handshake_cpu_us),
                x(r.handshake_cpu_ratio.vs_nginx),
                med(r.h2_per_s),
                range(r.h2_cpu_us),
                h2_nginx,
                h2_haproxy,
                int(r.h2_failed),
                med(r.h2c_per_s),
                range(r.h2c_cpu_us),
                h2c_nginx,
                h2c_haproxy,
                int(r.h2c_failed),
                held(r.idle_plain_kib, r.idle_plain_opened),
                held(r.idle_tls_kib, r.idle_tls_opened),
            ]
        })
        .collect();
    table(md, &head, &rows);
}

pub fn openloop(md: &mut String, o: &OpenLoop) {
    md.push_str("## openloop\n\n");
    md.push_str("Latency at fixed fractions of each proxy's own peak.\n\n");
    let head = [
        "proxy",
        "peak req/s",
        "fraction",
        "rate",
        "achieved req/s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "errors",
        "valid",
    ];
    let mut rows = Vec::new();
    for r in &o.rows {
        if r.points.is_empty() {
            rows.push(vec![
                r.proxy.clone(),
                opt(r.peak_rps),
                DASH.into(),
                DASH.into(),
                DASH.into(),
                DASH.into(),
                DASH.into(),
                DASH.into(),
                DASH.into(),
                DASH.into(),
            ]);
        }
        for p in &r.points {
            let valid = p.valid.map(|v| if v { "yes" } else { "no" }).unwrap_or(DASH);
            rows.push(vec![
                r.proxy.clone(),
                opt(r.peak_rps),
                format!("{:.2}", p.fraction),
                opt(p.rate),
                opt(p.achieved_rps),
                opt(p.p50_us),
                opt(p.p99_us),
                opt(p.p999_us),
                int(p.errors),
                valid.to_owned(),
            ]);
        }
    }
    table(md, &head, &rows);
}

pub fn overload(md: &mut String, o: &Overload) {
    md.push_str("## overload\n\n");
    md.push_str("Per class: requests offered, answered OK, shed (503), rate-limited (429), timed out; latency of the OK ones in ms, with the unloaded reference in brackets.\n\n");
    let head = [
        "proxy",
        "class",
        "offered",
        "ok",
        "ok %",
        "shed",
        "429",
        "timed out",
        "p50 ms (unloaded)",
        "p99 ms (unloaded)",
    ];
    let vs = |v: Option<f64>, u: Option<f64>| format!("{} ({})", opt(v), opt(u));
    let mut rows = Vec::new();
    for r in &o.rows {
        for c in &r.classes {
            rows.push(vec![
                r.proxy.clone(),
                c.class.clone(),
                int(c.offered),
                int(c.succeeded),
                opt(c.ok_pct),
                int(c.shed),
                int(c.rate_limited),
                int(c.timed_out),
                vs(c.p50_ms, c.unloaded_p50_ms),
                vs(c.p99_ms, c.unloaded_p99_ms),
            ]);
        }
    }
    table(md, &head, &rows);
    let goodput: Vec<Vec<String>> =
        o.rows.iter().map(|r| vec![r.proxy.clone(), opt(r.goodput_pct), r.rounds.to_string()]).collect();
    table(md, &["proxy", "goodput % of origin capacity", "rounds"], &goodput);
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::suite::norm_tls;

    fn tls_table(fixture: &str) -> Vec<Vec<String>> {
        let doc: Value = serde_json::from_str(fixture).unwrap();
        let mut md = String::new();
        tls_h2(&mut md, &norm_tls::tls_h2(&doc, &mut Vec::new()));
        let cells = |l: &str| l.trim_matches('|').split(" | ").map(|c| c.trim().to_owned()).collect::<Vec<_>>();
        md.lines().filter(|l| l.starts_with("| ")).map(cells).collect()
    }

    #[test]
    fn tls_h2_shows_h2c_next_to_h2() {
        let rows = tls_table(include_str!("fixtures/tls-h2-h2c-smoke.json"));
        let head = &rows[0];
        let at = |name: &str| head.iter().position(|h| h == name).unwrap();
        let h2c = at("µs CPU/h2c req");
        assert_eq!(head[h2c - 1..h2c + 4], ["h2c req/s", "µs CPU/h2c req", "vs nginx", "vs HAProxy", "h2c failed"]);
        assert_eq!(at("h2c req/s"), at("h2 failed") + 1);
        let gw = &rows[1];
        assert_eq!(gw.len(), head.len());
        assert_eq!(gw[0], "gateway-uring");
        assert_eq!(gw[h2c - 1..h2c + 4], ["100569", "9.65", "0.54x", "1.02x", "0"]);
    }

    #[test]
    fn tls_h2_from_before_h2c_shows_dashes() {
        let rows = tls_table(include_str!("fixtures/tls-h2-before-h2c.json"));
        let h2c = rows[0].iter().position(|h| h == "h2c req/s").unwrap();
        for row in &rows[1..] {
            assert_eq!(row.len(), rows[0].len());
            assert_eq!(row[h2c..h2c + 5], ["–", "–", "–", "–", "–"], "{row:?}");
        }
        assert_eq!(rows[1][5], "13.4 (11.3–20.0)");
    }
}
