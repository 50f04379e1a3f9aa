//! Checks of single values: names, tokens, hosts, paths, sizes, durations and ranges.
//!
//! The `Problems`-taking helpers record a problem and return a placeholder (the default) so the
//! caller can keep going; the model is only returned when no problem was recorded.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::locate::KeyPath;
use crate::model::HostMatch;
use crate::problems::Problems;
use crate::raw::IntOrStr;
use crate::units::{parse_duration, parse_size};

/// Longest name of a listener, route or cluster.
const MAX_NAME_LEN: usize = 64;

/// A size in bytes: a positive integer, or a string with a unit (`"64KiB"`).
pub(super) fn size(p: &mut Problems<'_>, path: &KeyPath, raw: Option<&IntOrStr>, default: u64) -> u64 {
    let parsed = match raw {
        None => return default,
        Some(IntOrStr::Int(n)) if *n > 0 => Ok(n.unsigned_abs()),
        Some(IntOrStr::Int(n)) => Err(format!("size must be greater than zero, got {n}")),
        Some(IntOrStr::Str(s)) => parse_size(s),
    };
    parsed.unwrap_or_else(|message| {
        p.at(path, message);
        default
    })
}

/// A size that must fit in `usize` (always true on 64-bit targets).
pub(super) fn size_usize(p: &mut Problems<'_>, path: &KeyPath, raw: Option<&IntOrStr>, default: usize) -> usize {
    let bytes = size(p, path, raw, default as u64);
    usize::try_from(bytes).unwrap_or_else(|_| {
        p.at(path, format!("size {bytes} is too large for this platform"));
        default
    })
}

/// A duration string with a unit (`"10s"`): positive and at most 24h.
pub(super) fn duration(p: &mut Problems<'_>, path: &KeyPath, raw: Option<&IntOrStr>, default: Duration) -> Duration {
    let parsed = match raw {
        None => return default,
        Some(IntOrStr::Int(n)) => {
            Err(format!("a duration needs a unit: write it as a string such as \"{n}s\" or \"{n}ms\""))
        }
        Some(IntOrStr::Str(s)) => parse_duration(s),
    };
    parsed.unwrap_or_else(|message| {
        p.at(path, message);
        default
    })
}

/// An integer within `range`, converted to `T` (the range must fit in `T`).
pub(super) fn int_in<T: TryFrom<i64>>(
    p: &mut Problems<'_>,
    path: &KeyPath,
    raw: Option<i64>,
    range: RangeInclusive<i64>,
    default: T,
) -> T {
    let Some(n) = raw else { return default };
    match T::try_from(n) {
        Ok(value) if range.contains(&n) => value,
        _ => {
            let (lo, hi) = range.into_inner();
            p.at(path, format!("must be between {lo} and {hi}, got {n}"));
            default
        }
    }
}

/// One of a fixed set of words, e.g. `io_driver = "epoll"`.
pub(super) fn choice<T: Copy>(
    p: &mut Problems<'_>,
    path: &KeyPath,
    raw: Option<&String>,
    options: &[(&str, T)],
    default: T,
) -> T {
    let Some(word) = raw else { return default };
    if let Some((_, value)) = options.iter().find(|(name, _)| name == word) {
        return *value;
    }
    let names: Vec<String> = options.iter().map(|(name, _)| format!("{name:?}")).collect();
    p.at(path, format!("unknown value {word:?} (expected one of {})", names.join(", ")));
    default
}

/// Names of listeners, routes and clusters appear in logs and metric labels: 1 to 64 ASCII
/// letters, digits, `-`, `_` or `.`.
pub(super) fn check_name(p: &mut Problems<'_>, path: &KeyPath, name: &str) {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        p.at(path, format!("invalid name {name:?}: use 1 to {MAX_NAME_LEN} ASCII letters, digits, '-', '_' or '.'"));
    }
}

