//! The five SVG plots of a suite run, drawn from a [`Summary`]. A plot without data is still
//! written, saying why it is empty.

use super::markdown::fmt_num;
use super::model::{Stat, Summary};
use super::svg::{bar_chart, line_chart, no_data, BarChart, Line, LineChart, Series};
use super::targets::CPU_TARGET;

/// File names and titles, in report order.
pub const TITLES: [(&str, &str); 5] = [
    ("cpu.svg", "CPU per request relative to nginx"),
    ("latency.svg", "Added latency per hop"),
    ("openloop.svg", "p99 latency vs fraction of peak"),
    ("idle.svg", "Memory per idle connection"),
    ("overload.svg", "Overload: requests that succeeded"),
];

/// Proxies in the order legends list them; others follow in order of appearance.
const ORDER: [&str; 10] = [
    "gateway-uring",
    "gateway",
    "gateway-on",
    "gateway-off",
    "gateway-epoll",
    "gateway-uring-log",
    "gateway-baseline",
    "nginx",
    "haproxy",
    "direct",
];

/// A proxy and its figure in one group of a chart.
type ProxyValue = (String, Option<f64>);

/// `(file name, SVG)` for every plot.
pub fn all(s: &Summary) -> Vec<(&'static str, String)> {
    let [cpu_t, latency_t, openloop_t, idle_t, overload_t] = TITLES.map(|t| t.1);
    vec![
        ("cpu.svg", cpu(s, cpu_t)),
        ("latency.svg", latency(s, latency_t)),
        ("openloop.svg", openloop(s, openloop_t)),
        ("idle.svg", idle(s, idle_t)),
        ("overload.svg", overload(s, overload_t)),
    ]
}

fn cpu(s: &Summary, title: &str) -> String {
    let mut groups: Vec<(String, Vec<ProxyValue>)> = Vec::new();
    let mut notes = Vec::new();
    for name in ["h1-small", "h1-16k", "https"] {
        match s.http.iter().find(|h| h.scenario == name) {
            Some(h) => {
                groups.push((name.into(), h.rows.iter().map(|r| (r.proxy.clone(), r.cpu_ratio.vs_nginx)).collect()))
            }
            None => notes.push(format!("no {name}.json")),
        }
    }
    match &s.tls_h2 {
        Some(t) => {
            // tls-h2 may call the io_uring gateway just "gateway": one bar colour, one legend entry.
            let plain =
                !t.rows.iter().any(|r| r.proxy == "gateway-uring") && t.rows.iter().any(|r| r.proxy == "gateway");
            if plain {
                notes.push("h2, h2c and handshake: tls-h2's \"gateway\" is shown as gateway-uring".into());
            }
            let name = |p: &str| if plain && p == "gateway" { "gateway-uring".to_owned() } else { p.to_owned() };
            groups.push(("h2".into(), t.rows.iter().map(|r| (name(&r.proxy), r.h2_cpu_ratio.vs_nginx)).collect()));
            // Files from before the h2c test have no h2c figures: a note, not an empty group.
            if t.rows.iter().any(|r| r.h2c_cpu_us.is_some()) {
                groups
                    .push(("h2c".into(), t.rows.iter().map(|r| (name(&r.proxy), r.h2c_cpu_ratio.vs_nginx)).collect()));
            } else {
                notes.push("no h2c run in tls-h2.json".into());
            }
            groups.push((
                "handshake".into(),
                t.rows.iter().map(|r| (name(&r.proxy), r.handshake_cpu_ratio.vs_nginx)).collect(),
            ));
        }
        None => notes.push("no tls-h2.json (h2, h2c, handshake)".into()),
    }
    groups.retain(|(name, rows)| {
        let has = rows.iter().any(|(p, v)| p == "nginx" && v.is_some());
        if !has {
            notes.push(format!("{name}: no nginx figure to compare with"));
        }
        has
    });
    if groups.is_empty() {
        return no_data(title, &notes.join("; "));
    }
    let proxies =
        ordered(groups.iter().flat_map(|(_, rows)| rows.iter().map(|(p, _)| p.as_str())).filter(|p| *p != "direct"));
    let series = proxies
        .iter()
        .map(|p| Series {
            name: p.clone(),
            values: groups.iter().map(|(_, rows)| rows.iter().find(|(q, _)| q == p).and_then(|(_, v)| *v)).collect(),
        })
        .collect();
    bar_chart(&BarChart {
        title: format!("{title} (nginx = 1.0, lower is better)"),
        y_label: "CPU per request / nginx's".into(),
        groups: groups.into_iter().map(|(g, _)| g).collect(),
        series,
        reference: Some((CPU_TARGET, format!("target {CPU_TARGET}x"))),
        value_fmt: |v| format!("{v:.2}"),
        notes,
    })
}

