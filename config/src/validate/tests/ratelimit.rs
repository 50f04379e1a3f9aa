//! `routes[].rate_limit`.

use std::time::Duration;

use super::routes::with_route;
use super::{assert_one, valid};
use crate::model::{RateLimit, RateLimitKey, RateLimitMode, RateLimitScope};

/// A proxy route to "api" (`cluster` on line 9) with `rate_limit = { <inner> }` on line 10.
fn with_limit(inner: &str) -> String {
    with_route(&format!("cluster = \"api\"\nrate_limit = {{ {inner} }}\n"))
}

fn limit(text: &str) -> RateLimit {
    valid(text).routes.remove(0).rate_limit.expect("a rate limit")
}

#[test]
fn defaults() {
    assert_eq!(
        limit(&with_limit("rate = 100")),
        RateLimit {
            rate: 100.0,
            burst: 100,
            key: RateLimitKey::Route,
            mode: RateLimitMode::Reject,
            scope: RateLimitScope::Worker,
            max_keys: 10_000,
        }
    );
    // The default burst is one second's worth, rounded up, at least 1.
    for (rate, burst) in [("0.5", 1), ("0.001", 1), ("2.5", 3), ("1", 1), ("1e9", 1_000_000_000)] {
        assert_eq!(limit(&with_limit(&format!("rate = {rate}"))).burst, burst, "rate {rate}");
    }
    // A delayed limit waits 100ms by default.
    let delayed = limit(&with_limit("rate = 10, mode = \"delay\""));
    assert_eq!(delayed.mode, RateLimitMode::Delay { max_delay: Duration::from_millis(100) });
    assert!(valid(&with_route("cluster = \"api\"\n")).routes[0].rate_limit.is_none());
}

#[test]
fn every_key() {
    let text = with_limit(
        "rate = 2.5, burst = 20, key = \"client_ip\", mode = \"delay\", max_delay = \"250ms\", scope = \"worker\", \
         max_keys = 10000000",
    );
    assert_eq!(
        limit(&text),
        RateLimit {
            rate: 2.5,
            burst: 20,
            key: RateLimitKey::ClientIp,
            mode: RateLimitMode::Delay { max_delay: Duration::from_millis(250) },
            scope: RateLimitScope::Worker,
            max_keys: 10_000_000,
        }
    );
    let text = with_limit("rate = 5, key = \"header:X-Api-Key\", mode = \"reject\", scope = \"worker\", max_keys = 1");
    let l = limit(&text);
    assert_eq!(
        (l.key, l.mode, l.scope, l.max_keys),
        (RateLimitKey::Header("x-api-key".to_owned()), RateLimitMode::Reject, RateLimitScope::Worker, 1)
    );
    // As a sub-table, on a route that does not proxy (no timeout bounds the delay).
    let text =
        with_route("direct_response = {}\n[routes.rate_limit]\nrate = 1\nmode = \"delay\"\nmax_delay = \"1h\"\n");
    assert_eq!(limit(&text).mode, RateLimitMode::Delay { max_delay: Duration::from_secs(3600) });
    // max_delay may equal the route timeout.
    let text = with_route(
        "cluster = \"api\"\ntimeout = \"2s\"\nrate_limit = { rate = 1, mode = \"delay\", max_delay = \"2s\" }\n",
    );
    assert_eq!(limit(&text).mode, RateLimitMode::Delay { max_delay: Duration::from_secs(2) });
}

#[test]
fn bad_rate_limits() {
    let cases = [
        ("rate = 0", "rate", "rate must be greater than 0 and at most 1000000000 requests per second, got 0"),
        ("rate = -1", "rate", "got -1"),
        ("rate = 1000000001", "rate", "got 1000000001"),
        ("rate = 1e10", "rate", "got 10000000000"),
        ("rate = nan", "rate", "got NaN"),
        ("rate = inf", "rate", "got inf"),
        ("rate = \"100/s\"", "rate", "invalid type: string \"100/s\", expected f64"),
        ("burst = 5", "", "missing field `rate`"),
        ("rate = 1, burst = 0", "burst", "must be between 1 and 1000000, got 0"),
        ("rate = 1, burst = 1000001", "burst", "must be between 1 and 1000000, got 1000001"),
        ("rate = 1, burst = 2.5", "burst", "invalid type: floating point `2.5`, expected i64"),
        (
            "rate = 1, key = \"ip\"",
            "key",
            "unknown rate limit key \"ip\" (expected \"route\", \"client_ip\" or \"header:<name>\"",
        ),
        ("rate = 1, key = \"header:\"", "key", "invalid header name \"\" in rate limit key \"header:\""),
        ("rate = 1, key = \"header:x y\"", "key", "invalid header name \"x y\""),
        ("rate = 1, mode = \"queue\"", "mode", "unknown value \"queue\" (expected one of \"reject\", \"delay\")"),
        ("rate = 1, max_delay = \"50ms\"", "max_delay", "max_delay only applies with mode = \"delay\""),
        ("rate = 1, mode = \"reject\", max_delay = \"50ms\"", "max_delay", "only applies with mode = \"delay\""),
        ("rate = 1, mode = \"delay\", max_delay = \"0ms\"", "max_delay", "must be greater than zero"),
        ("rate = 1, mode = \"delay\", max_delay = 100", "max_delay", "a duration needs a unit"),
        (
            "rate = 1, mode = \"delay\", max_delay = \"20s\"",
            "max_delay",
            "max_delay 20s must not exceed the route timeout (15s): the request would time out while it waits",
        ),
        ("rate = 1, scope = \"global\"", "scope", "unknown value \"global\" (expected one of \"worker\", \"process\")"),
        ("rate = 1, max_keys = 0", "max_keys", "must be between 1 and 10000000, got 0"),
        ("rate = 1, max_keys = 10000001", "max_keys", "got 10000001"),
        ("rate = 1, limit = 5", "limit", "unknown field `limit`, expected one of `rate`, `burst`"),
    ];
    for (inner, key, needle) in cases {
        let path =
            if key.is_empty() { "routes[0].rate_limit".to_owned() } else { format!("routes[0].rate_limit.{key}") };
        assert_one(&with_limit(inner), &path, Some(10), needle);
    }
    let text = with_route("cluster = \"api\"\nrate_limit = 100\n");
    assert_one(&text, "routes[0].rate_limit", Some(10), "expected a rate_limit table");
}

#[test]
fn default_max_delay_must_fit_the_route_timeout() {
    let text = with_route("cluster = \"api\"\ntimeout = \"50ms\"\nrate_limit = { rate = 1, mode = \"delay\" }\n");
    assert_one(
        &text,
        "routes[0].rate_limit.max_delay",
        Some(11),
        "max_delay 100ms (the default) must not exceed the route timeout (50ms)",
    );
}

#[test]
fn process_scope_needs_the_route_key() {
    assert_one(
        &with_limit("rate = 5, key = \"client_ip\", scope = \"process\""),
        "routes[0].rate_limit.scope",
        Some(10),
        "use it with key = \"route\"",
    );
}
