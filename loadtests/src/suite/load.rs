//! Reading one suite directory: which scenario files exist, what they hold, and what is missing.
//!
//! Nothing here fails on a missing or malformed scenario: the file is left out and a note says
//! why. Only writing the outputs can fail.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{Meta, Stat, Summary};
use super::{markdown, norm_http, norm_more, norm_tls, paired, plots, targets};

/// The HTTP scenarios in the `h1-small` format, in report order.
pub const HTTP_SCENARIOS: [&str; 6] = ["h1-small", "h1-16k", "h1-large", "https", "h1-vhosts", "latency"];

/// The files `summarize_dir` wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub files: Vec<PathBuf>,
}

/// Reads every scenario file in `dir` and normalises it; `command` is shown in the report header.
pub fn load_dir(dir: &Path, command: Option<&str>) -> Summary {
    let mut summary = Summary {
        meta: Meta { dir: dir.display().to_string(), command: command.map(str::to_owned), ..Meta::default() },
        ..Summary::default()
    };
    let mut commits: Vec<(String, String)> = Vec::new();
    let mut read = |name: &str, summary: &mut Summary| -> Option<Value> {
        let doc = read_scenario(dir, name, &mut summary.notes)?;
        if let Some(commit) = doc.pointer("/git/commit").and_then(Value::as_str) {
            commits.push((name.to_owned(), commit.to_owned()));
        }
        let meta = &mut summary.meta;
        if meta.files.is_empty() {
            meta.timestamp = doc.get("timestamp").and_then(Value::as_str).map(str::to_owned);
            meta.commit = doc.pointer("/git/commit").and_then(Value::as_str).map(str::to_owned);
            meta.dirty = doc.pointer("/git/dirty").and_then(Value::as_bool);
            meta.machine = doc.get("machine").cloned();
        }
        meta.files.push(format!("{name}.json"));
        Some(doc)
    };
    let target = targets::CPU_TARGET;
    for scenario in HTTP_SCENARIOS {
        if let Some(doc) = read(scenario, &mut summary) {
            summary.http.push(norm_http::scenario(scenario, &doc, &mut summary.notes));
            if targets::CPU_SCENARIOS.contains(&scenario) {
                summary.paired.extend(paired::row(scenario, &doc, "wrk", "cpu_us_per_req", target));
            }
        }
    }
    if let Some(doc) = read("tls-h2", &mut summary) {
        summary.tls_h2 = Some(norm_tls::tls_h2(&doc, &mut summary.notes));
        for test in ["h2", "h2c"] {
            summary.paired.extend(paired::row(test, &doc, test, "cpu_us_per_op", target));
        }
    }
    if let Some(doc) = read("openloop", &mut summary) {
        summary.openloop = Some(norm_more::openloop(&doc, &mut summary.notes));
    }
    if let Some(doc) = read("overload", &mut summary) {
        summary.overload = Some(norm_more::overload(&doc, &mut summary.notes));
    }
    let mut distinct: Vec<&str> = commits.iter().map(|(_, c)| c.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() > 1 {
        let list: Vec<String> = commits.iter().map(|(f, c)| format!("{f} {c}")).collect();
        summary.notes.push(format!("the files come from different commits: {}", list.join(", ")));
    }
    summary.targets = targets::evaluate(&summary);
    summary
}

/// Writes `summary.json`, `summary.md` and the plots for `dir` into `out`, creating `out`.
pub fn summarize_dir(dir: &Path, out: &Path, command: Option<&str>) -> Result<Written, String> {
    let summary = load_dir(dir, command);
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let json = serde_json::to_string_pretty(&summary).map_err(|e| format!("cannot encode the summary: {e}"))?;
    let mut outputs =
        vec![("summary.json".to_owned(), json + "\n"), ("summary.md".to_owned(), markdown::render(&summary))];
    outputs.extend(plots::all(&summary).into_iter().map(|(name, svg)| (name.to_owned(), svg)));
    let mut files = Vec::new();
    for (name, text) in outputs {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        files.push(path);
    }
    Ok(Written { files })
}

/// `DIR/NAME.json` as a JSON object, or `None` with a note saying why not. The file's own
/// `skipped` list becomes notes too.
fn read_scenario(dir: &Path, name: &str, notes: &mut Vec<String>) -> Option<Value> {
    let path = dir.join(format!("{name}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            notes.push(format!("{name}.json is missing (scenario skipped or failed)"));
            return None;
        }
        Err(e) => {
            notes.push(format!("{name}.json cannot be read: {e}"));
            return None;
        }
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(doc @ Value::Object(_)) => doc,
        Ok(_) => {
            notes.push(format!("{name}.json is not a JSON object; left out"));
            return None;
        }
        Err(e) => {
            notes.push(format!("{name}.json is not valid JSON ({e}); left out"));
            return None;
        }
    };
    match doc.get("benchmark").and_then(Value::as_str) {
        Some(b) if b == name => {}
        Some(b) => notes.push(format!("{name}.json says benchmark \"{b}\"; read as {name}")),
        None => notes.push(format!("{name}.json has no benchmark field; read as {name}")),
    }
    for skipped in doc.get("skipped").and_then(Value::as_array).into_iter().flatten() {
        let what = match (skipped.get("proxy").and_then(Value::as_str), skipped.get("reason").and_then(Value::as_str)) {
            (Some(p), Some(r)) => format!("{p}: {r}"),
            _ => skipped.to_string(),
        };
        notes.push(format!("{name}: skipped {what}"));
    }
    Some(doc)
}

/// `{median, min, max}` (min/max default to the median), a plain number, or `None`.
pub(crate) fn stat(v: &Value, key: &str) -> Option<Stat> {
    match v.get(key)? {
        Value::Number(n) => n.as_f64().map(Stat::one),
        obj @ Value::Object(_) => {
            let median = num(obj, "median")?;
            Some(Stat { median, min: num(obj, "min").unwrap_or(median), max: num(obj, "max").unwrap_or(median) })
        }
        _ => None,
    }
}

pub(crate) fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64().filter(|x| x.is_finite())
}

