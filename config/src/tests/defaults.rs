//! `packaging/examples/full.toml` states the defaults the model has, and nothing else.
//!
//! [`extract`] reads every default the comments of `full.toml` state (its module doc is the
//! grammar they are written in); [`table`] says, for each key, how to read the model's value
//! from a config that leaves the key out. The test fails when a stated default has no table
//! entry, when a table entry has no stated default, and when the two differ. [`keys`] makes
//! every key `full.toml` sets either state its default or say why it states none, and
//! [`readme`] checks the defaults the README and `docs/*.md` claim against the same table.

use std::path::Path;

use toml_edit::{ImDocument, Item, Value};

use super::parse;
use crate::units::{parse_duration, parse_size, show_duration};

mod extract;
mod keys;
mod readme;
mod table;
mod table_routes;

use extract::{stated_defaults, Stated};
use table::{Entry, Given};

fn full_toml() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/examples/full.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn full_toml_states_the_model_defaults() {
    let stated = stated_defaults(&full_toml()).unwrap_or_else(|errors| panic!("full.toml:\n{}", errors.join("\n")));
    let entries = table::entries();
    let mut problems = Vec::new();
    for s in &stated {
        if !entries.iter().any(|e| e.key == s.key) {
            problems.push(format!(
                "full.toml:{}: {} states the default {} but the test's table has no entry for it: add one \
                 (tests/defaults/table*.rs) reading the model's value",
                s.line, s.key, s.text
            ));
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        if entries[..i].iter().any(|e| e.key == entry.key) {
            problems.push(format!("the table has {} twice", entry.key));
        }
        let Some(s) = stated.iter().find(|s| s.key == entry.key) else {
            problems.push(format!(
                "{}: full.toml states no default for it (write `Default X.` in its comment), but the table checks one",
                entry.key
            ));
            continue;
        };
        match model_value(entry) {
            Ok(model) => {
                let wanted = if s.is_value { canonical(&s.text) } else { Ok(s.text.clone()) };
                match wanted {
                    Ok(wanted) if wanted == model => {}
                    Ok(wanted) => problems.push(format!(
                        "full.toml:{}: {}: stated default {} ({wanted}), but the model has {model}",
                        s.line, s.key, s.text
                    )),
                    Err(e) => problems.push(format!("full.toml:{}: {}: stated default {}: {e}", s.line, s.key, s.text)),
                }
            }
            Err(e) => problems.push(format!("{}: {e}", entry.key)),
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert!(stated.len() >= 100, "only {} stated defaults found: is the extractor broken?", stated.len());
}

#[test]
fn every_key_full_toml_sets_states_its_default_or_why_it_has_none() {
    let text = full_toml();
    let stated = stated_defaults(&text).unwrap_or_else(|errors| panic!("full.toml:\n{}", errors.join("\n")));
    let doc = ImDocument::parse(text.as_str()).expect("full.toml is TOML");
    let set = keys::set_keys(doc.as_table());
    let is_stated = |key: &str| stated.iter().any(|s| s.key == key || s.key.starts_with(&format!("{key} (")));
    let listed = |key: &str| keys::NOT_STATED.iter().any(|(k, _)| *k == key);
    let mut problems = Vec::new();
    for key in &set {
        if !is_stated(key) && !listed(key) {
            problems.push(format!(
                "full.toml sets `{key}` but states no default for it: write `Default X.` in its comment, or list it \
                 in keys::NOT_STATED with the reason it has none"
            ));
        }
    }
    for (key, why) in keys::NOT_STATED {
        if is_stated(key) {
            problems.push(format!("`{key}` is listed as having no stated default ({why}), but full.toml states one"));
        }
        if !set.iter().any(|k| k == key) {
            problems.push(format!("`{key}` is listed as having no stated default, but full.toml does not set it"));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// The model's value of `entry.key` in a minimal config that has the key's enclosing table but
/// not the key, as the table renders it.
fn model_value(entry: &Entry) -> Result<String, String> {
    let text = config_text(&entry.given);
    let doc = ImDocument::parse(text.as_str()).map_err(|e| format!("the given config is not TOML: {e}\n{text}"))?;
    let key = entry.key.split(" (").next().unwrap_or(entry.key);
    let (table, _) = key.rsplit_once('.').unwrap_or(("", key));
    if lookup(doc.as_item(), table).is_none() {
        return Err(format!("the given config lacks the enclosing table {table}:\n{text}"));
    }
    if lookup(doc.as_item(), key).is_some() {
        return Err(format!("the given config sets the key itself:\n{text}"));
    }
    let config = parse(&text, "<given>").map_err(|e| format!("the given config is invalid: {e}\n{text}"))?;
    Ok((entry.read)(&config))
}

fn config_text(g: &Given) -> String {
    format!(
        "{}\n[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n{}\n[[routes]]\nname = \"r\"\n{}\n\
         [[clusters]]\nname = \"c\"\nendpoints = {}\n{}\n{}\n",
        g.top, g.listener, g.route, g.endpoints, g.cluster, g.extra
    )
}

/// The item at a key path such as `listeners[].tls.session_tickets` (`[]`: the first element).
fn lookup<'a>(root: &'a Item, path: &str) -> Option<&'a Item> {
    let mut item = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, first) = match part.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (part, false),
        };
        item = item.get(name)?;
        if first {
            item = item.get(0)?;
        }
    }
    Some(item)
}

/// A stated value in the form the table renders the model: durations as `show_duration`
/// writes them (`"300s"`), sizes as a number of bytes, numbers and booleans as written, strings
/// quoted, arrays `[a, b]`, inline tables `{ k = v }`, `none` as is.
fn canonical(text: &str) -> Result<String, String> {
    if text == "none" {
        return Ok(text.to_owned());
    }
    let value: Value = text.parse().map_err(|e| format!("not a TOML value: {e}"))?;
    Ok(canonical_value(&value))
}

fn canonical_value(value: &Value) -> String {
    match value {
        Value::String(s) => {
            let s = s.value();
            if let Ok(d) = parse_duration(s) {
                format!("\"{}\"", show_duration(d))
            } else if let Ok(bytes) = parse_size(s) {
                bytes.to_string()
            } else {
                format!("\"{s}\"")
            }
        }
        Value::Integer(n) => n.value().to_string(),
        Value::Float(f) => f.value().to_string(),
        Value::Boolean(b) => b.value().to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(canonical_value).collect::<Vec<_>>().join(", ")),
        Value::InlineTable(t) => {
            let fields: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {}", canonical_value(v))).collect();
            format!("{{ {} }}", fields.join(", "))
        }
    }
}

