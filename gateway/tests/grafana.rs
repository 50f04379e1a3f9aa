//! The shipped Grafana dashboard (`packaging/grafana/gateway.json`) uses only metrics the
//! gateway exports: every metric name in every query is listed in `gateway/METRICS.md`, and
//! every label it groups by is one of that metric's labels.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Labels every Prometheus target carries besides the gateway's own.
const TARGET_LABELS: [&str; 3] = ["instance", "job", "le"];

#[test]
fn every_dashboard_query_uses_documented_metrics_and_labels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let metrics = documented_metrics(&std::fs::read_to_string(root.join("gateway/METRICS.md")).unwrap());
    assert!(metrics.len() > 50, "parsed only {} metrics from METRICS.md", metrics.len());
    let text = std::fs::read_to_string(root.join("packaging/grafana/gateway.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    collect_queries(&dashboard, &mut exprs);
    assert!(exprs.len() >= 30, "found only {} queries", exprs.len());
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let names = metric_names(expr);
        if names.is_empty() {
            problems.push(format!("no gateway metric in {expr:?}"));
        }
        let mut labels: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for name in &names {
            match resolve(&metrics, name) {
                Some((base, own)) => {
                    used.insert(base);
                    labels.extend(own.iter().map(String::as_str));
                }
                None => problems.push(format!("{name} (in {expr:?}) is not in METRICS.md")),
            }
        }
        for label in grouping_labels(expr) {
            if !labels.contains(label.as_str()) {
                problems.push(format!("label {label} (in {expr:?}) belongs to none of {names:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The dashboard covers the main families.
    for family in [
        "gateway_requests_total",
        "gateway_route_request_duration_seconds",
        "gateway_cluster_upstream_failures_total",
        "gateway_panics_total",
        "gateway_workers_unhealthy",
        "gateway_tls_certificate_expiry_seconds",
        "process_resident_memory_bytes",
    ] {
        assert!(used.contains(family), "the dashboard does not show {family}");
    }
}

#[test]
fn the_checker_catches_unknown_metrics_and_labels() {
    let metrics = documented_metrics(
        "| `gateway_a_total` | counter | `route`, `worker` (per-worker view only) | a |\n\
         | `gateway_b_seconds` | histogram | `cluster` | b |\n",
    );
    assert!(resolve(&metrics, "gateway_a_total").is_some());
    assert!(resolve(&metrics, "gateway_b_seconds_bucket").is_some());
    assert!(resolve(&metrics, "gateway_a_total_bucket").is_none(), "suffixes only on histograms");
    assert!(resolve(&metrics, "gateway_c_total").is_none());
    let expr = r#"histogram_quantile(0.99, sum by (cluster, le) (rate(gateway_b_seconds_bucket{instance=~"$instance",route="x"}[5m])))"#;
    assert_eq!(metric_names(expr), ["gateway_b_seconds_bucket"]);
    assert_eq!(grouping_labels(expr), ["cluster", "le"]);
    assert_eq!(grouping_labels("sum without (worker) (rate(gateway_a_total[1m]))"), ["worker"]);
}

/// Name -> labels, from the rows of METRICS.md's table.
fn documented_metrics(doc: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(name), Some(kind), Some(labels)) = (cells.get(1), cells.get(2), cells.get(3)) else { continue };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else { continue };
        let labels: Vec<String> = labels.split('`').skip(1).step_by(2).map(str::to_owned).collect();
        out.insert(name.to_owned(), ((*kind).to_owned(), labels));
    }
    out
}

/// The documented family of `name` (a histogram's `_bucket`, `_sum` and `_count` included) and
/// its labels.
fn resolve<'m>(metrics: &'m BTreeMap<String, (String, Vec<String>)>, name: &str) -> Option<(&'m str, &'m [String])> {
    if let Some((key, (_, labels))) = metrics.get_key_value(name) {
        return Some((key.as_str(), labels.as_slice()));
    }
    let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s))?;
    let (key, (kind, labels)) = metrics.get_key_value(base)?;
    (kind == "histogram").then_some((key.as_str(), labels.as_slice()))
}

/// Every `expr` and template `query` in the dashboard.
fn collect_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::Object(q)) => {
                        if let Some(serde_json::Value::String(s)) = q.get("query") {
                            out.push(s.clone());
                        }
                    }
                    _ => collect_queries(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_queries(i, out)),
        _ => {}
    }
}

/// Identifiers outside label matchers and strings that name a gateway or process metric.
fn metric_names(expr: &str) -> Vec<String> {
    identifiers(expr).into_iter().filter(|i| i.starts_with("gateway_") || i.starts_with("process_")).collect()
}

/// The labels in `by (...)` and `without (...)` clauses.
fn grouping_labels(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for keyword in ["by", "without"] {
        let mut rest = expr;
        while let Some(at) = rest.find(keyword) {
            let before = rest[..at].chars().last();
            let after = rest[at + keyword.len()..].trim_start();
            rest = &rest[at + keyword.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || !after.starts_with('(') {
                continue;
            }
            let inner = &after[1..after.find(')').unwrap_or(after.len())];
            out.extend(inner.split(',').map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()));
        }
    }
    out
}

/// Identifiers of a PromQL expression, skipping `{...}` matchers, `[...]` ranges and strings.
fn identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.chars().peekable();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    while let Some(c) = chars.next() {
        match c {
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            '"' => {
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == '"' {
                        break;
                    }
                }
            }
            c if (c.is_ascii_alphabetic() || c == '_') && depth_brace == 0 && depth_bracket == 0 => {
                let mut ident = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' || d == ':' {
                        ident.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(ident);
            }
            c if c.is_ascii_digit() => {
                // Skip numbers (and their exponents or units) whole.
                while chars.peek().is_some_and(|d| d.is_ascii_alphanumeric() || *d == '.') {
                    chars.next();
                }
            }
            _ => {}
        }
    }
    out
}
