//! `[[routes]]`: matches and the three actions.

use std::time::Duration;

use super::{assert_one, errors, valid, LISTENER};
use crate::model::{Action, HeaderMatch, HostMatch, IdentityMatch, PathMatch, RouteMatch};

/// Listener on lines 1-3, cluster "api" on lines 4-6, then `route` from line 7 on.
pub(super) fn with_route(route: &str) -> String {
    format!(
        "{LISTENER}[[clusters]]\nname = \"api\"\nendpoints = [\"127.0.0.1:9000\"]\n[[routes]]\nname = \"r\"\n{route}"
    )
}

#[test]
fn full_match() {
    let text = with_route(
        "match = { host = \"API.example.com\", path_prefix = \"/v1\", methods = [\"GET\", \"PURGE\"], \
         headers = [{ name = \"X-Canary\", value = \"1\" }, { name = \"x-present\" }] }\ncluster = \"api\"\n",
    );
    let route = valid(&text).routes.remove(0);
    assert_eq!(
        route.matcher,
        RouteMatch {
            host: Some(HostMatch::Exact("api.example.com".to_owned())),
            path: Some(PathMatch::Prefix("/v1".to_owned())),
            methods: vec!["GET".to_owned(), "PURGE".to_owned()],
            headers: vec![
                HeaderMatch { name: "x-canary".to_owned(), value: Some("1".to_owned()) },
                HeaderMatch { name: "x-present".to_owned(), value: None },
            ],
            client_identity: None,
        }
    );
    let Action::Proxy(proxy) = route.action else { panic!("{:?}", route.action) };
    assert_eq!((proxy.cluster, proxy.timeout), (0, Duration::from_secs(15)));
}

#[test]
fn defaults_and_variants() {
    let text = with_route("cluster = \"api\"\ntimeout = \"2s\"\n");
    let route = valid(&text).routes.remove(0);
    assert_eq!(route.matcher, RouteMatch::default());
    assert!(matches!(route.action, Action::Proxy(p) if p.timeout == Duration::from_secs(2)));
    let text = with_route("match = { host = \"*.Example.com\", path = \"/\" }\ncluster = \"api\"\n");
    let matcher = valid(&text).routes.remove(0).matcher;
    assert_eq!(matcher.host, Some(HostMatch::Suffix(".example.com".to_owned())));
    assert_eq!(matcher.path, Some(PathMatch::Exact("/".to_owned())));
    // Dotted keys and a [routes.match] sub-table are the same match.
    let text = with_route("cluster = \"api\"\n[routes.match]\npath = \"/x\"\n");
    assert_eq!(valid(&text).routes[0].matcher.path, Some(PathMatch::Exact("/x".to_owned())));
}

#[test]
fn unknown_cluster_lists_known_ones() {
    let text = format!(
        "{}[[clusters]]\nname = \"web\"\nendpoints = [\"127.0.0.1:9001\"]\n",
        with_route("cluster = \"apii\"\n")
    );
    assert_one(&text, "routes[0].cluster", Some(9), "unknown cluster \"apii\" (known: api, web)");
    let text = format!("{LISTENER}[[routes]]\nname = \"r\"\ncluster = \"api\"\n");
    assert_one(&text, "routes[0].cluster", Some(6), "unknown cluster \"api\" (no clusters are defined)");
}

#[test]
fn cluster_resolves_to_its_index() {
    let text = format!(
        "{}[[clusters]]\nname = \"web\"\nendpoints = [\"127.0.0.1:9001\"]\n",
        with_route("cluster = \"web\"\n")
    );
    assert!(matches!(valid(&text).routes[0].action, Action::Proxy(ref p) if p.cluster == 1));
}

#[test]
fn exactly_one_action() {
    assert_one(&with_route(""), "routes[0]", Some(7), "route has no action");
    let text = with_route("cluster = \"api\"\nredirect = { scheme = \"https\" }\n");
    assert_one(&text, "routes[0].redirect", Some(10), "sets both `cluster` and `redirect`");
    let text = with_route("direct_response = {}\ntimeout = \"1s\"\n");
    assert_one(&text, "routes[0].timeout", Some(10), "`timeout` only applies to routes with a `cluster`");
    let text = with_route("cluster = \"api\"\ntimeout = 5\n");
    assert_one(&text, "routes[0].timeout", Some(10), "needs a unit");
}

