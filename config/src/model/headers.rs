//! Response fields the gateway sets itself: `Strict-Transport-Security` per route.

use std::time::Duration;

/// `routes[].hsts`: the gateway sets `strict-transport-security` on every response of the
/// route sent over TLS (never over plain HTTP, RFC 6797 §7.2), replacing the upstream's.
///
/// As loaded: `max_age` is at least 1s; with `preload`, it is at least one year and
/// `include_subdomains` is set (the hstspreload.org submission rules).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hsts {
    /// Whole seconds.
    #[serde(serialize_with = "seconds")]
    pub max_age: Duration,
    pub include_subdomains: bool,
    pub preload: bool,
    /// The field value, e.g. `max-age=31536000; includeSubDomains`.
    pub value: String,
}

impl Hsts {
    pub fn new(max_age: Duration, include_subdomains: bool, preload: bool) -> Self {
        let mut value = format!("max-age={}", max_age.as_secs());
        if include_subdomains {
            value.push_str("; includeSubDomains");
        }
        if preload {
            value.push_str("; preload");
        }
        Self { max_age, include_subdomains, preload, value }
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}s", d.as_secs()))
}
