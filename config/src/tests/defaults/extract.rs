//! Finds every default that the comments of `full.toml` state, and the key each belongs to.
//!
//! The grammar (what the comments of `full.toml` are written in):
//!
//! - A *comment block* is a run of `#` lines. It documents the line right after it: a
//!   `key = value` line (the key, inside the current `[table]` or `[[array]]`), or a `[table]`
//!   header (the table itself). A block followed by a blank line documents nothing, and may state
//!   no default.
//! - Inside a block, a *member line* `#   name  description` (two or more spaces after `#`, a
//!   lower-case name, two or more spaces) documents `name` inside the inline table assigned on
//!   the documented line; lines indented deeper continue it. Every other line belongs to the
//!   documented key itself.
//! - A default is stated by the word `default` (any case, outside quotes) in one of three forms:
//!   1. `V (default)`, `V (default, ...)`, `V (default: ...)`: the value `V` written just before
//!      (a quoted string, or a number but not with `:`: in `1 to 100 (default: ...)` the words
//!      after the colon are the default), as in `"p2c" (default)`;
//!   2. `Default V`, `Default: V`, `(default V ...)`: the value after it, a TOML value (string,
//!      number, boolean, array, inline table) or `none`; text after `V` is commentary, except
//!      `with X` / `without X` up to the next punctuation, which names a condition: the key
//!      becomes `key (with X)`. When no value follows, the words up to the next `(`, `)`, `;` or
//!      end of sentence *describe* the default (`Default: the endpoints' host name;`), and the
//!      table must render the model in those exact words;
//!   3. `... (the default)`: the key left out means none/off (`leave it out to disable (the
//!      default)`).
//! - Any other use of the word (`defaults`, `Default` with nothing after it, a statement in a
//!   block that documents no key) is an error, unless it is one of [`NOT_STATEMENTS`].

/// Phrases that use the word without stating a default.
pub const NOT_STATEMENTS: &[&str] = &["take the default named in their comment", "the default connection cap"];

/// One stated default.
#[derive(Debug, Clone, PartialEq)]
pub struct Stated {
    /// Key path, e.g. `routes[].retry.num_retries`; a condition is appended: `... (with tls)`.
    pub key: String,
    /// The value as written (`"30s"`, `1024`, `none`) or the words describing it.
    pub text: String,
    /// Whether `text` is a value (rather than words describing one).
    pub is_value: bool,
    /// 1-based line of the statement's unit in the file.
    pub line: usize,
}