#[test]
fn bad_matches() {
    let cases = [
        ("host = \"a.*.example.com\"", "match.host", "leading label"),
        ("host = \"example.com:443\"", "match.host", "without a port"),
        ("host = \"exa_mple.com\"", "match.host", "labels of letters"),
        ("path = \"v1\"", "match.path", "must start with '/'"),
        ("path_prefix = \"/a b\"", "match.path_prefix", "contains ' '"),
        ("path = \"/a?b=1\"", "match.path", "contains '?'"),
        ("path = \"/a\", path_prefix = \"/b\"", "match.path_prefix", "at most one of `path` (exact) and `path_prefix`"),
        ("methods = [\"GET\", \"get\"]", "match.methods[1]", "methods are case-sensitive: write \"GET\", not \"get\""),
        ("methods = [\"G(T\"]", "match.methods[0]", "invalid method \"G(T\""),
        ("headers = [{ name = \"x y\" }]", "match.headers[0].name", "invalid header name \"x y\""),
        ("headers = [{ name = \"x\", value = \"a\\nb\" }]", "match.headers[0].value", "control characters"),
        ("headers = [{ value = \"1\" }]", "match.headers[0]", "missing field `name`"),
        ("hots = \"a\"", "match.hots", "unknown field `hots`"),
        ("methods = \"GET\"", "match.methods", "invalid type: string \"GET\", expected a sequence"),
    ];
    for (inner, key, needle) in cases {
        let text = with_route(&format!("cluster = \"api\"\nmatch = {{ {inner} }}\n"));
        assert_one(&text, &format!("routes[0].{key}"), Some(10), needle);
    }
    // Lower-case custom methods are tokens like any other.
    valid(&with_route("cluster = \"api\"\nmatch = { methods = [\"purge\"] }\n"));
}

#[test]
fn direct_response() {
    let text = with_route("direct_response = { status = 503, body = \"down\\n\", headers = { \"content-type\" = \"text/plain\", \"retry-after\" = \"5\", \"cache-control\" = \"no-store\" } }\n");
    let Action::Direct(d) = valid(&text).routes.remove(0).action else { panic!() };
    assert_eq!((d.status, d.body.as_str()), (503, "down\n"));
    let names: Vec<&str> = d.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["content-type", "retry-after", "cache-control"]);
    let Action::Direct(d) = valid(&with_route("direct_response = {}\n")).routes.remove(0).action else { panic!() };
    assert_eq!((d.status, d.body.as_str(), d.headers.len()), (200, "", 0));
}

#[test]
fn bad_direct_responses() {
    let cases = [
        ("status = 199", "status", "between 200 and 599, got 199"),
        ("status = 600", "status", "between 200 and 599, got 600"),
        ("status = 204, body = \"x\"", "body", "a 204 response has no body"),
        ("headers = { \"Content-Length\" = \"3\" }", "headers.Content-Length", "set by the gateway"),
        ("headers = { \"transfer-encoding\" = \"chunked\" }", "headers.transfer-encoding", "set by the gateway"),
        ("headers = { \"connection\" = \"close\" }", "headers.connection", "set by the gateway"),
        ("headers = { \"a b\" = \"x\" }", "headers.\"a b\"", "invalid header name"),
        ("headers = { \"x\" = \"a\\r\\nb: c\" }", "headers.x", "control characters"),
        ("headers = { \"x\" = 1 }", "headers.x", "expected a string"),
        ("code = 200", "code", "unknown field `code`"),
    ];
    for (inner, key, needle) in cases {
        let text = with_route(&format!("direct_response = {{ {inner} }}\n"));
        assert_one(&text, &format!("routes[0].direct_response.{key}"), Some(9), needle);
    }
}

