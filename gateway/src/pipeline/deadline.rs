//! Incoming deadlines: `grpc-timeout` (gRPC over HTTP/2, always honoured) and the configured
//! `server.deadline_header` (milliseconds the client will still wait). A deadline can only
//! shorten the route timeout; an expired one is answered 504 at once, without upstream work;
//! each try sends upstream what remains, in the same header(s).

use std::time::Duration;

use crate::codec::response::push_num;

/// The request header gRPC clients send (RFC-like grammar from the gRPC HTTP/2 protocol spec:
/// 1 to 8 digits followed by one of `H M S m u n`).
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The largest value `grpc-timeout` can carry in milliseconds (8 digits).
const GRPC_MAX_MS: u128 = 99_999_999;

/// What a request said about its deadline.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Incoming {
    /// The shortest remaining time given by a valid `grpc-timeout` or deadline header.
    pub remaining: Option<Duration>,
    /// A `grpc-timeout` was present (it is then sent upstream, shrunk).
    pub grpc: bool,
}

impl Incoming {
    /// Takes one request field into account (`deadline_header`: the configured header name).
    pub fn observe(&mut self, name: &[u8], value: &[u8], deadline_header: Option<&str>) {
        let parsed = if name.eq_ignore_ascii_case(GRPC_TIMEOUT.as_bytes()) {
            self.grpc = true;
            parse_grpc_timeout(value)
        } else if deadline_header.is_some_and(|h| name.eq_ignore_ascii_case(h.as_bytes())) {
            parse_millis(value)
        } else {
            return;
        };
        if let Some(d) = parsed {
            self.remaining = Some(self.remaining.map_or(d, |r| r.min(d)));
        }
    }

    /// Whether `name` is a deadline field the gateway rewrites (never forwarded as received).
    pub fn is_deadline_field(name: &[u8], deadline_header: Option<&str>) -> bool {
        gateway_h1::eq_lower(name, GRPC_TIMEOUT.as_bytes())
            || deadline_header.is_some_and(|h| name.eq_ignore_ascii_case(h.as_bytes()))
    }
}

/// `grpc-timeout`: 1 to 8 ASCII digits and a unit; anything else is ignored (as gRPC servers do).
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let value = value.trim_ascii();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n.checked_mul(3600)?),
        b'M' => Duration::from_secs(n.checked_mul(60)?),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The deadline header: a non-negative integer of milliseconds (at most 10 digits).
pub fn parse_millis(value: &[u8]) -> Option<Duration> {
    let value = value.trim_ascii();
    if value.is_empty() || value.len() > 10 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok().map(Duration::from_millis)
}

/// Appends the deadline lines for a try with `remaining` time: `grpc-timeout` when the client
/// sent one, and the configured header.
pub fn push_h1_lines(out: &mut Vec<u8>, grpc: bool, deadline_header: Option<&str>, remaining: Duration) {
    let ms = remaining.as_millis();
    if grpc {
        out.extend_from_slice(b"grpc-timeout: ");
        push_num(out, u64::try_from(ms.min(GRPC_MAX_MS)).unwrap_or(0));
        out.extend_from_slice(b"m\r\n");
    }
    if let Some(name) = deadline_header {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        push_num(out, u64::try_from(ms).unwrap_or(u64::MAX));
        out.extend_from_slice(b"\r\n");
    }
}

/// Sets the deadline fields of an HTTP/2 request for a try with `remaining` time (removing
/// whatever the client sent in them).
pub fn set_h2(headers: &mut http::HeaderMap, grpc: bool, deadline_header: Option<&str>, remaining: Duration) {
    let ms = remaining.as_millis();
    headers.remove(GRPC_TIMEOUT);
    if grpc {
        let value = format!("{}m", ms.min(GRPC_MAX_MS));
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            headers.insert(GRPC_TIMEOUT, v);
        }
    }
    if let Some(name) = deadline_header.and_then(|n| http::HeaderName::from_bytes(n.as_bytes()).ok()) {
        headers.remove(&name);
        headers.insert(name, http::HeaderValue::from(u64::try_from(ms).unwrap_or(u64::MAX)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_grammar() {
        assert_eq!(parse_grpc_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout(b"5u"), Some(Duration::from_micros(5)));
        assert_eq!(parse_grpc_timeout(b"99999999n"), Some(Duration::from_nanos(99_999_999)));
        assert_eq!(parse_grpc_timeout(b"0m"), Some(Duration::ZERO));
        for bad in [&b""[..], b"m", b"100", b"123456789m", b"10x", b"-1m", b"1.5S", b"10 m"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn millis_and_observe_take_the_shortest() {
        assert_eq!(parse_millis(b" 250 "), Some(Duration::from_millis(250)));
        assert_eq!(parse_millis(b"-5"), None);
        assert_eq!(parse_millis(b"12345678901"), None);
        let mut d = Incoming::default();
        d.observe(b"x-deadline-ms", b"900", Some("x-deadline-ms"));
        d.observe(b"Grpc-Timeout", b"300m", Some("x-deadline-ms"));
        d.observe(b"x-other", b"1", Some("x-deadline-ms"));
        assert_eq!(d, Incoming { remaining: Some(Duration::from_millis(300)), grpc: true });
        let mut none = Incoming::default();
        none.observe(b"x-deadline-ms", b"soon", None);
        none.observe(b"grpc-timeout", b"junk", None);
        assert_eq!(none, Incoming { remaining: None, grpc: true });
    }

    #[test]
    fn lines_and_h2_fields() {
        let mut out = Vec::new();
        push_h1_lines(&mut out, true, Some("x-deadline-ms"), Duration::from_millis(1234));
        assert_eq!(out, b"grpc-timeout: 1234m\r\nx-deadline-ms: 1234\r\n");
        let mut h = http::HeaderMap::new();
        h.insert("grpc-timeout", http::HeaderValue::from_static("10S"));
        h.insert("x-deadline-ms", http::HeaderValue::from_static("10000"));
        set_h2(&mut h, true, Some("x-deadline-ms"), Duration::from_millis(450));
        assert_eq!(h.get("grpc-timeout").map(|v| v.as_bytes()), Some(&b"450m"[..]));
        assert_eq!(h.get("x-deadline-ms").map(|v| v.as_bytes()), Some(&b"450"[..]));
        set_h2(&mut h, false, None, Duration::from_millis(1));
        assert!(h.get("grpc-timeout").is_none());
    }
}
