//! The defaults the README claims, where it claims them in a form a test can read:
//!
//! - in a ```` ```toml ```` block, a `key = value` line whose comment says `X (default`
//!   (`X` is the default), or `the default(s)` (the line's value is the default; for an inline
//!   table, each of its members), or `default with tls` (the key's default with tls), or
//!   `opt-in` (each `true` on the line is `false` by default); a commented-out
//!   `# key = value  # default: words` describes the default in words;
//! - in prose, `` `key` `` followed within a few words by `default N` (N a number, optionally
//!   with a unit: `5 s`, `100 ms`, `50%`, `16 KiB`), and `` `key = value`, the default ``.
//!
//! Other sentences (the "finite by default" summary, for one) are not read.

use super::canonical;

/// One claim: the key as the README names it (a path when it can tell, else the bare key), and
/// the claimed value in the form of `super::canonical` (or words for a described default).
#[derive(Debug)]
pub struct Claim {
    pub line: usize,
    pub key: String,
    pub value: String,
}

pub fn claims(readme: &str) -> Vec<Claim> {
    let mut out = Vec::new();
    let mut in_toml = false;
    let mut in_code = false;
    let mut table = String::new();
    let mut arrays: Vec<String> = Vec::new();
    for (n, line) in readme.lines().enumerate() {
        let number = n + 1;
        if line.starts_with("```") {
            in_toml = !in_code && line.trim() == "```toml";
            in_code = !in_code;
            table.clear();
            arrays.clear();
            continue;
        }
        if in_toml {
            toml_line(line, number, &mut table, &mut arrays, &mut out);
        } else if !in_code {
            prose_line(line, number, &mut out);
        }
    }
    out
}

fn toml_line(line: &str, number: usize, table: &mut String, arrays: &mut Vec<String>, out: &mut Vec<Claim>) {
    // `# key = value  # default: words`: a key left out on purpose.
    if let Some(rest) = line.trim_start().strip_prefix("# ") {
        let (inner, words) = split_comment(rest);
        let words = words.and_then(|w| w.trim().strip_prefix("default: "));
        if let (Some((key, _)), Some(words)) = (inner.split_once(" = "), words) {
            out.push(Claim { line: number, key: path(table, key.trim()), value: words.trim().to_owned() });
        }
        return;
    }
    let (code, comment) = split_comment(line);
    let code = code.trim();
    if let Some(name) = code.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
        arrays.push(name.to_owned());
        *table = format!("{name}[]");
        return;
    }
    if let Some(name) = code.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        let parts: Vec<String> = name
            .split('.')
            .map(|p| if arrays.iter().any(|a| a == p) { format!("{p}[]") } else { p.to_owned() })
            .collect();
        *table = parts.join(".");
        return;
    }
    let (Some((key, value)), Some(comment)) = (code.split_once(" = "), comment) else { return };
    let key = path(table, key.trim());
    let value = value.trim();
    let lower = comment.to_ascii_lowercase();
    if lower.contains("default with tls") {
        out.push(Claim { line: number, key: format!("{key} (with tls)"), value: canonical(value).unwrap_or_default() });
    } else if let Some(at) = lower.find(" (default") {
        let word = comment[..at].split_whitespace().last().unwrap_or("");
        let word = if word.starts_with('"') || word.starts_with(|c: char| c.is_ascii_digit()) {
            word.to_owned()
        } else {
            format!("\"{word}\"")
        };
        if let Ok(v) = canonical(&word) {
            out.push(Claim { line: number, key, value: v });
        }
    } else if lower.contains("the default") || lower.contains("opt-in") {
        let opt_in = lower.contains("opt-in");
        let claim = |v: &toml_edit::Value| {
            if opt_in {
                (v.as_bool() == Some(true)).then(|| "false".to_owned())
            } else {
                Some(super::canonical_value(v))
            }
        };
        match value.parse::<toml_edit::Value>() {
            Ok(toml_edit::Value::InlineTable(t)) => {
                for (k, v) in t.iter() {
                    if let Some(value) = claim(v) {
                        out.push(Claim { line: number, key: format!("{key}.{k}"), value });
                    }
                }
            }
            Ok(v) => out.extend(claim(&v).map(|value| Claim { line: number, key, value })),
            Err(_) => {}
        }
    }
}

fn prose_line(line: &str, number: usize, out: &mut Vec<Claim>) {
    // `key = value`, the default
    for marker in ["`, the default", "` (the default)"] {
        if let Some(at) = line.find(marker) {
            if let Some(open) = line[..at].rfind('`') {
                if let Some((key, value)) = line[open + 1..at].split_once(" = ") {
                    if let Ok(v) = canonical(value.trim()) {
                        out.push(Claim { line: number, key: key.trim().to_owned(), value: v });
                    }
                }
            }
        }
    }
    // `key` ... default N
    let mut from = 0;
    while let Some(at) = line[from..].find("default ").map(|i| i + from) {
        from = at + 1;
        let before = &line[..at];
        let Some(close) = before.rfind('`') else { continue };
        let Some(open) = before[..close].rfind('`') else { continue };
        let key = &before[open + 1..close];
        let between = &before[close + 1..];
        let is_key = !key.is_empty()
            && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if !is_key || between.len() > 12 || between.contains("default") {
            continue;
        }
        if let Some(value) = prose_value(&line[at + "default ".len()..]) {
            out.push(Claim { line: number, key: key.to_owned(), value });
        }
    }
}

/// `5 s`, `100 ms`, `50%`, `16 KiB`, `0.9` at the start of `s`, in canonical form.
fn prose_value(s: &str) -> Option<String> {
    let digits = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let number = s[..digits].trim_end_matches('.');
    if number.is_empty() {
        return None;
    }
    let rest = &s[digits..];
    let unit = ["%", " ms", " s", " KiB", " MiB", "ms", "s"]
        .iter()
        .find(|u| rest.starts_with(**u) && !rest[u.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()));
    let text = match unit.map(|u| u.trim()) {
        None | Some("%") => number.to_owned(),
        Some(u) => format!("\"{number}{u}\""),
    };
    canonical(&text).ok()
}

fn path(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_owned()
    } else {
        format!("{table}.{key}")
    }
}

/// `(code, comment)`: the line split at its first `#` outside quotes.
fn split_comment(line: &str) -> (&str, Option<&str>) {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return (&line[..i], Some(&line[i + 1..])),
            _ => {}
        }
    }
    (line, None)
}
