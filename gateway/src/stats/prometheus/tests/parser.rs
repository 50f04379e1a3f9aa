//! A strict parser of the Prometheus text format 0.0.4, for tests: every sample belongs to a
//! family declared by `# TYPE` before it, names and label names are valid, no family is declared
//! twice or split, no series repeats, label escapes are the three allowed ones, and every
//! histogram's buckets are cumulative and end with `+Inf` equal to `_count`.

use std::collections::{BTreeMap, BTreeSet};

pub(super) struct Exposition {
    /// Family names in order of their TYPE lines.
    pub order: Vec<String>,
    pub families: BTreeMap<String, ParsedFamily>,
}

#[derive(Default)]
pub(super) struct ParsedFamily {
    pub kind: String,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

pub(super) struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Exposition {
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = self.families.values().flat_map(|f| &f.samples).find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        });
        found.unwrap_or_else(|| panic!("no sample {name}{labels:?}")).value
    }
}

pub(super) fn parse(text: &str) -> Result<Exposition, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the last line must end with a newline".into());
    }
    let mut exp = Exposition { order: Vec::new(), families: BTreeMap::new() };
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut closed: BTreeSet<String> = BTreeSet::new();
    let mut series: BTreeSet<(String, Vec<(String, String)>)> = BTreeSet::new();
    let mut enter = |family: &str, current: &mut Option<String>| -> Result<(), String> {
        if current.as_deref() != Some(family) {
            if closed.contains(family) {
                return Err(format!("lines of {family} are not in one group"));
            }
            if let Some(prev) = current.replace(family.to_string()) {
                closed.insert(prev);
            }
        }
        Ok(())
    };
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            check_name(name).map_err(at)?;
            enter(name, &mut current).map_err(at)?;
            if exp.families.get(name).is_some_and(|f| !f.samples.is_empty()) || helps.contains_key(name) {
                return Err(at("HELP repeated or after samples".into()));
            }
            helps.insert(name.to_string(), unescape(help, false).map_err(at)?);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| at("TYPE without a type".into()))?;
            check_name(name).map_err(at)?;
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(at(format!("unknown type {kind}")));
            }
            enter(name, &mut current).map_err(at)?;
            if exp.families.contains_key(name) {
                return Err(at("family declared twice".into()));
            }
            exp.order.push(name.to_string());
            exp.families.insert(name.to_string(), ParsedFamily { kind: kind.to_string(), ..Default::default() });
        } else if line.starts_with('#') {
            continue;
        } else {
            let sample = parse_sample(line).map_err(at)?;
            let family = family_of(&exp.families, &sample.name).ok_or_else(|| at("sample before its TYPE".into()))?;
            enter(&family, &mut current).map_err(at)?;
            let mut sorted = sample.labels.clone();
            sorted.sort();
            if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(at("label repeated".into()));
            }
            if !series.insert((sample.name.clone(), sorted)) {
                return Err(at("duplicate series".into()));
            }
            exp.families.get_mut(&family).ok_or("vanished")?.samples.push(sample);
        }
    }
    for (name, help) in helps {
        exp.families.get_mut(&name).ok_or_else(|| format!("HELP for undeclared {name}"))?.help = Some(help);
    }
    for (name, family) in &exp.families {
        check_family(name, family)?;
    }
    Ok(exp)
}

/// The declared family a sample name belongs to.
fn family_of(families: &BTreeMap<String, ParsedFamily>, name: &str) -> Option<String> {
    if let Some(f) = families.get(name) {
        if f.kind != "histogram" {
            return Some(name.to_string());
        }
    }
    let suffixes: &[(&str, &[&str])] =
        &[("_bucket", &["histogram"]), ("_sum", &["histogram", "summary"]), ("_count", &["histogram", "summary"])];
    suffixes.iter().find_map(|(suffix, kinds)| {
        let base = name.strip_suffix(suffix)?;
        families.get(base).filter(|f| kinds.contains(&f.kind.as_str())).map(|_| base.to_string())
    })
}

/// One histogram's `(le, bucket)` pairs, `_sum` and `_count`.
type HistogramSeries = (Vec<(f64, f64)>, Option<f64>, Option<f64>);

fn check_family(name: &str, family: &ParsedFamily) -> Result<(), String> {
    for s in &family.samples {
        if s.value.is_nan() || (family.kind == "counter" && s.value < 0.0) {
            return Err(format!("{}: bad value {}", s.name, s.value));
        }
    }
    if family.kind != "histogram" {
        return Ok(());
    }
    // Group by the labels other than `le`.
    let mut groups: BTreeMap<Vec<(String, String)>, HistogramSeries> = BTreeMap::new();
    for s in &family.samples {
        let mut key: Vec<_> = s.labels.iter().filter(|(k, _)| k != "le").cloned().collect();
        key.sort();
        let group = groups.entry(key).or_default();
        match s.name.strip_prefix(name) {
            Some("_bucket") => {
                let le = s.labels.iter().find(|(k, _)| k == "le").ok_or("bucket without le")?;
                let bound = if le.1 == "+Inf" { f64::INFINITY } else { le.1.parse().map_err(|_| "bad le")? };
                group.0.push((bound, s.value));
            }
            Some("_sum") => group.1 = Some(s.value),
            Some("_count") => group.2 = Some(s.value),
            _ => return Err(format!("{}: not a histogram series", s.name)),
        }
    }
    for (labels, (buckets, sum, count)) in groups {
        let ctx = format!("{name}{labels:?}");
        if buckets.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1) {
            return Err(format!("{ctx}: buckets not increasing and cumulative"));
        }
        let last = buckets.last().ok_or(format!("{ctx}: no buckets"))?;
        if last.0 != f64::INFINITY {
            return Err(format!("{ctx}: no +Inf bucket"));
        }
        if count != Some(last.1) {
            return Err(format!("{ctx}: _count {count:?} != +Inf bucket {}", last.1));
        }
        if sum.is_none() {
            return Err(format!("{ctx}: no _sum"));
        }
    }
    Ok(())
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(mut inner) = rest.strip_prefix('{') {
        loop {
            if let Some(after) = inner.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after) = inner.split_once("=\"").ok_or("label without =\"")?;
            if !is_name(key, false) || key.starts_with("__") {
                return Err(format!("bad label name {key:?}"));
            }
            let (value, after) = take_quoted(after)?;
            labels.push((key.to_string(), value));
            inner = match after.strip_prefix(',') {
                Some(next) if !next.starts_with('}') => next,
                Some(_) => return Err("trailing comma".into()),
                None if after.starts_with('}') => after,
                None => return Err("expected , or }".into()),
            };
        }
    }
    let rest = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let mut fields = rest.split(' ');
    let value = match fields.next().unwrap_or_default() {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| "bad timestamp")?;
    }
    if fields.next().is_some() {
        return Err("junk after the value".into());
    }
    Ok(Sample { name: name.to_string(), labels, value })
}

/// A label value up to its closing quote, unescaped; and what follows the quote.
fn take_quoted(s: &str) -> Result<(String, &str), String> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match (escaped, c) {
            (false, '\\') => escaped = true,
            (false, '"') => return Ok((unescape(&s[..i], true)?, &s[i + 1..])),
            _ => escaped = false,
        }
    }
    Err("unterminated label value".into())
}

fn unescape(s: &str, quotes: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            other => return Err(format!("bad escape \\{other:?}")),
        }
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), String> {
    if is_name(name, true) {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

fn is_name(s: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c == '_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit()) || (colon && c == ':')
    };
    let mut chars = s.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}
