//! Request-targets (RFC 9112 §3.2) and authorities (RFC 3986 §3.2), checked byte by byte.

use std::ops::Range;

use super::classes::{has, PATH, QUERY, REG_NAME};
use super::{bytes_at, Method, RequestError};

/// A request-target taken apart (RFC 9112 §3.2); positions are in the whole buffer.
pub(super) struct TargetParts {
    pub(super) path: Range<usize>,
    pub(super) query: Option<Range<usize>>,
    /// Only for absolute-form.
    pub(super) authority: Option<Range<usize>>,
}

pub(super) fn parse_target(method: Method, buf: &[u8], target: Range<usize>) -> Result<TargetParts, RequestError> {
    if method == Method::Connect {
        return Err(RequestError::NotImplemented("CONNECT"));
    }
    let bytes = bytes_at(buf, &target);
    match bytes {
        [b'/', ..] => {
            let (path, query) = path_and_query(bytes, target.start).map_err(RequestError::BadRequest)?;
            Ok(TargetParts { path, query, authority: None })
        }
        b"*" if method == Method::Options => Ok(TargetParts { path: target, query: None, authority: None }),
        b"*" => Err(RequestError::BadRequest("asterisk-form is only for OPTIONS")),
        _ => absolute_form(bytes, target.start).map_err(RequestError::BadRequest),
    }
}

/// `absolute-URI` with scheme `http` or `https` (any case), an authority without userinfo, and
/// an optional path and query.
fn absolute_form(bytes: &[u8], base: usize) -> Result<TargetParts, &'static str> {
    let scheme_len = if starts_with_ignore_case(bytes, b"http://") {
        4
    } else if starts_with_ignore_case(bytes, b"https://") {
        5
    } else {
        return Err("request-target is neither origin-form nor an http(s) URI");
    };
    let auth_start = scheme_len + 3;
    let rest = bytes.get(auth_start..).unwrap_or_default();
    let auth_len = rest.iter().position(|&b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(rest.len());
    let authority = rest.get(..auth_len).unwrap_or_default();
    if authority.contains(&b'@') {
        return Err("userinfo in request-target");
    }
    let route_len = authority_len(authority).ok_or("invalid authority in request-target")?;
    let tail_start = base + auth_start + auth_len;
    let (mut path, query) = path_and_query(rest.get(auth_len..).unwrap_or_default(), tail_start)?;
    if path.is_empty() {
        // An empty path means "/" (RFC 9110 §4.2.1); the second '/' of "://" is one.
        path = base + auth_start - 1..base + auth_start;
    }
    let authority_start = base + auth_start;
    Ok(TargetParts { path, query, authority: Some(authority_start..authority_start + route_len) })
}

/// Whether `bytes` is an origin-form request-target (`/path[?query]`, RFC 3986 characters and
/// percent-encoding), as an HTTP/2 `:path` must be.
pub fn valid_origin_form(bytes: &[u8]) -> bool {
    bytes.first() == Some(&b'/') && path_and_query(bytes, 0).is_ok()
}

/// Splits `path [ "?" query ]` at the first `?`, checking RFC 3986 characters and
/// percent-encoding in one pass.
fn path_and_query(bytes: &[u8], base: usize) -> Result<(Range<usize>, Option<Range<usize>>), &'static str> {
    let mut query_start = None;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            if !is_hex(bytes.get(i + 1)) || !is_hex(bytes.get(i + 2)) {
                return Err("invalid percent-encoding in request-target");
            }
            i += 3;
            continue;
        }
        if b == b'?' && query_start.is_none() {
            query_start = Some(i + 1);
        } else if !has(b, if query_start.is_some() { QUERY } else { PATH }) {
            return Err(if b == b'#' { "fragment in request-target" } else { "invalid byte in request-target" });
        }
        i += 1;
    }
    let path_end = query_start.map_or(bytes.len(), |q| q - 1);
    Ok((base..base + path_end, query_start.map(|q| base + q..base + bytes.len())))
}

/// Checks `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2) and returns how many leading
/// bytes to route on: all of them, less a trailing `:` with an empty port. Refused: an empty
/// host, IPvFuture, zone identifiers, ports above 65535.
pub fn authority_len(authority: &[u8]) -> Option<usize> {
    let host_len = if authority.first() == Some(&b'[') {
        let close = authority.iter().position(|&b| b == b']')?;
        let literal = std::str::from_utf8(authority.get(1..close)?).ok()?;
        literal.parse::<std::net::Ipv6Addr>().ok()?;
        close + 1
    } else {
        let len = authority.iter().position(|&b| b == b':').unwrap_or(authority.len());
        let host = authority.get(..len)?;
        if host.is_empty() || !is_reg_name(host) {
            return None;
        }
        len
    };
    match authority.get(host_len..)? {
        [] | [b':'] => Some(host_len),
        [b':', port @ ..] if port.len() <= 5 && port.iter().all(u8::is_ascii_digit) => {
            let n = port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
            (n <= 65535).then_some(authority.len())
        }
        _ => None,
    }
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`; IPv4 addresses are reg-names too.
fn is_reg_name(host: &[u8]) -> bool {
    // Most hosts have no percent-encoding: one table test per byte settles them.
    if host.iter().all(|&b| has(b, REG_NAME)) {
        return true;
    }
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            if !is_hex(host.get(i + 1)) || !is_hex(host.get(i + 2)) {
                return false;
            }
            i += 3;
        } else if has(b, REG_NAME) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

fn is_hex(b: Option<&u8>) -> bool {
    b.is_some_and(u8::is_ascii_hexdigit)
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}
