//! `routes[].rate_limit`: a token bucket per route, per client address or per header value.

use std::time::Duration;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{RateLimit, RateLimitKey, RateLimitMode, RateLimitScope};
use crate::problems::Problems;
use crate::raw::RawRateLimit;

use super::fields::{choice, duration, int_in, is_token};

/// Converts a route's rate limit. `timeout` is the route's upstream timeout when it proxies:
/// a delayed request must not wait longer than the route would let it run.
pub(super) fn convert(
    raw: &RawRateLimit,
    timeout: Option<Duration>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> RateLimit {
    let rate = if raw.rate > 0.0 && raw.rate <= defaults::MAX_RATE {
        raw.rate
    } else {
        p.at(
            &path.key("rate"),
            format!(
                "rate must be greater than 0 and at most {} requests per second, got {}",
                defaults::MAX_RATE,
                raw.rate
            ),
        );
        1.0
    };
    let burst = int_in(p, &path.key("burst"), raw.burst, 1..=defaults::MAX_BURST, defaults::rate_limit_burst(rate));
    let key = match raw.key.as_deref().map(parse_key) {
        None => defaults::RATE_LIMIT_KEY,
        Some(Ok(key)) => key,
        Some(Err(message)) => {
            p.at(&path.key("key"), message);
            defaults::RATE_LIMIT_KEY
        }
    };
    let mode = mode(raw, timeout, p, path);
    let scope = choice(
        p,
        &path.key("scope"),
        raw.scope.as_ref(),
        &[("worker", RateLimitScope::Worker), ("process", RateLimitScope::Process)],
        defaults::RATE_LIMIT_SCOPE,
    );
    let max_keys = int_in(
        p,
        &path.key("max_keys"),
        raw.max_keys,
        1..=defaults::MAX_RATE_LIMIT_KEYS,
        defaults::RATE_LIMIT_MAX_KEYS,
    );
    if scope == RateLimitScope::Process && key != RateLimitKey::Route {
        // One shared atomic bucket per route; per-key buckets would need a shared map.
        p.at(
            &path.key("scope"),
            "scope = \"process\" shares one bucket for the whole route: use it with key = \"route\", or scope = \"worker\" for per-client keys",
        );
    }
    RateLimit { rate, burst, key, mode, scope, max_keys }
}

/// `"route"`, `"client_ip"` or `"header:<name>"` (the name is stored in lower case).
pub(super) fn parse_key(text: &str) -> Result<RateLimitKey, String> {
    match text {
        "route" => Ok(RateLimitKey::Route),
        "client_ip" => Ok(RateLimitKey::ClientIp),
        _ => match text.strip_prefix("header:") {
            Some(name) if is_token(name) => Ok(RateLimitKey::Header(name.to_ascii_lowercase())),
            Some(name) => Err(format!("invalid header name {name:?} in rate limit key {text:?}")),
            None => Err(format!(
                "unknown rate limit key {text:?} (expected \"route\", \"client_ip\" or \"header:<name>\", e.g. \"header:x-api-key\")"
            )),
        },
    }
}

fn mode(raw: &RawRateLimit, timeout: Option<Duration>, p: &mut Problems<'_>, path: &KeyPath) -> RateLimitMode {
    match raw.mode.as_deref() {
        Some("delay") => {}
        None | Some("reject") => {
            if raw.max_delay.is_some() {
                p.at(&path.key("max_delay"), "max_delay only applies with mode = \"delay\"");
            }
            return RateLimitMode::Reject;
        }
        Some(other) => {
            p.at(&path.key("mode"), format!("unknown value {other:?} (expected one of \"reject\", \"delay\")"));
            return RateLimitMode::Reject;
        }
    }
    let max_delay = duration(p, &path.key("max_delay"), raw.max_delay.as_ref(), defaults::RATE_LIMIT_MAX_DELAY);
    if let Some(timeout) = timeout.filter(|t| max_delay > *t) {
        let default = if raw.max_delay.is_none() { " (the default)" } else { "" };
        p.at(
            &path.key("max_delay"),
            format!(
                "max_delay {max_delay:?}{default} must not exceed the route timeout ({timeout:?}): the request would time out while it waits"
            ),
        );
    }
    RateLimitMode::Delay { max_delay }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(parse_key("route"), Ok(RateLimitKey::Route));
        assert_eq!(parse_key("client_ip"), Ok(RateLimitKey::ClientIp));
        assert_eq!(parse_key("header:x-api-key"), Ok(RateLimitKey::Header("x-api-key".to_owned())));
        assert_eq!(parse_key("header:X-Tenant"), Ok(RateLimitKey::Header("x-tenant".to_owned())));
        assert_eq!(
            parse_key("header:header:x"),
            Err("invalid header name \"header:x\" in rate limit key \"header:header:x\"".to_owned())
        );
    }

    #[test]
    fn bad_keys() {
        for (bad, hint) in [
            ("", "unknown rate limit key \"\""),
            ("Route", "unknown rate limit key"),
            ("client-ip", "unknown rate limit key"),
            ("ip", "expected \"route\", \"client_ip\" or \"header:<name>\""),
            ("header", "unknown rate limit key"),
            ("Header:x", "unknown rate limit key"),
            ("header: x", "invalid header name \" x\""),
            ("header:", "invalid header name \"\""),
            ("header:a b", "invalid header name \"a b\""),
            ("header:x\n", "invalid header name"),
            ("header:é", "invalid header name"),
        ] {
            let err = parse_key(bad).unwrap_err();
            assert!(err.contains(hint), "{bad:?}: {err}");
        }
    }
}
