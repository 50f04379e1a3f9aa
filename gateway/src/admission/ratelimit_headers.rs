//! Rate-limit response header fields: `Retry-After` and the IETF draft RateLimit fields
//! (draft-ietf-httpapi-ratelimit-headers-08):
//!
//! ```text
//! Retry-After: 2
//! RateLimit-Policy: "api";q=10;w=1
//! RateLimit: "api";r=0;t=1
//! ```
//!
//! # Mapping a token bucket onto a quota window
//!
//! The draft speaks of a quota `q` per window of `w` seconds; a token bucket has a rate and a
//! burst. We advertise `q = burst` and `w = ceil(burst × T)` seconds (at least 1), where `T` is the
//! enforced emission interval: `w` is the time an empty bucket takes to refill completely, rounded
//! up. The promise this makes is exact and conservative: a client that sends at most `q` requests
//! in any `w`-second interval, in any pattern within it, is never limited (the bucket refills `q`
//! tokens within `w`). A client may get more than that, up to `burst + rate × w` per `w`, when it
//! paces its requests; the advertised quota is the guaranteed part, not the ceiling.
//!
//! `r` is the whole tokens left now and `t` the seconds until the bucket is full again, rounded
//! up, so that a client that waits `t` finds the full quota. All integers are capped at the
//! Structured Fields maximum (999,999,999,999,999).

use std::time::Duration;

use super::bucket::Rate;

/// Appends the fields of a 429 response: `Retry-After`, `RateLimit-Policy` and `RateLimit`, each
/// as `name: value\r\n`. `remaining` and `reset` describe the bucket now (`remaining` and
/// `reset_after` of the bucket); `retry_after` is the rejection's `retry_after`. `out` is the
/// only allocation.
pub fn write_429_headers(
    out: &mut Vec<u8>,
    policy_name: &str,
    rate: &Rate,
    remaining: u32,
    reset: Duration,
    retry_after: Duration,
) {
    out.extend_from_slice(b"Retry-After: ");
    push_integer(out, retry_after_secs(retry_after));
    out.extend_from_slice(b"\r\n");
    write_ratelimit_headers(out, policy_name, rate, remaining, reset);
}

/// Appends `RateLimit-Policy` and `RateLimit` for any response (an admitted one too).
pub fn write_ratelimit_headers(out: &mut Vec<u8>, policy_name: &str, rate: &Rate, remaining: u32, reset: Duration) {
    out.extend_from_slice(b"RateLimit-Policy: ");
    push_policy_name(out, policy_name);
    out.extend_from_slice(b";q=");
    push_integer(out, u64::from(rate.burst.max(1)));
    out.extend_from_slice(b";w=");
    push_integer(out, window_secs(rate));
    out.extend_from_slice(b"\r\nRateLimit: ");
    push_policy_name(out, policy_name);
    out.extend_from_slice(b";r=");
    push_integer(out, u64::from(remaining));
    out.extend_from_slice(b";t=");
    push_integer(out, ceil_secs(reset));
    out.extend_from_slice(b"\r\n");
}

/// `Retry-After` seconds for a wait of `d`: rounded up, never below 1 (a client told 0 would
/// retry at once and be rejected again).
pub fn retry_after_secs(d: Duration) -> u64 {
    ceil_secs(d).max(1)
}

/// The advertised window: the full-refill time `burst × T` in whole seconds, rounded up, at least 1.
pub fn window_secs(rate: &Rate) -> u64 {
    ceil_secs(rate.refill_time()).max(1)
}

/// The largest Structured Fields integer (RFC 9651, section 3.3.1).
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// Writes `name` as a Structured Fields String. Only `[A-Za-z0-9_.-]` are kept; every other
/// character (quotes, backslashes, spaces, controls, non-ASCII) becomes `_`, so no escaping is
/// ever needed and a configured name cannot inject into the field.
fn push_policy_name(out: &mut Vec<u8>, name: &str) {
    out.push(b'"');
    for c in name.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        out.push(if keep { c as u8 } else { b'_' });
    }
    out.push(b'"');
}

/// Writes `n` in decimal, capped at the Structured Fields integer maximum.
fn push_integer(out: &mut Vec<u8>, n: u64) {
    let mut n = n.min(SF_INTEGER_MAX);
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
        start -= 1;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64, burst: u32) -> Rate {
        Rate::new(per_second, burst).unwrap()
    }

    fn text(out: &[u8]) -> &str {
        std::str::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_429_fields_exactly() {
        let mut out = b"HTTP/1.1 429 Too Many Requests\r\n".to_vec();
        let reset = Duration::from_millis(1500);
        write_429_headers(&mut out, "api", &rate(10.0, 20), 0, reset, Duration::from_millis(100));
        assert_eq!(
            text(&out),
            "HTTP/1.1 429 Too Many Requests\r\n\
             Retry-After: 1\r\n\
             RateLimit-Policy: \"api\";q=20;w=2\r\n\
             RateLimit: \"api\";r=0;t=2\r\n"
        );
    }

    #[test]
    fn writes_fields_for_admitted_responses() {
        let mut out = Vec::new();
        write_ratelimit_headers(&mut out, "per-client", &rate(100.0, 50), 49, Duration::from_millis(10));
        assert_eq!(text(&out), "RateLimit-Policy: \"per-client\";q=50;w=1\r\nRateLimit: \"per-client\";r=49;t=1\r\n");
        out.clear();
        write_ratelimit_headers(&mut out, "slow", &rate(1.0 / 60.0, 5), 5, Duration::ZERO);
        assert_eq!(text(&out), "RateLimit-Policy: \"slow\";q=5;w=300\r\nRateLimit: \"slow\";r=5;t=0\r\n");
    }

    #[test]
    fn window_is_the_refill_time_rounded_up() {
        assert_eq!(window_secs(&rate(10.0, 20)), 2);
        assert_eq!(window_secs(&rate(10.0, 21)), 3);
        assert_eq!(window_secs(&rate(1000.0, 1)), 1);
        assert_eq!(window_secs(&rate(3.0, 3)), 2, "T rounds up to 333,333,334 ns: 3 T is just over 1 s");
        assert_eq!(window_secs(&rate(0.5, 1)), 2);
    }

    #[test]
    fn policy_names_are_sanitised_into_plain_strings() {
        let mut out = Vec::new();
        push_policy_name(&mut out, "a\"b\\c d\r\né.x-y_z9");
        assert_eq!(text(&out), "\"a_b_c_d___.x-y_z9\"");
        out.clear();
        push_policy_name(&mut out, "");
        assert_eq!(text(&out), "\"\"");
    }

    #[test]
    fn retry_after_rounds_up_to_at_least_one_second() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(59)), 59);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
    }

    #[test]
    fn integers_are_decimal_and_capped() {
        for (n, want) in [(0, "0"), (7, "7"), (10, "10"), (1_234_567, "1234567"), (u64::MAX, "999999999999999")] {
            let mut out = Vec::new();
            push_integer(&mut out, n);
            assert_eq!(text(&out), want);
        }
        let mut out = Vec::new();
        let huge = Rate { per_second: 1e-6, burst: u32::MAX };
        write_429_headers(&mut out, "p", &huge, u32::MAX, Duration::MAX, Duration::MAX);
        assert!(text(&out).starts_with("Retry-After: 999999999999999\r\n"), "{}", text(&out));
    }
}
