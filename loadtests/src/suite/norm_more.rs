//! The open-loop and overload scenarios.

use serde_json::Value;

use super::load::{count, note_missing, num, summary_entries, text};
use super::model::{OpenLoop, OpenLoopPoint, OpenLoopRow, Overload, OverloadClass, OverloadRow};

/// Normalises openloop.json: each proxy's points sorted by fraction of its own peak.
pub fn openloop(doc: &Value, notes: &mut Vec<String>) -> OpenLoop {
    let entries = summary_entries("openloop", doc, notes);
    let rows: Vec<OpenLoopRow> = entries
        .iter()
        .map(|(proxy, e)| {
            let mut points: Vec<OpenLoopPoint> = e
                .get("points")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some(OpenLoopPoint {
                        fraction: num(p, "fraction")?,
                        rate: num(p, "rate"),
                        achieved_rps: num(p, "achieved_rps"),
                        p50_us: num(p, "p50_us"),
                        p90_us: num(p, "p90_us"),
                        p99_us: num(p, "p99_us"),
                        p999_us: num(p, "p999_us"),
                        errors: count(p, "errors"),
                        valid: p.get("valid").and_then(Value::as_bool),
                    })
                })
                .collect();
            points.sort_by(|a, b| a.fraction.total_cmp(&b.fraction));
            if points.is_empty() {
                notes.push(format!("openloop: {proxy} has no points"));
            }
            for p in points.iter().filter(|p| p.valid == Some(false)) {
                notes.push(format!("openloop: {proxy} at {} of peak is marked invalid", p.fraction));
            }
            OpenLoopRow { proxy: proxy.clone(), peak_rps: num(e, "peak_rps"), points }
        })
        .collect();
    if !entries.is_empty() {
        let present: Vec<&str> = rows.iter().map(|r| r.proxy.as_str()).collect();
        note_missing("openloop", &["gateway-uring", "nginx", "haproxy"], &present, notes);
    }
    OpenLoop { timestamp: text(doc, "timestamp"), rows }
}

/// Normalises overload.json (`runs[]`, one per proxy and round): counts are summed over a
/// proxy's valid rounds, latencies and goodput are their median. A proxy with no valid round
/// is reported from its invalid ones, with a note.
pub fn overload(doc: &Value, notes: &mut Vec<String>) -> Overload {
    let runs: Vec<&Value> = doc.get("runs").and_then(Value::as_array).into_iter().flatten().collect();
    if runs.is_empty() {
        notes.push("overload: no runs; nothing to report".to_owned());
    }
    let mut proxies: Vec<String> = Vec::new();
    for run in &runs {
        if let Some(p) = text(run, "proxy").filter(|p| !proxies.contains(p)) {
            proxies.push(p);
        }
    }
    let class_order = class_order(doc, &runs);
    let rows: Vec<OverloadRow> = proxies
        .iter()
        .map(|proxy| {
            let all: Vec<&Value> =
                runs.iter().copied().filter(|r| text(r, "proxy").as_deref() == Some(proxy)).collect();
            let valid: Vec<&Value> =
                all.iter().copied().filter(|r| r.get("valid").and_then(Value::as_bool) != Some(false)).collect();
            let used = if valid.is_empty() {
                notes.push(format!("overload: {proxy} has no valid round; its invalid rounds are shown"));
                all
            } else {
                valid
            };
            let classes = class_order.iter().map(|class| overload_class(class, &used)).collect();
            OverloadRow {
                proxy: proxy.clone(),
                rounds: used.len(),
                goodput_pct: median(used.iter().filter_map(|r| num(r, "goodput_pct")).collect()),
                classes,
            }
        })
        .collect();
    if !rows.is_empty() {
        let present: Vec<&str> = rows.iter().map(|r| r.proxy.as_str()).collect();
        note_missing("overload", &["gateway-on", "nginx", "haproxy"], &present, notes);
    }
    Overload { timestamp: text(doc, "timestamp"), rows }
}

/// Classes in the order of `params.load.mix` (`critical=10,normal=30,...`), then any others
/// the runs hold.
fn class_order(doc: &Value, runs: &[&Value]) -> Vec<String> {
    let mut order: Vec<String> = doc
        .pointer("/params/load/mix")
        .and_then(Value::as_str)
        .map(|mix| mix.split(',').filter_map(|c| c.split('=').next()).map(|c| c.trim().to_owned()).collect())
        .unwrap_or_default();
    for run in runs {
        for name in run.get("classes").and_then(Value::as_object).into_iter().flat_map(|o| o.keys()) {
            if !order.contains(name) {
                order.push(name.clone());
            }
        }
    }
    order
}

