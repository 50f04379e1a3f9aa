//! The source tree reads as the request path: every top-level module of `gateway/src` uses only
//! the modules below it in [`LAYERS`], so there is no import circle across folders. The
//! HTTP/1.1 codec is a crate of its own (`gateway/h1`), which Cargo keeps free of the rest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top to bottom. A module may use itself and any module after it, never one before it.
const LAYERS: &[&str] = &[
    // A worker's main task: accept loops, tick, drain.
    "listen",
    // The client side: accept, TLS, protocol choice, the codecs' glue, writing answers.
    "downstream",
    // Dispatch, the forwarding loop, answers, decoration, accounting.
    "pipeline",
    // One worker's state (snapshot view, clusters, limits, metrics, log).
    "worker",
    "snapshot",
    "route",
    "upstream",
    "admission",
    // The protocol-neutral request view and the wire formats.
    "request",
    "codec",
    "tls",
    "accesslog",
    "stats",
    // Threads, rings, timers, buffers, streams: nothing of HTTP.
    "runtime",
];

/// The process around the workers (boot, control, admin): may use anything.
const PROCESS: &[&str] = &[
    "lib",
    "main",
    "control",
    "dns",
    "drain",
    "admin",
    "health_check",
    "logging",
    "upgrade",
    "privileges",
    "sdnotify",
];

#[test]
fn modules_use_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), src.display());
    let mut violations = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap_or(file);
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_owned())
            .unwrap_or_default();
        if PROCESS.contains(&top.as_str()) {
            continue;
        }
        let Some(rank) = LAYERS.iter().position(|l| *l == top) else {
            violations.insert(format!("{}: top-level module `{top}` is in no layer", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for used in uses(code) {
                let allowed = match LAYERS.iter().position(|l| *l == used) {
                    Some(r) => r >= rank,
                    None => false,
                };
                if !allowed && used != top {
                    violations.insert(format!("{}:{}: `{top}` uses `crate::{used}`", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn the_http1_codec_depends_on_no_part_of_the_gateway() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("h1/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap_or_default();
    let deps = text.split("[dependencies]").nth(1).and_then(|s| s.split("\n[").next()).unwrap_or_default();
    assert!(deps.contains("httparse"), "{} lists no httparse: {deps}", manifest.display());
    assert!(!deps.contains("gateway"), "the HTTP/1.1 codec depends on a gateway crate: {deps}");
}

/// The module names `code` reaches through `crate::NAME`.
fn uses(code: &str) -> Vec<String> {
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // Not `gateway_crate::` or the like.
            code[..*i].chars().last().is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
        .map(|(i, m)| {
            code[i + m.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
        })
        .filter(|name| !name.is_empty() && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