/// A count: an integer, or a float holding one (a median of counts may be `2000.0`).
pub(crate) fn count(v: &Value, key: &str) -> Option<u64> {
    let value = v.get(key)?;
    value.as_u64().or_else(|| value.as_f64().filter(|x| *x >= 0.0 && x.fract() == 0.0).map(|x| x as u64))
}

pub(crate) fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)?.as_str().map(str::to_owned)
}

/// The `summary` array's entries that name a proxy, or none with a note.
pub(crate) fn summary_entries<'a>(name: &str, doc: &'a Value, notes: &mut Vec<String>) -> Vec<(String, &'a Value)> {
    let Some(entries) = doc.get("summary").and_then(Value::as_array) else {
        notes.push(format!("{name}: no summary array; nothing to report"));
        return Vec::new();
    };
    entries.iter().filter_map(|e| Some((text(e, "proxy")?, e))).collect()
}

/// Notes the proxies of `expected` that `present` lacks.
pub(crate) fn note_missing(name: &str, expected: &[&str], present: &[&str], notes: &mut Vec<String>) {
    let missing: Vec<&str> = expected.iter().copied().filter(|p| !present.contains(p)).collect();
    if !missing.is_empty() {
        notes.push(format!("{name}: no {} (shown as –)", missing.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stats_from_objects_numbers_and_nulls() {
        let v = json!({"a": {"median": 2, "min": 1, "max": 3}, "b": 5.5, "c": null, "d": {"median": 4}});
        assert_eq!(stat(&v, "a"), Some(Stat { median: 2.0, min: 1.0, max: 3.0 }));
        assert_eq!(stat(&v, "b"), Some(Stat::one(5.5)));
        assert_eq!(stat(&v, "c"), None);
        assert_eq!(stat(&v, "d"), Some(Stat::one(4.0)));
        assert_eq!(stat(&v, "e"), None);
        assert_eq!(count(&json!({"n": 2000.0, "m": 1.5, "k": -1}), "n"), Some(2000));
        assert_eq!(count(&json!({"m": 1.5}), "m"), None);
    }

    #[test]
    fn an_empty_or_odd_directory_yields_notes_not_panics() {
        let dir = std::env::temp_dir().join(format!("suite-load-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("h1-small.json"), "{not json").unwrap();
        std::fs::write(dir.join("https.json"), "[1, 2]").unwrap();
        std::fs::write(
            dir.join("latency.json"),
            r#"{"benchmark": "h1-small", "skipped": [{"proxy": "haproxy", "reason": "not installed"}]}"#,
        )
        .unwrap();
        let s = load_dir(&dir, Some("bench/suite.sh"));
        let notes = s.notes.join("\n");
        assert!(notes.contains("h1-small.json is not valid JSON"), "{notes}");
        assert!(notes.contains("https.json is not a JSON object"), "{notes}");
        assert!(notes.contains("h1-16k.json is missing"), "{notes}");
        assert!(notes.contains("latency.json says benchmark \"h1-small\""), "{notes}");
        assert!(notes.contains("latency: skipped haproxy: not installed"), "{notes}");
        assert!(notes.contains("latency: no summary array"), "{notes}");
        assert!(notes.contains("overload.json is missing"), "{notes}");
        assert_eq!(s.meta.files, ["latency.json"]);
        assert_eq!(s.http.len(), 1);
        let out = dir.join("out");
        let written = summarize_dir(&dir, &out, None).unwrap();
        assert_eq!(written.files.len(), 7);
        assert!(std::fs::read_to_string(out.join("summary.md")).unwrap().contains("latency.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