/// `README.md` and every `docs/*.md` (sorted), as (path relative to the repository, text): the
/// README is a front page, and the claims moved with the reference text into `docs/`.
fn documentation() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names = vec!["README.md".to_owned()];
    let docs = root.join("docs");
    let mut found: Vec<String> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("{}: {e}", docs.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    found.sort();
    names.extend(found);
    names
        .into_iter()
        .map(|name| {
            let path = root.join(&name);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, text)
        })
        .collect()
}

/// How many claims each file makes: a file that stops making them (its reader broken, or the
/// text moved without this list) fails the test. Update it when claims are added or moved.
const CLAIMS_PER_FILE: &[(&str, usize)] =
    &[("docs/configuration.md", 16), ("docs/operations.md", 1), ("docs/overload.md", 5), ("docs/tls-and-http2.md", 3)];

#[test]
fn documentation_agrees_with_the_model_defaults() {
    let entries = table::entries();
    let mut problems = Vec::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut claims = Vec::new();
    for (name, text) in documentation() {
        let found = readme::claims(&text);
        counts.push((name.clone(), found.len()));
        claims.extend(found.into_iter().map(|claim| (name.clone(), claim)));
    }
    for (file, claim) in &claims {
        let matching: Vec<&Entry> =
            entries.iter().filter(|e| e.key == claim.key || e.key.ends_with(&format!(".{}", claim.key))).collect();
        if matching.is_empty() {
            problems.push(format!(
                "{file}:{}: claims the default {} for `{}`, a key the table does not check",
                claim.line, claim.value, claim.key
            ));
            continue;
        }
        let models: Vec<String> = matching
            .iter()
            .map(|e| model_value(e).map_or_else(|err| format!("({err})"), |v| format!("{} = {v}", e.key)))
            .collect();
        if !models.iter().any(|m| m.ends_with(&format!(" = {}", claim.value))) {
            problems.push(format!(
                "{file}:{}: claims the default {} for `{}`, but the model has {}",
                claim.line,
                claim.value,
                claim.key,
                models.join(" / ")
            ));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    let expected: Vec<(String, usize)> = CLAIMS_PER_FILE.iter().map(|(f, n)| ((*f).to_owned(), *n)).collect();
    let made: Vec<(String, usize)> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(made, expected, "claims per file (files without any left out): is the reader broken? {claims:?}");
    assert!(claims.len() >= 15, "only {} claims found: is the reader broken? {claims:?}", claims.len());
}

fn one(text: &str) -> Vec<(String, String)> {
    stated_defaults(text).unwrap_or_else(|e| panic!("{e:?}")).into_iter().map(|s: Stated| (s.key, s.text)).collect()
}

#[test]
fn each_form_of_statement_is_read_and_attributed() {
    let text = r#"[server]
# Workers: "auto" (default, one per CPU) or a number.
workers = "auto"
# Leave it out for none (the default).
drain_delay = "5s"
# Admin. Default { address = "127.0.0.1:9901" }.
admin = { address = "127.0.0.1:9901" }
# Default ["http/1.1"] without tls, default ["h2", "http/1.1"] with tls.
protocols = ["h2"]

[[clusters]]
# Pool:
#   max_idle  idle connections (default 1024, the default connection cap: a
#             busy front end needs many)
#   idle      "30s" or longer (default: tries share it)
# The rest. Default: the endpoints' host name; required otherwise.
pool = { max_idle = 1 }
"#;
    assert_eq!(
        one(text),
        [
            ("server.workers", "\"auto\""),
            ("server.drain_delay", "none"),
            ("server.admin", "{ address = \"127.0.0.1:9901\" }"),
            ("server.protocols (without tls)", "[\"http/1.1\"]"),
            ("server.protocols (with tls)", "[\"h2\", \"http/1.1\"]"),
            ("clusters[].pool", "the endpoints' host name"),
            ("clusters[].pool.max_idle", "1024"),
            ("clusters[].pool.idle", "tries share it"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
}

#[test]
fn a_statement_the_grammar_does_not_cover_is_an_error() {
    for (text, wanted) in [
        ("[server]\n# Defaults to something.\nwatch = true\n", "line 2"),
        ("[server]\n# Per default.\nwatch = true\n", "no value or description"),
        ("[server]\n# Default 1.\n\nwatch = true\n", "documents no key"),
        ("[server]\n# Default 1. Default 2.\nwatch = true\n", "stated twice"),
        ("[server]\n# Wide × (default: x)\n\nwatch = true\n", "documents no key"),
    ] {
        let errors = stated_defaults(text).expect_err(text);
        assert!(errors.iter().any(|e| e.contains(wanted)), "{text}: {errors:?}");
    }
    assert_eq!(canonical("\"5m\""), Ok("\"300s\"".to_owned()));
    assert_eq!(canonical("\"64KiB\""), Ok("65536".to_owned()));
}

#[test]
fn readme_claims_are_read_in_each_form() {
    let text =
        "Prose: (`percent`, default 20%), `stall_timeout` (default 5 s), (`server.watch = true`, the default).\n\
                ```toml\n[[clusters]]\nbalancer = \"p2c\"   # p2c (default) | maglev\n\
                retry_budget = { percent = 20, min_concurrent = 3 }   # the defaults\n\
                adaptive_concurrency = { enabled = true }   # opt-in\n\
                [clusters.health_check]\n# host = \"h\"   # default: the endpoint\n```\n\
                ```\nnot = \"toml\"   # x (default)\n```\n";
    let claims: Vec<(String, String)> = readme::claims(text).into_iter().map(|c| (c.key, c.value)).collect();
    assert_eq!(
        claims,
        [
            ("server.watch", "true"),
            ("percent", "20"),
            ("stall_timeout", "\"5s\""),
            ("clusters[].balancer", "\"p2c\""),
            ("clusters[].retry_budget.percent", "20"),
            ("clusters[].retry_budget.min_concurrent", "3"),
            ("clusters[].adaptive_concurrency.enabled", "false"),
            ("clusters[].health_check.host", "the endpoint"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
}