#[test]
fn redirect() {
    let text = with_route("redirect = { status = 308, scheme = \"https\", host = \"New.example.com\", port = 443, path = \"/x\", keep_query = true }\n");
    let Action::Redirect(r) = valid(&text).routes.remove(0).action else { panic!() };
    assert_eq!((r.status, r.scheme.as_deref(), r.host.as_deref()), (308, Some("https"), Some("new.example.com")));
    assert_eq!((r.port, r.path.as_deref(), r.keep_query), (Some(443), Some("/x"), true));
    let Action::Redirect(r) = valid(&with_route("redirect = { scheme = \"https\" }\n")).routes.remove(0).action else {
        panic!()
    };
    assert_eq!((r.status, r.host, r.port, r.path, r.keep_query), (301, None, None, None, false));
}

#[test]
fn bad_redirects() {
    let cases = [
        ("status = 200, scheme = \"https\"", "status", "301, 302, 303, 307 or 308, got 200"),
        ("status = 99999, scheme = \"https\"", "status", "between 0 and 65535"),
        ("scheme = \"ftp\"", "scheme", "\"http\" or \"https\", got \"ftp\""),
        ("port = 0", "port", "between 1 and 65535, got 0"),
        ("port = 65536", "port", "between 1 and 65535"),
        ("host = \"a b\"", "host", "invalid host"),
        ("path = \"x\"", "path", "must start with '/'"),
        ("keep_query = true", "", "redirect changes nothing"),
        ("keep_query = \"yes\"", "keep_query", "expected a boolean"),
    ];
    for (inner, key, needle) in cases {
        let path = if key.is_empty() { "routes[0].redirect".to_owned() } else { format!("routes[0].redirect.{key}") };
        let text = with_route(&format!("redirect = {{ {inner} }}\n"));
        assert_one(&text, &path, Some(9), needle);
    }
}

#[test]
fn route_names() {
    let text = format!("{}[[routes]]\nname = \"r\"\ncluster = \"api\"\n", with_route("cluster = \"api\"\n"));
    assert_one(&text, "routes[1].name", Some(11), "duplicate name \"r\" (already used by routes[0])");
    let text = format!("{LISTENER}[[routes]]\nname = \"\"\ndirect_response = {{}}\n");
    assert_one(&text, "routes[0].name", Some(5), "invalid name \"\"");
    let text = format!("{LISTENER}[[routes]]\nname = \"{}\"\ndirect_response = {{}}\n", "x".repeat(65));
    assert_one(&text, "routes[0].name", Some(5), "1 to 64");
}

#[test]
fn broken_route_does_not_hide_others() {
    let text = format!(
        "{}[[routes]]\nname = \"s\"\nclustr = \"api\"\n[[routes]]\nname = \"t\"\n",
        with_route("cluster = \"nope\"\n")
    );
    let errors = errors(&text);
    let found: Vec<(&str, Option<usize>)> = errors.iter().map(|(p, l, _)| (p.as_str(), *l)).collect();
    assert_eq!(
        found,
        [("routes[0].cluster", Some(9)), ("routes[1].clustr", Some(12)), ("routes[2]", Some(13))],
        "{errors:#?}"
    );
}

#[test]
fn client_identity_matches_exactly_or_by_prefix() {
    let route = |m: &str| {
        format!("[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:1\"\n[[routes]]\nname = \"r\"\nmatch = {{ client_identity = \"{m}\" }}\ndirect_response = {{ status = 200 }}\n")
    };
    let exact = valid(&route("spiffe://a/b")).routes.remove(0);
    assert_eq!(exact.matcher.client_identity, Some(IdentityMatch::Exact("spiffe://a/b".into())));
    let prefix = valid(&route("spiffe://a/*")).routes.remove(0);
    assert_eq!(prefix.matcher.client_identity, Some(IdentityMatch::Prefix("spiffe://a/".into())));
    for bad in ["*", "", "spiffe://*/b"] {
        let err = crate::parse(&route(bad), "t.toml").expect_err(bad).to_string();
        assert!(err.contains("routes[0].match.client_identity"), "{bad}: {err}");
    }
}