/// Every stated default of `text`, or every line that breaks the grammar.
pub fn stated_defaults(text: &str) -> Result<Vec<Stated>, Vec<String>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut table = String::new();
    let mut arrays: Vec<String> = Vec::new();
    let mut block: Vec<(usize, &str)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let number = n + 1;
        if let Some(comment) = line.strip_prefix('#') {
            block.push((number, comment));
            continue;
        }
        let trimmed = line.trim();
        let documented = if let Some(name) = trimmed.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
            let name = name.trim().to_owned();
            arrays.push(name.clone());
            table = format!("{name}[]");
            Some(table.clone())
        } else if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            table = table_path(name.trim(), &arrays);
            Some(table.clone())
        } else if let Some((key, _)) = trimmed.split_once('=').filter(|(k, _)| is_name(k.trim())) {
            Some(if table.is_empty() { key.trim().to_owned() } else { format!("{table}.{}", key.trim()) })
        } else {
            None
        };
        if !block.is_empty() {
            read_block(&block, documented.as_deref(), &mut out, &mut errors);
            block.clear();
        }
    }
    read_block(&block, None, &mut out, &mut errors);
    for (i, a) in out.iter().enumerate() {
        if let Some(b) = out[..i].iter().find(|b| b.key == a.key) {
            errors.push(format!("line {}: {} has a default stated twice (also line {})", a.line, a.key, b.line));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// `listeners.tls` inside `[[listeners]]` is `listeners[].tls`.
fn table_path(name: &str, arrays: &[String]) -> String {
    let mut path = String::new();
    for part in name.split('.') {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(part);
        if arrays.contains(&path.replace("[]", "")) {
            path.push_str("[]");
        }
    }
    path
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Splits a block into units (the key's own text, then one per member) and reads each.
fn read_block(block: &[(usize, &str)], documented: Option<&str>, out: &mut Vec<Stated>, errors: &mut Vec<String>) {
    // (member name or "" for the key itself, first line, text)
    let mut units: Vec<(String, usize, String)> =
        vec![(String::new(), block.first().map_or(0, |b| b.0), String::new())];
    let mut member_indent: Option<usize> = None;
    for &(number, comment) in block {
        let indent = comment.len() - comment.trim_start().len();
        let body = comment.trim();
        let member =
            (indent >= 2).then(|| body.split_once("  ")).flatten().map(|(name, _)| name).filter(|name| is_name(name));
        let unit = if let Some(name) = member {
            member_indent = Some(indent);
            units.push((name.to_owned(), number, String::new()));
            units.len() - 1
        } else if member_indent.is_some_and(|m| indent > m) {
            units.len() - 1
        } else {
            member_indent = None;
            0
        };
        if let Some((_, _, text)) = units.get_mut(unit) {
            text.push(' ');
            text.push_str(body);
        }
    }
    for (member, line, text) in units {
        for found in statements(&text) {
            let Some(key) = documented else {
                errors.push(format!("line {line}: a default is stated in a comment that documents no key: {text:?}"));
                continue;
            };
            match found {
                Ok((value, is_value, condition)) => {
                    let mut key = if member.is_empty() { key.to_owned() } else { format!("{key}.{member}") };
                    if let Some(c) = condition {
                        key = format!("{key} ({c})");
                    }
                    out.push(Stated { key, text: value, is_value, line });
                }
                Err(e) => errors.push(format!("line {line}: {key}: {e}")),
            }
        }
    }
}

/// One statement: (value or description, whether it is a value, condition), or what is wrong.
type Found = Result<(String, bool, Option<String>), String>;

/// Every statement in one unit's text.
fn statements(text: &str) -> Vec<Found> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = lower.get(from..).and_then(|s| s.find("default")).map(|i| i + from) {
        let end = at + "default".len();
        from = end;
        let before = &text[..at];
        let after = &text[end..];
        let quoted = before.matches('"').count() % 2 == 1;
        let in_word = before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '`')
            || after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if quoted {
            continue;
        }
        if after.starts_with('s') && !after[1..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            found.push(Err(format!("write `Default X` rather than `defaults` near {:?}", short(before))));
            continue;
        }
        if in_word {
            continue;
        }
        let phrase = |p: &&str| {
            let offset = p.find("default").unwrap_or(0);
            at.checked_sub(offset).is_some_and(|start| lower[start..].starts_with(*p))
        };
        if NOT_STATEMENTS.iter().any(phrase) {
            continue;
        }
        found.push(statement(before, after));
    }
    found
}

fn statement(before: &str, after: &str) -> Found {
    let before = before.trim_end();
    // 3. `(the default)`
    if before.ends_with("(the") && after.starts_with(')') {
        return Ok(("none".to_owned(), true, None));
    }
    // 1. `V (default)`, `V (default, ...)`, `V (default: ...)`
    if let Some(prior) = before.strip_suffix('(') {
        let value = trailing_value(prior.trim_end());
        let number = value.is_some_and(|v| !v.starts_with('"'));
        if after.starts_with([')', ',']) || (after.starts_with(':') && !number) {
            if let Some(value) = value {
                return Ok((value.to_owned(), true, None));
            }
        }
    }
    // 2. `Default V`, `Default: V`, `(default V`
    let rest = after.trim_start();
    let rest = rest.strip_prefix(':').unwrap_or(rest).trim_start();
    if let Some(value) = leading_value(rest) {
        let tail = rest[value.len()..].trim_start();
        let condition = ["with ", "without "].iter().find(|w| tail.starts_with(**w)).map(|_| {
            let stop = tail.find([',', '.', ';', ')']).unwrap_or(tail.len());
            tail[..stop].trim().to_owned()
        });
        return Ok((value.to_owned(), true, condition));
    }
    let stop = ["(", ")", ";", ". "].iter().filter_map(|s| rest.find(s)).min().unwrap_or(rest.len());
    let words = rest[..stop].trim().trim_end_matches('.');
    if words.is_empty() {
        return Err(format!("`default` with no value or description near {:?}", short(after)));
    }
    Ok((words.to_owned(), false, None))
}

/// A quoted string or a number that ends `s`.
fn trailing_value(s: &str) -> Option<&str> {
    if let Some(inner) = s.strip_suffix('"') {
        return inner.rfind('"').map(|i| &s[i..]);
    }
    let start =
        s.char_indices().rfind(|(_, c)| !(c.is_ascii_digit() || *c == '.')).map_or(0, |(i, c)| i + c.len_utf8());
    let number = &s[start..];
    number.starts_with(|c: char| c.is_ascii_digit()).then_some(number)
}

/// A TOML value (or `none`) that starts `s`.
fn leading_value(s: &str) -> Option<&str> {
    let first = s.chars().next()?;
    let end = match first {
        '"' => s[1..].find('"').map(|i| i + 2),
        '[' | '{' => closing(s),
        c if c.is_ascii_digit() || c == '-' => {
            Some(s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '_')).unwrap_or(s.len()))
        }
        _ => ["true", "false", "none"]
            .iter()
            .find(|w| s.starts_with(**w) && !s[w.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()))
            .map(|w| w.len()),
    }?;
    let value = s[..end].trim_end_matches('.');
    (!value.is_empty()).then_some(value)
}

/// The length of a bracketed value at the start of `s`, quotes respected.
fn closing(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '[' | '{' if !quoted => depth += 1,
            ']' | '}' if !quoted => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn short(s: &str) -> &str {
    let end = s.char_indices().nth(60).map_or(s.len(), |(i, _)| i);
    &s[..end]
}
