//! `[overload]` and the routes' `priority` references to its classes.

use super::{assert_one, errors, valid, with_listener, LISTENER};
use std::time::Duration;

use crate::model::{Cidr, Overload};

/// Listener on lines 1-3, `[overload]` on line 4, `keys` from line 5 on.
fn with_overload(keys: &str) -> String {
    with_listener(&format!("[overload]\n{keys}"))
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn default_overload() -> Overload {
    Overload {
        enabled: true,
        classes: strings(&["critical", "high", "normal", "sheddable"]),
        default_class: 2,
        priority_header: None,
        trusted_sources: Vec::new(),
        trusted_identities: Vec::new(),
        queue_wait_factor: 0.9,
        first_class_reserve: true,
        queue_delay_target: Duration::from_millis(5),
        queue_delay_interval: Duration::from_millis(100),
    }
}

#[test]
fn defaults() {
    assert_eq!(valid(LISTENER).overload, default_overload());
    assert_eq!(valid(&with_overload("")).overload, default_overload());
}

#[test]
fn every_key() {
    let text = with_overload(
        "enabled = false\nclasses = [\"gold\", \"silver\", \"bronze\"]\ndefault_class = \"silver\"\n\
         priority_header = \"X-Gateway-Priority\"\n\
         trusted_sources = [\"127.0.0.1\", \"10.0.0.0/8\", \"::1/128\", \"2001:db8::\"]\nqueue_wait_factor = 2\nfirst_class_reserve = false\n\
         queue_delay_target = \"2ms\"\nqueue_delay_interval = \"50ms\"\n\
         trusted_identities = [\"spiffe://example.org/ns/ops/*\", \"batch.internal\"]\n",
    );
    let overload = valid(&text).overload;
    let cidr = |ip: &str, prefix_len| Cidr { network: ip.parse().unwrap(), prefix_len };
    assert_eq!(
        overload,
        Overload {
            enabled: false,
            classes: strings(&["gold", "silver", "bronze"]),
            default_class: 1,
            priority_header: Some("x-gateway-priority".to_owned()),
            trusted_sources: vec![
                cidr("127.0.0.1", 32),
                cidr("10.0.0.0", 8),
                cidr("::1", 128),
                cidr("2001:db8::", 128)
            ],
            trusted_identities: vec![
                crate::model::IdentityMatch::Prefix("spiffe://example.org/ns/ops/".to_owned()),
                crate::model::IdentityMatch::Exact("batch.internal".to_owned()),
            ],
            queue_wait_factor: 2.0,
            first_class_reserve: false,
            queue_delay_target: Duration::from_millis(2),
            queue_delay_interval: Duration::from_millis(50),
        }
    );
    for (factor, expected) in [("0.0", 0.0), ("10.0", 10.0), ("0.25", 0.25), ("0", 0.0)] {
        let text = with_overload(&format!("queue_wait_factor = {factor}\n"));
        assert_eq!(valid(&text).overload.queue_wait_factor, expected, "{factor}");
    }
    let text = with_overload("priority_header = \"x-prio\"\ntrusted_sources = []\n");
    assert!(valid(&text).overload.trusted_sources.is_empty());
}

#[test]
fn default_class_without_normal_is_the_last_class() {
    let classes = |list: &str| valid(&with_overload(&format!("classes = [{list}]\n"))).overload.default_class;
    assert_eq!(classes("\"a\", \"b\", \"c\""), 2);
    assert_eq!(classes("\"only\""), 0);
    assert_eq!(classes("\"normal\", \"low\""), 0);
    assert_eq!(classes("\"high\", \"normal\", \"low\""), 1);
    let text = with_overload("classes = [\"a\", \"b\", \"c\"]\ndefault_class = \"a\"\n");
    assert_eq!(valid(&text).overload.default_class, 0);
}

#[test]
fn bad_overload() {
    let nine = (1..=9).map(|i| format!("\"c{i}\"")).collect::<Vec<_>>().join(", ");
    let cases = [
        (
            "classes = []".to_owned(),
            "classes",
            "classes must list 1 to 8 priority classes, most important first; got 0",
        ),
        (
            format!("classes = [{nine}]"),
            "classes",
            "classes must list 1 to 8 priority classes, most important first; got 9",
        ),
        ("classes = [\"a\", \"b\", \"a\"]".to_owned(), "classes[2]", "duplicate class \"a\" (already classes[0])"),
        ("classes = [\"a b\"]".to_owned(), "classes[0]", "invalid name \"a b\""),
        ("classes = [\"\"]".to_owned(), "classes[0]", "invalid name \"\""),
        ("classes = \"critical\"".to_owned(), "classes", "invalid type: string \"critical\", expected a sequence"),
        ("classes = [1]".to_owned(), "classes[0]", "invalid type: integer `1`, expected a string"),
        (
            "default_class = \"urgent\"".to_owned(),
            "default_class",
            "unknown class \"urgent\" (known: critical, high, normal, sheddable)",
        ),
        ("priority_header = \"x priority\"".to_owned(), "priority_header", "invalid header name \"x priority\""),
        ("priority_header = \"\"".to_owned(), "priority_header", "invalid header name \"\""),
        ("priority_header = \"x-prio:\"".to_owned(), "priority_header", "invalid header name"),
        (
            "trusted_sources = [\"10.0.0.0/8\"]".to_owned(),
            "trusted_sources",
            "trusted_sources has no effect without priority_header",
        ),
        ("queue_wait_factor = -0.5".to_owned(), "queue_wait_factor", "between 0.0 and 10.0, got -0.5"),
        ("queue_wait_factor = 10.5".to_owned(), "queue_wait_factor", "between 0.0 and 10.0, got 10.5"),
        ("queue_wait_factor = 11".to_owned(), "queue_wait_factor", "between 0.0 and 10.0, got 11"),
        ("queue_wait_factor = nan".to_owned(), "queue_wait_factor", "between 0.0 and 10.0, got NaN"),
        ("queue_wait_factor = inf".to_owned(), "queue_wait_factor", "between 0.0 and 10.0, got inf"),
        ("queue_wait_factor = \"1\"".to_owned(), "queue_wait_factor", "invalid type: string \"1\", expected f64"),
        ("queue_delay_target = \"20s\"".to_owned(), "queue_delay_target", "between 1ms and 10s, got 20s"),
        ("queue_delay_target = 5".to_owned(), "queue_delay_target", "a duration needs a unit"),
        ("queue_delay_interval = \"2m\"".to_owned(), "queue_delay_interval", "between 1ms and 60s, got 120s"),
        (
            "queue_delay_target = \"200ms\"".to_owned(),
            "queue_delay_target",
            "must be shorter than queue_delay_interval (100ms)",
        ),
        ("enabled = \"yes\"".to_owned(), "enabled", "invalid type: string \"yes\", expected a boolean"),
        ("clases = []".to_owned(), "clases", "unknown field `clases`, expected one of `enabled`, `classes`"),
    ];
    for (line, key, needle) in cases {
        assert_one(&with_overload(&format!("{line}\n")), &format!("overload.{key}"), Some(5), needle);
    }
}

#[test]
fn priority_header_must_not_be_a_connection_or_framing_header() {
    for name in [
        "Connection",
        "content-length",
        "Transfer-Encoding",
        "host",
        "TE",
        "upgrade",
        "keep-alive",
        "trailer",
        "proxy-connection",
    ] {
        let text = with_overload(&format!("priority_header = \"{name}\"\n"));
        assert_one(
            &text,
            "overload.priority_header",
            Some(5),
            &format!("{name} is a connection or framing header and cannot carry a priority"),
        );
    }
}

#[test]
fn bad_trusted_sources() {
    let cases = [
        ("10.0.0.0/33", "the prefix length must be an integer from 0 to 32"),
        ("::/129", "the prefix length must be an integer from 0 to 128"),
        ("10.0.0.1/8", "host bits are set below /8: write \"10.0.0.0/8\""),
        ("localhost", "invalid network \"localhost\": expected an IP address or ip/prefix"),
        ("::ffff:10.0.0.0/104", "write it as IPv4 (e.g. \"10.0.0.0/8\")"),
    ];
    for (source, needle) in cases {
        let text = with_overload(&format!(
            "priority_header = \"x-prio\"\ntrusted_sources = [\n  \"127.0.0.1\",\n  \"{source}\",\n]\n"
        ));
        assert_one(&text, "overload.trusted_sources[1]", Some(8), needle);
    }
    let text = with_overload("priority_header = \"x-prio\"\ntrusted_sources = [\"10.0.0.0/8\", 8]\n");
    assert_one(&text, "overload.trusted_sources[1]", Some(6), "invalid type: integer `8`, expected a string");
}

#[test]
fn section_shape() {
    assert_one(&format!("overload = 1\n{LISTENER}"), "overload", Some(1), "expected an [overload] table");
    let text = with_listener("[[overload]]\nenabled = true\n");
    assert_one(&text, "overload", Some(4), "`overload` must be a single table: write [overload], not [[overload]]");
}

/// Listener on lines 1-3, `[overload]` on line 4 and `overload_keys` from line 5, then a
/// direct-response route (`[[routes]]`, `name`, `direct_response`) and its `route_keys`.
fn with_priority(overload_keys: &str, route_keys: &str) -> String {
    format!("{}[[routes]]\nname = \"r\"\ndirect_response = {{}}\n{route_keys}", with_overload(overload_keys))
}

#[test]
fn route_priority_default_and_reference() {
    let route = |overload: &str, route: &str| valid(&with_priority(overload, route)).routes.remove(0);
    assert_eq!(route("", "").priority, 2);
    assert_eq!(route("", "priority = \"critical\"\n").priority, 0);
    assert_eq!(route("", "priority = \"sheddable\"\n").priority, 3);
    assert_eq!(route("classes = [\"a\", \"b\"]\n", "").priority, 1);
    assert_eq!(route("classes = [\"a\", \"b\"]\ndefault_class = \"a\"\n", "").priority, 0);
    assert_eq!(route("classes = [\"a\", \"b\"]\n", "priority = \"a\"\n").priority, 0);
    // Without an [overload] section the default classes apply; priority is allowed on every
    // kind of route.
    let text = super::routes::with_route("cluster = \"api\"\npriority = \"high\"\n");
    assert_eq!(valid(&text).routes[0].priority, 1);
    let text = super::routes::with_route("redirect = { scheme = \"https\" }\npriority = \"critical\"\n");
    assert_eq!(valid(&text).routes[0].priority, 0);
}

#[test]
fn unknown_priority_lists_the_classes() {
    let text = with_priority("", "priority = \"urgent\"\n");
    assert_one(
        &text,
        "routes[0].priority",
        Some(8),
        "unknown class \"urgent\" (known: critical, high, normal, sheddable)",
    );
    let text = with_priority("classes = [\"gold\", \"silver\"]\n", "priority = \"normal\"\n");
    assert_one(&text, "routes[0].priority", Some(9), "unknown class \"normal\" (known: gold, silver)");
    // A duplicated class (reported on its own) is listed once.
    let text = with_priority("classes = [\"a\", \"b\", \"a\"]\n", "priority = \"c\"\n");
    let found: Vec<String> = errors(&text).into_iter().map(|(_, _, m)| m).collect();
    assert_eq!(found[1], "unknown class \"c\" (known: a, b)", "{found:#?}");
    let text = super::routes::with_route("direct_response = {}\npriority = \"Critical\"\n");
    assert_one(&text, "routes[0].priority", Some(10), "unknown class \"Critical\"");
    let text = super::routes::with_route("direct_response = {}\npriority = 1\n");
    assert_one(&text, "routes[0].priority", Some(10), "invalid type: integer `1`, expected a string");
}

#[test]
fn broken_overload_leaves_priorities_unchecked() {
    // [overload] fails to deserialize: the route's priority is not reported as unknown.
    let text = with_priority("clases = [\"gold\"]\n", "priority = \"gold\"\n");
    assert_one(&text, "overload.clases", Some(5), "unknown field `clases`");
    // No classes at all: only that is reported.
    let text = with_priority("classes = []\n", "priority = \"gold\"\n");
    assert_one(&text, "overload.classes", Some(5), "got 0");
    // Invalid but readable classes are still the names routes refer to.
    let text = with_priority("classes = [\"a b\", \"c\"]\n", "priority = \"a b\"\n");
    assert_one(&text, "overload.classes[0]", Some(5), "invalid name \"a b\"");
    // Problems in both places are both reported, in line order.
    let text = with_priority("default_class = \"x\"\n", "priority = \"y\"\n");
    let found: Vec<(String, Option<usize>)> = errors(&text).into_iter().map(|(p, l, _)| (p, l)).collect();
    assert_eq!(found, [("overload.default_class".to_owned(), Some(5)), ("routes[0].priority".to_owned(), Some(9))]);
}

#[test]
fn trusted_identities_need_the_header_and_valid_patterns() {
    let text = with_overload("trusted_identities = [\"spiffe://a/*\"]\n");
    let errors = super::errors(&text);
    assert!(
        errors
            .iter()
            .any(|(p, _, m)| p == "overload.trusted_identities" && m.contains("no effect without priority_header")),
        "{errors:?}"
    );
    let text = with_overload("priority_header = \"x-p\"\ntrusted_identities = [\"a*b\", \"\"]\n");
    let errors = super::errors(&text);
    assert!(
        errors.iter().any(|(p, _, m)| p == "overload.trusted_identities[0]" && m.contains("only at the end")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|(p, _, m)| p == "overload.trusted_identities[1]" && m.contains("invalid client identity")),
        "{errors:?}"
    );
}
