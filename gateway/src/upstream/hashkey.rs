//! The request hash of consistent-hashing balancers (`hash_key`), and a small stable hash.
//!
//! The hash must be the same in every worker and every process (and across restarts), so that
//! all of them send one key to one endpoint: it is FNV-1a over the key's bytes finished with
//! the SplitMix64 mixer, never `std`'s randomly seeded `RandomState`.

use gateway_config::HashKey;

use super::{ClusterState, PickHints};
use crate::http::conn::Downstream;
use crate::runtime::worker::Worker;

/// A well-mixed 64-bit hash of `bytes`, stable across processes, builds and platforms.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    mix64(crate::snapshot::fnv1a64(bytes))
}

/// The SplitMix64 finaliser: every input bit affects every output bit.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Pick hints for an HTTP/1.1 request whose head starts at `conn.rbuf[base..]`: the hash of
/// the cluster's `hash_key` when it has one and the request carries the key.
pub fn h1(
    worker: &Worker,
    conn: &Downstream,
    base: usize,
    server: &gateway_config::Server,
    cluster: &ClusterState,
) -> PickHints {
    let Some(key) = &cluster.settings.hash_key else { return PickHints::default() };
    let hash = match key {
        HashKey::ClientIp => Some(hash_bytes(&conn.peer_ip)),
        HashKey::Header(name) | HashKey::Cookie(name) => {
            let limits = crate::http::h1::RequestLimits {
                max_request_line: server.limits.max_request_line_bytes,
                max_header_bytes: server.limits.max_header_bytes,
                max_headers: server.limits.max_headers,
            };
            let buf = conn.rbuf.get(base..).unwrap_or_default();
            let scratch = worker.head_scratch(conn.head_token, buf, &limits);
            let fields = scratch.headers().iter().map(|h| (h.name(buf), h.value(buf)));
            match key {
                HashKey::Header(_) => header(fields, name.as_bytes()),
                _ => cookie(fields, name.as_bytes()),
            }
        }
    };
    PickHints { hash, avoid: None }
}

/// Pick hints for an HTTP/2 request (see [`h1`]); `peer_ip` is the client address as text.
pub fn h2(parts: &http::request::Parts, peer_ip: &[u8], cluster: &ClusterState) -> PickHints {
    let hash = cluster.settings.hash_key.as_ref().and_then(|key| h2_hash(key, parts, peer_ip));
    PickHints { hash, avoid: None }
}

/// The hash of `key` in an HTTP/2 request, `None` when the request lacks it.
fn h2_hash(key: &HashKey, parts: &http::request::Parts, peer_ip: &[u8]) -> Option<u64> {
    let fields = parts.headers.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
    match key {
        HashKey::ClientIp => Some(hash_bytes(peer_ip)),
        HashKey::Header(name) => header(fields, name.as_bytes()),
        HashKey::Cookie(name) => cookie(fields, name.as_bytes()),
    }
}

/// The hash of the first field named `name` (case-insensitive).
fn header<'a>(mut fields: impl Iterator<Item = (&'a [u8], &'a [u8])>, name: &[u8]) -> Option<u64> {
    fields.find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| hash_bytes(v))
}

/// The hash of the value of the first cookie named `name` in any `Cookie` field (HTTP/2 may
/// split cookies over several fields).
fn cookie<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>, name: &[u8]) -> Option<u64> {
    fields
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
        .find_map(|(_, value)| cookie_value(value, name))
        .map(hash_bytes)
}

/// The value of cookie `name` in a `Cookie` field value (`a=1; b=2`).
pub(crate) fn cookie_value<'a>(field: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    field.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (n, v) = (pair.get(..eq)?, pair.get(eq + 1..)?);
        (n.trim_ascii() == name).then(|| v.trim_ascii())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_mixed() {
        // Fixed values: a change here changes which endpoint every key maps to in production.
        assert_eq!(hash_bytes(b""), mix64(0xcbf2_9ce4_8422_2325));
        assert_eq!(hash_bytes(b"user-1"), hash_bytes(b"user-1"));
        assert_ne!(hash_bytes(b"user-1"), hash_bytes(b"user-2"));
        // One flipped input bit flips about half of the output bits.
        let flips = (hash_bytes(b"user-1") ^ hash_bytes(b"user-3")).count_ones();
        assert!((16..=48).contains(&flips), "{flips}");
    }

    #[test]
    fn header_and_cookie_values() {
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b"Host", b"a"),
            (b"X-User", b"alice"),
            (b"cookie", b"theme=dark; session=s1"),
            (b"Cookie", b"session=s2"),
        ];
        assert_eq!(header(fields.iter().copied(), b"x-user"), Some(hash_bytes(b"alice")));
        assert_eq!(header(fields.iter().copied(), b"x-missing"), None);
        assert_eq!(cookie(fields.iter().copied(), b"session"), Some(hash_bytes(b"s1")));
        assert_eq!(cookie(fields.iter().copied(), b"theme"), Some(hash_bytes(b"dark")));
        assert_eq!(cookie(fields.iter().copied(), b"Session"), None);
        assert_eq!(cookie(fields.iter().copied(), b"sess"), None);
    }

    #[test]
    fn http2_requests_hash_like_http1() {
        let (parts, ()) = http::Request::builder()
            .header("x-user", "alice")
            .header("cookie", "a=1")
            .header("cookie", "session=s1")
            .body(())
            .unwrap_or_else(|_| unreachable!())
            .into_parts();
        let ip = b"192.0.2.7";
        assert_eq!(h2_hash(&HashKey::ClientIp, &parts, ip), Some(hash_bytes(ip)));
        assert_eq!(h2_hash(&HashKey::Header("x-user".into()), &parts, ip), Some(hash_bytes(b"alice")));
        assert_eq!(h2_hash(&HashKey::Cookie("session".into()), &parts, ip), Some(hash_bytes(b"s1")));
        assert_eq!(h2_hash(&HashKey::Header("x-none".into()), &parts, ip), None);
    }
}
