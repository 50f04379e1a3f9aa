//! The request hash of consistent-hashing balancers (`hash_key`), and a small stable hash.
//!
//! The hash must be the same in every worker and every process (and across restarts), so that
//! all of them send one key to one endpoint: it is FNV-1a over the key's bytes finished with
//! the SplitMix64 mixer, never `std`'s randomly seeded `RandomState`.

use gateway_config::HashKey;

use super::{ClusterState, PickHints};
use crate::request::Request;

/// A well-mixed 64-bit hash of `bytes`, stable across processes, builds and platforms.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    mix64(fnv1a64(bytes))
}

/// FNV-1a, 64 bit: a cheap content hash for config identity (not for security).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
/// The SplitMix64 finaliser: every input bit affects every output bit.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Pick hints for `req`: the hash of the cluster's `hash_key` when it has one and the request
/// carries the key.
pub fn hints(req: &Request<'_>, cluster: &ClusterState) -> PickHints {
    let hash = cluster.settings.hash_key.as_ref().and_then(|key| hash_of(key, req));
    PickHints { hash, avoid: None, shy: super::Shy::default() }
}

/// The hash of `key` in a request, `None` when the request lacks it.
fn hash_of(key: &HashKey, req: &Request<'_>) -> Option<u64> {
    match key {
        HashKey::ClientIp => Some(req.with_addr_text(hash_bytes)),
        HashKey::Header(name) => header(req.fields.iter(), name.as_bytes()),
        HashKey::Cookie(name) => cookie(req.fields.iter(), name.as_bytes()),
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
        let fields: [(&[u8], &[u8]); 3] = [(b"x-user", b"alice"), (b"cookie", b"a=1"), (b"cookie", b"session=s1")];
        let head = gateway_h2::server::RequestHead::from_parts(b"GET", Some(b"http"), None, Some(b"/"), &fields);
        let client = crate::request::Client::for_tests();
        let h2 = Request::h2_native(&head, None, true, &client);
        let raw = b"GET / HTTP/1.1\r\nhost: a\r\nX-User: alice\r\ncookie: a=1\r\nCookie: session=s1\r\n\r\n";
        let limits = crate::codec::h1::RequestLimits { max_request_line: 100, max_header_bytes: 1000, max_headers: 10 };
        let mut scratch = crate::codec::h1::HeadScratch::new(10);
        let head = crate::codec::h1::parse_request(raw, &limits, &mut scratch).ok().flatten();
        let Some(head) = head else { unreachable!("the head parses") };
        let h1 = Request::h1(raw, &head, &scratch, &client);
        let ip = b"192.0.2.1";
        for req in [h2, h1] {
            assert_eq!(hash_of(&HashKey::ClientIp, &req), Some(hash_bytes(ip)));
            assert_eq!(hash_of(&HashKey::Header("x-user".into()), &req), Some(hash_bytes(b"alice")));
            assert_eq!(hash_of(&HashKey::Cookie("session".into()), &req), Some(hash_bytes(b"s1")));
            assert_eq!(hash_of(&HashKey::Header("x-none".into()), &req), None);
        }
    }
}
