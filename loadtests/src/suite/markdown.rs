//! `summary.md`: the header, what is missing, one table per scenario, the targets and the plots.

use std::fmt::Write;

use super::model::{Ratios, Stat, Summary};

/// `–`: a figure that is missing.
pub const DASH: &str = "–";

/// The whole report.
pub fn render(s: &Summary) -> String {
    let mut md = String::new();
    header(&mut md, s);
    for sc in &s.http {
        if sc.scenario == "latency" {
            super::markdown_tables::latency(&mut md, sc);
        } else {
            super::markdown_tables::http(&mut md, sc);
        }
    }
    if let Some(t) = &s.tls_h2 {
        super::markdown_tables::tls_h2(&mut md, t);
    }
    if let Some(o) = &s.openloop {
        super::markdown_tables::openloop(&mut md, o);
    }
    if let Some(o) = &s.overload {
        super::markdown_tables::overload(&mut md, o);
    }
    md.push_str("## Targets\n\n");
    md.push_str("The gateway is gateway-uring unless noted. (stated): a figure without a target.\n\n");
    let rows: Vec<Vec<String>> =
        s.targets.iter().map(|t| vec![t.target.clone(), t.measured.clone(), t.met.label().to_owned()]).collect();
    table(&mut md, &["target", "measured", "met"], &rows);
    md.push_str("## Plots\n\n");
    for (file, title) in super::plots::TITLES {
        let _ = writeln!(md, "![{title}]({file})");
    }
    md
}

fn header(md: &mut String, s: &Summary) {
    let m = &s.meta;
    md.push_str("# Benchmark suite summary\n\n");
    let machine = m.machine.as_ref().map(|v| {
        let field = |k: &str| v.get(k).map(|x| x.as_str().map(str::to_owned).unwrap_or_else(|| x.to_string()));
        let parts: Vec<String> = [("cpu_model", ""), ("nproc", " CPUs"), ("kernel", "kernel ")]
            .iter()
            .filter_map(|(k, label)| {
                field(k).map(|x| if k == &"kernel" { format!("{label}{x}") } else { format!("{x}{label}") })
            })
            .collect();
        parts.join(", ")
    });
    let commit = m.commit.as_ref().map(|c| if m.dirty == Some(true) { format!("{c} (dirty)") } else { c.clone() });
    let lines = [
        ("Machine", machine),
        ("Commit", commit),
        ("Date", m.timestamp.clone()),
        ("Command", m.command.as_ref().map(|c| format!("`{c}`"))),
        ("Directory", Some(format!("`{}`", m.dir))),
        ("Files read", Some(if m.files.is_empty() { "none".to_owned() } else { m.files.join(", ") })),
    ];
    for (label, value) in lines {
        let _ = writeln!(md, "- {label}: {}", value.unwrap_or_else(|| DASH.to_owned()));
    }
    md.push('\n');
    if !s.notes.is_empty() {
        md.push_str("## Missing or suspect\n\n");
        for note in &s.notes {
            let _ = writeln!(md, "- {note}");
        }
        md.push('\n');
    }
}

/// A markdown table; every row should have as many cells as `head`.
pub fn table(md: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(md, "| {} |", head.join(" | "));
    let _ = writeln!(md, "|{}", head.iter().map(|_| "---|").collect::<String>());
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md.push('\n');
}

/// A number with three significant figures or so: `51405`, `421`, `17.2`, `8.45`, `0.81`.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn opt(v: Option<f64>) -> String {
    v.map(fmt_num).unwrap_or_else(|| DASH.to_owned())
}

pub fn med(v: Option<Stat>) -> String {
    opt(v.map(|s| s.median))
}

/// `17.2 (15.8–17.9)`: median and range.
pub fn range(v: Option<Stat>) -> String {
    match v {
        Some(s) if s.min != s.max => format!("{} ({}–{})", fmt_num(s.median), fmt_num(s.min), fmt_num(s.max)),
        Some(s) => fmt_num(s.median),
        None => DASH.to_owned(),
    }
}

pub fn x(v: Option<f64>) -> String {
    v.map(|r| format!("{r:.2}x")).unwrap_or_else(|| DASH.to_owned())
}

pub fn ratios(r: Ratios) -> [String; 2] {
    [x(r.vs_nginx), x(r.vs_haproxy)]
}

pub fn int(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_else(|| DASH.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_dashes() {
        assert_eq!(fmt_num(51405.03), "51405");
        assert_eq!(fmt_num(421.4), "421");
        assert_eq!(fmt_num(17.17), "17.2");
        assert_eq!(fmt_num(8.451), "8.45");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(opt(None), "–");
        assert_eq!(range(Some(Stat { median: 17.2, min: 15.8, max: 17.9 })), "17.2 (15.8–17.9)");
        assert_eq!(x(Some(0.8049)), "0.80x");
        assert_eq!(ratios(Ratios { vs_nginx: Some(1.0), vs_haproxy: None }), ["1.00x", "–"]);
    }

    #[test]
    fn an_empty_summary_renders_dashes_and_missing_targets() {
        let mut s = Summary::default();
        s.notes.push("h1-small.json is missing (scenario skipped or failed)".into());
        s.targets = super::super::targets::evaluate(&s);
        let md = render(&s);
        assert!(md.contains("- Commit: –"));
        assert!(md.contains("- h1-small.json is missing"));
        assert!(md.contains("| h1-small: CPU µs/request ≤ 0.8x nginx | – (no h1-small.json) | – |"), "{md}");
        assert!(md.contains("![CPU per request"));
    }
}