/// An RFC 9110 token (method, header field name, `Via` pseudonym).
pub(super) fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Text that may be written into a header field value: no control characters.
pub(super) fn is_field_value(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// `shop.example.com` -> exact (lower case); `*.example.com` -> suffix `.example.com`.
pub(super) fn host_match(text: &str) -> Result<HostMatch, String> {
    match text.strip_prefix("*.") {
        Some(suffix) => Ok(HostMatch::Suffix(format!(".{}", host_name(suffix)?))),
        None if text == "*" => Err("to match every host, leave `host` out".to_owned()),
        None => host_name(text).map(HostMatch::Exact),
    }
}

/// A DNS name or IPv4 address, returned in lower case: labels of letters, digits and `-`,
/// separated by single dots; no port, no trailing dot, no wildcard.
pub(super) fn host_name(text: &str) -> Result<String, String> {
    let host = text.to_ascii_lowercase();
    if host.is_empty() {
        return Err("host is empty".to_owned());
    }
    if host.contains('*') {
        return Err(format!(
            "invalid host {text:?}: `*` is only allowed as a whole leading label, as in \"*.example.com\""
        ));
    }
    if host.contains(':') {
        return Err(format!("invalid host {text:?}: give the host without a port (IPv6 literals are not supported)"));
    }
    if host.len() > 253 {
        return Err(format!("invalid host {text:?}: longer than 253 characters"));
    }
    let labels_ok = host.split('.').all(|label| {
        !label.is_empty() && label.len() <= 63 && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    if !labels_ok {
        return Err(format!("invalid host {text:?}: expected dot-separated labels of letters, digits and '-'"));
    }
    Ok(host)
}

/// A URL path: starts with `/`, printable ASCII without spaces, no `?` or `#`.
pub(super) fn check_path(text: &str) -> Result<(), String> {
    if !text.starts_with('/') {
        return Err(format!("path {text:?} must start with '/'"));
    }
    if let Some(c) = text.chars().find(|c| !c.is_ascii_graphic() || matches!(c, '?' | '#')) {
        return Err(format!(
            "path {text:?} contains {c:?}: only printable ASCII without spaces, '?' or '#' \
             (percent-encode other bytes)"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        for ok in ["GET", "PURGE", "x-canary", "M-SEARCH", "a!#$%&'*+-.^_`|~1"] {
            assert!(is_token(ok), "{ok}");
        }
        for bad in ["", "GE T", "x:y", "a\"b", "é", "a/b", "(x)"] {
            assert!(!is_token(bad), "{bad}");
        }
    }

    #[test]
    fn field_values() {
        assert!(is_field_value("text/plain; charset=utf-8"));
        assert!(is_field_value(""));
        assert!(!is_field_value("a\r\nb"));
        assert!(!is_field_value("a\tb"));
        assert!(!is_field_value("a\u{7f}"));
    }

    #[test]
    fn host_match_normalisation() {
        assert_eq!(host_match("API.Example.com"), Ok(HostMatch::Exact("api.example.com".to_owned())));
        assert_eq!(host_match("*.Example.COM"), Ok(HostMatch::Suffix(".example.com".to_owned())));
        assert_eq!(host_match("10.0.0.1"), Ok(HostMatch::Exact("10.0.0.1".to_owned())));
        assert_eq!(host_match("*.com"), Ok(HostMatch::Suffix(".com".to_owned())));
    }

    #[test]
    fn bad_host_matches() {
        for (bad, hint) in [
            ("", "empty"),
            ("*", "leave `host` out"),
            ("a.*.com", "leading label"),
            ("*example.com", "leading label"),
            ("*.*.com", "leading label"),
            ("example.com:8080", "without a port"),
            ("[::1]", "without a port"),
            ("example..com", "labels"),
            ("example.com.", "labels"),
            (".example.com", "labels"),
            ("ex_ample.com", "labels"),
            ("exa mple.com", "labels"),
            ("*.", "empty"),
        ] {
            let err = host_match(bad).unwrap_err();
            assert!(err.contains(hint), "{bad:?}: {err}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(host_match(&long).is_err());
        let too_long = ["abcdefghij"; 30].join(".");
        assert!(host_match(&too_long).unwrap_err().contains("253"));
    }

    #[test]
    fn paths() {
        assert_eq!(check_path("/"), Ok(()));
        assert_eq!(check_path("/v1/a%20b;x=1"), Ok(()));
        for bad in ["", "v1", "/a b", "/a?b", "/a#b", "/é", "/a\n"] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }
}
