//! Parsing what the gateway exposes (`/proc/<pid>/status`, Prometheus text) and writing the
//! per-abuse results as a Markdown table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// Resident memory of a process, from `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the peak resident since start or since the peak was last reset
    /// (`echo 5 > /proc/<pid>/clear_refs`).
    pub hwm_kib: u64,
}

/// `VmRSS` and `VmHWM` of a `/proc/<pid>/status` text; `None` if either is missing.
pub fn parse_status(text: &str) -> Option<Memory> {
    let kib = |key: &str| {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.get(key.len()..)?.split_whitespace().next()?.parse::<u64>().ok()
    };
    Some(Memory { rss_kib: kib("VmRSS:")?, hwm_kib: kib("VmHWM:")? })
}

/// Prometheus text exposition as `series -> value` (series = name plus its label set as
/// written); comments, histograms' `_bucket` series and unparsable lines are skipped.
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The value follows the last space (label values may contain spaces).
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        if series.contains("_bucket{") {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            out.insert(series.trim().to_owned(), v);
        }
    }
    out
}

/// For the series of `families` (metric names): counters (`_total`) that changed between
/// `before` and `after`, as `+delta`; gauges with their value in `after` when not zero.
pub fn changes(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, families: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (series, value) in after {
        let name = series.split('{').next().unwrap_or(series);
        if !families.contains(&name) {
            continue;
        }
        let shown = series.replace(",worker=\"0\"", "").replace("{worker=\"0\"}", "").replace("worker=\"0\",", "");
        if name.ends_with("_total") {
            let delta = value - before.get(series).copied().unwrap_or(0.0);
            if delta != 0.0 {
                out.push(format!("{shown} +{delta}"));
            }
        } else if *value != 0.0 {
            out.push(format!("{shown} = {value}"));
        }
    }
    out
}

/// The well-behaved client's requests during one abuse.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Good {
    pub ok: u64,
    pub failed: u64,
    #[serde(serialize_with = "micros")]
    pub worst: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One abuse's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AbuseResult {
    pub name: String,
    /// What the attacker did, with its parameters.
    pub what: String,
    /// What the attacker saw (connections opened, closed by the gateway, requests...).
    pub attacker: String,
    /// Before the abuse (the peak reset just after reading it).
    pub before: Memory,
    /// The highest `VmRSS` sampled during the abuse, or `VmHWM` if higher.
    pub peak_kib: u64,
    /// At the end of the abuse, its connections still open.
    pub at_end: Memory,
    /// Just after the attacker closed everything.
    pub after: Memory,
    /// After the settle time.
    pub settled: Memory,
    pub good: Good,
    /// [`changes`] of the gateway's counters over the abuse.
    pub counters: Vec<String>,
    /// Connections and requests still open after the settle time (non-zero gauges).
    pub open_after: Vec<String>,
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The results table (MiB; latency in ms) followed by one paragraph per abuse with what the
/// attacker did and saw and the counters.
pub fn markdown(results: &[AbuseResult], settle: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| abuse | RSS before | peak | at end | after | after {}s | good client ok / failed | good worst latency |",
        settle.as_secs()
    );
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for r in results {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} / {} | {:.1} ms |",
            r.name,
            mib(r.before.rss_kib),
            mib(r.peak_kib),
            mib(r.at_end.rss_kib),
            mib(r.after.rss_kib),
            mib(r.settled.rss_kib),
            r.good.ok,
            r.good.failed,
            r.good.worst.as_secs_f64() * 1000.0
        );
    }
    s.push_str(
        "\nRSS in MiB (VmRSS; peak is the highest of VmRSS sampled every 50 ms and VmHWM, reset before each abuse).\n",
    );
    for r in results {
        let _ = write!(s, "\n**{}**: {}. Attacker: {}.", r.name, r.what, r.attacker);
        if r.counters.is_empty() {
            s.push_str(" Counters: no change.");
        } else {
            let _ = write!(s, " Counters: `{}`.", r.counters.join("`, `"));
        }
        if r.open_after.is_empty() {
            s.push_str(" After the settle time nothing is open.\n");
        } else {
            let _ = writeln!(s, " Still open after the settle time: `{}`.", r.open_after.join("`, `"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const STATUS: &str =
        "Name:\tgateway\nVmPeak:\t  200000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t    9876 kB\nThreads:\t5\n";

    #[test]
    fn status_gives_rss_and_hwm() {
        assert_eq!(parse_status(STATUS), Some(Memory { rss_kib: 9876, hwm_kib: 12345 }));
        assert_eq!(parse_status("VmRSS:\t1 kB\n"), None);
    }

    #[test]
    fn metrics_text_parses_and_changes_show_deltas_and_gauges() {
        let before = parse_metrics(
            "# HELP gateway_h2_abuse_total x\n# TYPE gateway_h2_abuse_total counter\n\
             gateway_h2_abuse_total{kind=\"reset\",worker=\"0\"} 2\n\
             gateway_connections_active{worker=\"0\"} 1\n\
             gateway_route_request_duration_seconds_bucket{le=\"0.1\"} 5\n",
        );
        assert_eq!(before.len(), 2);
        assert_eq!(before["gateway_h2_abuse_total{kind=\"reset\",worker=\"0\"}"], 2.0);
        let after = parse_metrics(
            "gateway_h2_abuse_total{kind=\"reset\",worker=\"0\"} 7\n\
             gateway_h2_abuse_total{kind=\"ping\",worker=\"0\"} 0\n\
             gateway_connections_active{worker=\"0\"} 40\n\
             gateway_requests_total{worker=\"0\"} 9\n",
        );
        let c = changes(&before, &after, &["gateway_h2_abuse_total", "gateway_connections_active"]);
        assert_eq!(c, ["gateway_connections_active = 40", "gateway_h2_abuse_total{kind=\"reset\"} +5"]);
    }

    #[test]
    fn markdown_has_a_row_per_abuse_in_mib() {
        let m = |rss| Memory { rss_kib: rss, hwm_kib: rss };
        let r = AbuseResult {
            name: "slowloris".into(),
            what: "500 connections".into(),
            attacker: "500 opened".into(),
            before: m(10240),
            peak_kib: 15360,
            at_end: m(14336),
            after: m(11264),
            settled: m(10752),
            good: Good { ok: 100, failed: 0, worst: Duration::from_micros(2500) },
            counters: vec!["gateway_header_read_timeouts_total +500".into()],
            open_after: vec![],
        };
        let text = markdown(&[r], Duration::from_secs(3));
        let lines: Vec<&str> = text.lines().collect();
        assert!(text.contains("\n| slowloris |"), "{text}");
        assert!(lines[0].starts_with("| abuse | RSS before | peak | at end | after | after 3s |"), "{text}");
        assert_eq!(lines[2], "| slowloris | 10.0 | 15.0 | 14.0 | 11.0 | 10.5 | 100 / 0 | 2.5 ms |");
        assert!(text.contains("**slowloris**: 500 connections. Attacker: 500 opened. Counters: `gateway_header_read_timeouts_total +500`. After the settle time nothing is open."), "{text}");
    }
}
