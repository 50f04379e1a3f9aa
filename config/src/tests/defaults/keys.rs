//! Every key `full.toml` sets, so that a key documented without a default is noticed: each
//! must state its default, or be listed in [`NOT_STATED`] with the reason.

use toml_edit::{Item, Table, Value};

/// Keys whose comment states no default in the grammar of `super::extract`, and why: required,
/// a condition or part that is simply absent, a table whose keys state their own, or a default
/// the comment gives in other words.
pub const NOT_STATED: &[(&str, &str)] = &[
    ("server", "a table: its keys state their defaults"),
    ("server.admin.address", "a member of the admin table, whose default is stated as a whole"),
    ("server.admin.token", "no token unless set; required with a non-loopback address"),
    ("server.group", "only with `user`: the user's primary group unless set"),
    ("server.access_log.format", "required in [server.access_log]"),
    ("server.access_log.path", "required in [server.access_log]"),
    ("server.limits", "a table: its keys state their defaults"),
    ("server.timeouts", "a table: its keys state their defaults"),
    ("server.http2", "a table: its keys state their defaults"),
    ("overload", "a table: its keys state their defaults"),
    ("listeners", "at least one listener is required"),
    ("listeners[].name", "required"),
    ("routes[].request_headers.set", "part of an edit; the edits state their default (none) as a whole"),
    ("routes[].request_headers.set.x-client-ip", "an example edit"),
    ("routes[].request_headers.add", "part of an edit; the edits state their default (none) as a whole"),
    ("routes[].request_headers.add.x-gateway-route", "an example edit"),
    ("routes[].request_headers.remove", "part of an edit; the edits state their default (none) as a whole"),
    (
        "routes[].response_headers",
        "documented with request_headers, whose comment states the default (no edits) for both",
    ),
    ("routes[].response_headers.set", "part of an edit; the edits state their default (none) as a whole"),
    ("routes[].response_headers.set.x-frame-options", "an example edit"),
    ("routes[].response_headers.remove", "part of an edit; the edits state their default (none) as a whole"),
    ("routes[].rewrite.prefix", "one of the two forms of rewrite, whose default (none) is stated as a whole"),
    ("listeners[].address", "required"),
    ("listeners[].tls", "plain TCP when absent (its comment: present means TLS)"),
    ("listeners[].tls.certificates", "required in tls"),
    ("listeners[].tls.certificates[].cert", "required"),
    ("listeners[].tls.certificates[].key", "required"),
    ("listeners[].tls.certificates[].names", "the certificate's DNS names when absent (its comment says so)"),
    ("listeners[].tls.client_auth.ca", "required in client_auth"),
    ("routes", "no routes: every request is answered 404"),
    ("routes[].name", "required"),
    ("routes[].match", "matches every request when absent (its comment says so)"),
    ("routes[].match.host", "a condition: absent means any"),
    ("routes[].match.path", "a condition: absent means any"),
    ("routes[].match.path_prefix", "a condition: absent means any"),
    ("routes[].match.methods", "a condition: absent means any"),
    ("routes[].match.headers", "a condition: absent means any"),
    ("routes[].match.headers[].name", "required in a header condition"),
    ("routes[].match.headers[].value", "absent: the field need only be present"),
    ("routes[].match.client_identity", "a condition: absent means any"),
    ("routes[].cluster", "one action is required"),
    ("routes[].split", "one action is required"),
    ("routes[].split[].cluster", "required"),
    ("routes[].split[].weight", "required"),
    ("routes[].redirect", "one action is required"),
    ("routes[].redirect.scheme", "absent: the request's own (its comment says so)"),
    ("routes[].redirect.host", "absent: the request's own"),
    ("routes[].redirect.port", "absent: the request's own"),
    ("routes[].redirect.path", "absent: the request's own"),
    ("routes[].direct_response", "one action is required"),
    ("routes[].direct_response.headers", "absent: no extra fields"),
    ("routes[].rate_limit", "no rate limit when absent"),
    ("routes[].rate_limit.rate", "required in rate_limit"),
    ("routes[].retry", "a table: its keys state their defaults"),
    ("routes[].retry.retriable_status_codes", "only with retry_on \"retriable-status-codes\""),
    ("routes[].retry.backoff.base", "stated with backoff as a whole"),
    ("routes[].retry.backoff.max", "stated with backoff as a whole"),
    ("routes[].hsts", "no HSTS when absent"),
    ("routes[].hsts.max_age", "required in hsts"),
    ("routes[].sticky.cookie", "one of header or cookie is required in sticky"),
    ("routes[].pin", "no pins when absent"),
    ("routes[].pin[].header", "required"),
    ("routes[].pin[].value", "absent: the header need only be present"),
    ("routes[].pin[].cluster", "required"),
    ("routes[].mirror", "no mirroring when absent"),
    ("routes[].mirror.cluster", "required in mirror"),
    ("clusters", "clusters are needed only by proxying routes"),
    ("clusters[].name", "required"),
    ("clusters[].endpoints", "required"),
    ("clusters[].endpoints[].address", "required"),
    ("clusters[].endpoints[].weight", "1, stated as `\"host:port\" (weight 1)`"),
    ("clusters[].pool", "a table: its keys state their defaults"),
    ("clusters[].caps", "a table: its keys state their defaults"),
    ("clusters[].retry_budget", "a table: its keys state their defaults"),
    ("clusters[].adaptive_concurrency", "a table: its keys state their defaults"),
    ("clusters[].health_check", "off without this table (its comment says so)"),
    ("clusters[].health_check.path", "required in health_check"),
    ("clusters[].hash_key", "required with maglev, refused otherwise"),
    ("clusters[].tls.ca", "required in tls"),
];

/// Every key path set in the document: `routes[].retry.num_retries`, `clusters[].endpoints[].weight`.
pub fn set_keys(doc: &Table) -> Vec<String> {
    let mut out = Vec::new();
    table(doc, "", &mut out);
    out.sort();
    out.dedup();
    out
}

fn table(t: &Table, at: &str, out: &mut Vec<String>) {
    for (key, item) in t.iter() {
        let path = if at.is_empty() { key.to_owned() } else { format!("{at}.{key}") };
        out.push(path.clone());
        match item {
            Item::Table(inner) => table(inner, &path, out),
            Item::ArrayOfTables(array) => {
                for inner in array.iter() {
                    table(inner, &format!("{path}[]"), out);
                }
            }
            Item::Value(v) => value(v, &path, out),
            Item::None => {}
        }
    }
}

/// Tables whose keys are names the operator chooses, not config keys.
const OPAQUE: &[&str] = &["routes[].direct_response.headers"];

fn value(v: &Value, path: &str, out: &mut Vec<String>) {
    if OPAQUE.contains(&path) {
        return;
    }
    match v {
        Value::InlineTable(t) => {
            for (key, inner) in t.iter() {
                let inner_path = format!("{path}.{key}");
                out.push(inner_path.clone());
                value(inner, &inner_path, out);
            }
        }
        Value::Array(items) => {
            for item in items.iter() {
                if let Value::InlineTable(_) = item {
                    value(item, &format!("{path}[]"), out);
                }
            }
        }
        _ => {}
    }
}
