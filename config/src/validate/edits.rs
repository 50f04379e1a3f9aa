//! `routes[].request_headers`, `response_headers` and `rewrite`.

use crate::locate::KeyPath;
use crate::model::{HeaderEdits, Part, PathMatch, Rewrite, Template, Var};
use crate::problems::Problems;
use crate::raw::{RawHeaderEdits, RawRewrite};

use super::fields::{is_field_value, is_token};

/// Which message a field is refused with: its framing or hop-by-hop nature, or who sets it.
const NEVER: [(&str, &str); 9] = [
    ("content-length", "the gateway frames bodies itself"),
    ("transfer-encoding", "the gateway frames bodies itself"),
    ("connection", "hop-by-hop fields are the connection's, not the route's"),
    ("keep-alive", "hop-by-hop fields are the connection's, not the route's"),
    ("te", "hop-by-hop fields are the connection's, not the route's"),
    ("trailer", "hop-by-hop fields are the connection's, not the route's"),
    ("upgrade", "hop-by-hop fields are the connection's, not the route's"),
    ("proxy-connection", "hop-by-hop fields are the connection's, not the route's"),
    ("host", "the upstream's Host is the request's authority"),
];
const REQUEST_MANAGED: [&str; 8] = [
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "forwarded",
    "via",
    "x-request-id",
    "expect",
];
const RESPONSE_MANAGED: [(&str, &str); 2] =
    [("server", "set server.server_header instead"), ("strict-transport-security", "set the route's hsts instead")];

/// The edits of one direction (`response`: of the upstream's response); `None` when empty.
pub(super) fn convert(
    raw: &RawHeaderEdits,
    response: bool,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> Option<HeaderEdits> {
    let mut edits = HeaderEdits::default();
    let name_ok = |name: &str, at: &KeyPath, p: &mut Problems<'_>| -> Option<String> {
        let lower = name.to_ascii_lowercase();
        let refused = if !is_token(name) {
            Some("is not a valid field name (an RFC 9110 token)".to_owned())
        } else if let Some((_, why)) = NEVER.iter().find(|(n, _)| *n == lower) {
            Some(format!("cannot be edited: {why}"))
        } else if !response && REQUEST_MANAGED.contains(&lower.as_str()) {
            Some("is set by the gateway itself (see the listener's trusted_proxies and forwarded)".to_owned())
        } else if let (true, Some((_, why))) = (response, RESPONSE_MANAGED.iter().find(|(n, _)| *n == lower)) {
            Some(format!("cannot be edited here: {why}"))
        } else {
            None
        };
        match refused {
            Some(why) => {
                p.at(at, format!("field {name:?} {why}"));
                None
            }
            None => Some(lower),
        }
    };
    for (key, list) in [("set", &raw.set), ("add", &raw.add)] {
        for (name, value) in list {
            let at = path.key(key).key(name);
            let (Some(lower), Some(template)) = (name_ok(name, &at, p), template(value, p, &at)) else { continue };
            let target = if key == "set" { &mut edits.set } else { &mut edits.add };
            target.push((lower, template));
        }
    }
    for (i, name) in raw.remove.iter().enumerate() {
        let at = path.key("remove").index(i);
        let Some(lower) = name_ok(name, &at, p) else { continue };
        if edits.set.iter().any(|(n, _)| *n == lower) {
            p.at(&at, format!("field {name:?} is both set and removed: keep one"));
        } else if !edits.remove.contains(&lower) {
            edits.remove.push(lower);
        }
    }
    (!edits.is_empty()).then_some(edits)
}

/// A value with `${variable}`s: printable, no surrounding whitespace, known variables only.
fn template(text: &str, p: &mut Problems<'_>, at: &KeyPath) -> Option<Template> {
    if !is_field_value(text) || text.trim() != text {
        p.at(at, format!("value {text:?} must have no control characters and no leading or trailing whitespace"));
        return None;
    }
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let (before, after) = rest.split_at(start);
        if !before.is_empty() {
            parts.push(Part::Text(before.to_owned()));
        }
        let after = after.get(2..).unwrap_or_default();
        let Some(end) = after.find('}') else {
            p.at(at, format!("value {text:?} has a `${{` without its closing `}}`"));
            return None;
        };
        let name = after.get(..end).unwrap_or_default();
        let Some((_, var)) = Var::ALL.iter().find(|(n, _)| *n == name) else {
            let known: Vec<String> = Var::ALL.iter().map(|(n, _)| format!("${{{n}}}")).collect();
            p.at(at, format!("unknown variable ${{{name}}} in {text:?}: known are {}", known.join(", ")));
            return None;
        };
        parts.push(Part::Var(*var));
        rest = after.get(end + 1..).unwrap_or_default();
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_owned()));
    }
    Some(Template(parts))
}

/// `rewrite = { prefix }` (the route's `match.path_prefix` replaced) or `{ path }`; only on
/// routes that proxy.
pub(super) fn rewrite(
    raw: &RawRewrite,
    matched: Option<&PathMatch>,
    proxies: bool,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> Option<Rewrite> {
    if !proxies {
        p.at(path, "`rewrite` only applies to routes with a `cluster` or `split`");
        return None;
    }
    let valid =
        |text: &str| text.starts_with('/') && text.bytes().all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#');
    let message = |key: &str, text: &str| {
        format!(
            "{key} {text:?} must start with '/' and hold only visible ASCII without '?' or '#' (percent-encode others)"
        )
    };
    match (&raw.prefix, &raw.path) {
        (Some(prefix), None) => {
            if !valid(prefix) {
                p.at(&path.key("prefix"), message("prefix", prefix));
                return None;
            }
            if !matches!(matched, Some(PathMatch::Prefix(_))) {
                p.at(&path.key("prefix"), "rewrite.prefix replaces the route's match.path_prefix: the route needs one");
                return None;
            }
            Some(Rewrite::Prefix(prefix.clone()))
        }
        (None, Some(full)) => {
            if !valid(full) {
                p.at(&path.key("path"), message("path", full));
                return None;
            }
            Some(Rewrite::Path(full.clone()))
        }
        _ => {
            p.at(path, "set exactly one of rewrite.prefix and rewrite.path");
            None
        }
    }
}