fn latency(s: &Summary, title: &str) -> String {
    let Some(sc) = s.http.iter().find(|h| h.scenario == "latency") else {
        return no_data(title, "no latency.json");
    };
    let rows: Vec<_> = sc.rows.iter().filter(|r| r.added.is_some()).collect();
    if rows.is_empty() {
        return no_data(title, "latency.json has no direct row to subtract");
    }
    let names = ordered(rows.iter().map(|r| r.proxy.as_str()));
    let series = names
        .iter()
        .filter_map(|n| rows.iter().find(|r| &r.proxy == n))
        .map(|r| {
            let a = r.added.unwrap_or_default();
            Series { name: r.proxy.clone(), values: vec![a.p50_us, a.p99_us] }
        })
        .collect();
    bar_chart(&BarChart {
        title: format!("{title} (over direct, one request at a time)"),
        y_label: "added latency, µs".into(),
        groups: vec!["p50".into(), "p99".into()],
        series,
        reference: None,
        value_fmt: fmt_num,
        notes: vec![],
    })
}

fn openloop(s: &Summary, title: &str) -> String {
    let Some(o) = &s.openloop else { return no_data(title, "no openloop.json") };
    let mut notes = Vec::new();
    let names = ordered(o.rows.iter().map(|r| r.proxy.as_str()));
    let lines: Vec<Line> = names
        .iter()
        .filter_map(|n| o.rows.iter().find(|r| &r.proxy == n))
        .map(|r| {
            let points: Vec<(f64, f64)> = r.points.iter().filter_map(|p| Some((p.fraction, p.p99_us?))).collect();
            if points.is_empty() {
                notes.push(format!("{}: no p99 figures", r.proxy));
            }
            Line { name: r.proxy.clone(), points }
        })
        .collect();
    if lines.iter().all(|l| l.points.is_empty()) {
        return no_data(title, "openloop.json has no p99 figures");
    }
    line_chart(&LineChart {
        title: title.into(),
        x_label: "offered rate / the proxy's own peak".into(),
        y_label: "p99 latency, µs".into(),
        lines,
        x_fmt: |v| format!("{v:.1}"),
        notes,
    })
}

fn idle(s: &Summary, title: &str) -> String {
    let Some(t) = &s.tls_h2 else { return no_data(title, "no tls-h2.json") };
    let m = |x: Option<Stat>| x.map(|x| x.median);
    let names = ordered(t.rows.iter().map(|r| r.proxy.as_str()));
    let series: Vec<Series> = names
        .iter()
        .filter_map(|n| t.rows.iter().find(|r| &r.proxy == n))
        .map(|r| Series { name: r.proxy.clone(), values: vec![m(r.idle_plain_kib), m(r.idle_tls_kib)] })
        .collect();
    let mut notes = Vec::new();
    if series.iter().all(|s| s.values.first().copied().flatten().is_none()) {
        notes.push("no plain-TCP idle figures in tls-h2.json".to_owned());
    }
    bar_chart(&BarChart {
        title: format!("{title} (PSS, lower is better)"),
        y_label: "KiB per idle connection".into(),
        groups: vec!["plain TCP".into(), "TLS".into()],
        series,
        reference: None,
        value_fmt: |v| format!("{v:.1}"),
        notes,
    })
}

fn overload(s: &Summary, title: &str) -> String {
    let Some(o) = &s.overload else { return no_data(title, "no overload.json") };
    let mut classes: Vec<String> = Vec::new();
    for c in o.rows.iter().flat_map(|r| &r.classes) {
        if !classes.contains(&c.class) {
            classes.push(c.class.clone());
        }
    }
    if classes.is_empty() {
        return no_data(title, "overload.json has no classes");
    }
    let names = ordered(o.rows.iter().map(|r| r.proxy.as_str()));
    let series = names
        .iter()
        .filter_map(|n| o.rows.iter().find(|r| &r.proxy == n))
        .map(|r| Series {
            name: r.proxy.clone(),
            values: classes.iter().map(|c| r.classes.iter().find(|k| &k.class == c).and_then(|k| k.ok_pct)).collect(),
        })
        .collect();
    bar_chart(&BarChart {
        title: format!("{title}, % of offered per class"),
        y_label: "% of offered answered OK".into(),
        groups: classes,
        series,
        reference: None,
        value_fmt: |v| format!("{v:.0}%"),
        notes: vec![],
    })
}

/// Distinct names, known proxies first in [`ORDER`], the rest in order of appearance.
fn ordered<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    for n in names {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    let rank = |n: &str| ORDER.iter().position(|o| *o == n).unwrap_or(ORDER.len());
    seen.sort_by_key(|n| rank(n));
    seen.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
#[path = "plots_tests.rs"]
mod tests;
