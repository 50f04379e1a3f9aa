//! `RouteTable::find` over a fixed table with fuzzer-provided method, authority, path, header
//! and identity bytes: never panics, always finds a route (the last one matches everything),
//! and only a route whose conditions hold.

use std::sync::LazyLock;

use gateway::route::{RequestFacts, RouteTable};
use gateway_config::Config;

const CONFIG: &str = r#"
[[listeners]]
name = "l"
address = "127.0.0.1:8080"

[[clusters]]
name = "c"
endpoints = ["127.0.0.1:9000"]

[[routes]]
name = "api"
match = { host = "api.example.com", path_prefix = "/v1", methods = ["GET", "POST"], headers = [{ name = "x-canary", value = "1" }, { name = "x-request-id" }] }
cluster = "c"

[[routes]]
name = "wild"
match = { host = "*.example.com", path = "/exact" }
cluster = "c"

[[routes]]
name = "mtls"
match = { client_identity = "spiffe://example.org/ns/prod/*" }
cluster = "c"

[[routes]]
name = "health"
match = { path = "/healthz", methods = ["GET", "HEAD"] }
direct_response = { status = 200, body = "ok\n" }

[[routes]]
name = "moved"
match = { host = "old.example.com" }
redirect = { status = 308, scheme = "https", host = "new.example.com" }

[[routes]]
name = "rest"
cluster = "c"
"#;

static TABLE: LazyLock<(Config, RouteTable)> = LazyLock::new(|| {
    let config = gateway_config::parse(CONFIG, "route.toml").unwrap_or_else(|e| panic!("{e}"));
    let table = RouteTable::new(&config);
    (config, table)
});

/// The check run on each input (by the fuzz target and by `gateway/tests/fuzz_inputs.rs`).
pub fn check(data: &[u8]) {
    let (config, table) = &*TABLE;
    // Fields separated by 0xff (never valid in any of them): method, authority (absent if
    // empty), path, identity (absent if empty), then header name/value pairs.
    let mut parts = data.split(|&b| b == 0xff);
    let method = parts.next().unwrap_or_default();
    let authority = parts.next().filter(|a| !a.is_empty());
    let path = parts.next().unwrap_or_default();
    let identity = parts.next().and_then(|i| std::str::from_utf8(i).ok()).filter(|i| !i.is_empty());
    let fields: Vec<(&[u8], &[u8])> =
        std::iter::from_fn(|| Some((parts.next()?, parts.next().unwrap_or_default()))).collect();
    let headers = |name: &[u8], value: Option<&[u8]>| {
        fields.iter().any(|(n, v)| n.eq_ignore_ascii_case(name) && value.is_none_or(|want| want == *v))
    };
    let facts = RequestFacts { method, authority, path, headers, identity };
    let found = table.find(&facts).unwrap_or_else(|| panic!("the catch-all route did not match"));
    let route = &config.routes[found];
    assert_eq!(table.direct(found).is_some(), route.name == "health", "route {}", route.name);
    match route.name.as_str() {
        "api" => assert!(path.starts_with(b"/v1") && (method == b"GET" || method == b"POST")),
        "wild" => assert_eq!(path, b"/exact"),
        "mtls" => assert!(identity.is_some_and(|i| i.starts_with("spiffe://example.org/ns/prod/"))),
        "health" => assert_eq!(path, b"/healthz"),
        "moved" => assert!(authority.is_some()),
        _ => {}
    }
}