fn overload_class(class: &str, runs: &[&Value]) -> OverloadClass {
    let of: Vec<&Value> = runs.iter().filter_map(|r| r.get("classes")?.get(class)).collect();
    let unloaded: Vec<&Value> = runs.iter().filter_map(|r| r.get("unloaded")?.get(class)).collect();
    let sum = |key: &str| of.iter().filter_map(|c| count(c, key)).reduce(|a, b| a + b);
    let med = |values: &[&Value], key: &str| median(values.iter().filter_map(|c| num(c, key)).collect());
    let (offered, succeeded) = (sum("offered"), sum("succeeded"));
    let ok_pct = match (offered, succeeded) {
        (Some(o), Some(s)) if o > 0 => Some(s as f64 * 100.0 / o as f64),
        _ => med(&of, "ok_pct"),
    };
    OverloadClass {
        class: class.to_owned(),
        offered,
        succeeded,
        ok_pct,
        shed: sum("shed"),
        rate_limited: sum("rate_limited"),
        timed_out: sum("timed_out"),
        p50_ms: med(&of, "ok_p50_ms"),
        p99_ms: med(&of, "ok_p99_ms"),
        unloaded_p50_ms: med(&unloaded, "p50_ms"),
        unloaded_p99_ms: med(&unloaded, "p99_ms"),
    }
}

/// The median (mean of the middle two for an even count); `None` for no values.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => values.get(n / 2).copied(),
        _ => Some((values.get(n / 2 - 1)? + values.get(n / 2)?) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(proxy: &str, valid: bool, offered: u64, ok: u64, p99: f64, goodput: f64) -> Value {
        json!({"proxy": proxy, "valid": valid, "goodput_pct": goodput,
            "classes": {"critical": {"offered": offered, "succeeded": ok, "shed": 1, "rate_limited": 0, "timed_out": 2,
                                      "ok_p50_ms": 40.0, "ok_p99_ms": p99},
                        "extra": {"offered": 1}},
            "unloaded": {"critical": {"p50_ms": 41.0, "p99_ms": 42.0}}})
    }

    #[test]
    fn rounds_are_summed_and_medians_taken() {
        let doc = json!({"params": {"load": {"mix": "normal=30,critical=10"}}, "runs": [
            run("gateway-on", true, 100, 90, 50.0, 90.0), run("gateway-on", true, 100, 70, 70.0, 80.0),
            run("gateway-on", false, 100, 0, 1.0, 1.0), run("nginx", false, 10, 5, 9.0, 50.0)]});
        let mut notes = Vec::new();
        let o = overload(&doc, &mut notes);
        let gw = &o.rows[0];
        assert_eq!((gw.proxy.as_str(), gw.rounds, gw.goodput_pct), ("gateway-on", 2, Some(85.0)));
        let names: Vec<&str> = gw.classes.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(names, ["normal", "critical", "extra"]);
        assert_eq!(gw.classes[0].offered, None);
        let critical = &gw.classes[1];
        assert_eq!((critical.offered, critical.succeeded, critical.ok_pct), (Some(200), Some(160), Some(80.0)));
        assert_eq!((critical.shed, critical.timed_out, critical.p99_ms), (Some(2), Some(4), Some(60.0)));
        assert_eq!(critical.unloaded_p99_ms, Some(42.0));
        assert_eq!(o.rows[1].rounds, 1);
        assert!(notes.contains(&"overload: nginx has no valid round; its invalid rounds are shown".to_owned()));
        assert!(notes.contains(&"overload: no haproxy (shown as –)".to_owned()));
    }

    #[test]
    fn openloop_points_are_sorted() {
        let doc = json!({"summary": [{"proxy": "nginx", "peak_rps": 1000.0, "points": [
            {"fraction": 0.9, "p99_us": 900.0, "valid": false}, {"fraction": 0.5, "p99_us": 500.0, "errors": 0}, {"rate": 1}]}]});
        let mut notes = Vec::new();
        let o = openloop(&doc, &mut notes);
        let fractions: Vec<f64> = o.rows[0].points.iter().map(|p| p.fraction).collect();
        assert_eq!(fractions, [0.5, 0.9]);
        assert_eq!(o.rows[0].points[0].errors, Some(0));
        assert!(notes.contains(&"openloop: nginx at 0.9 of peak is marked invalid".to_owned()));
        assert!(notes.contains(&"openloop: no gateway-uring, haproxy (shown as –)".to_owned()));
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
    }
}
