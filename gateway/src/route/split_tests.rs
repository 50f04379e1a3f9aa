#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use gateway_config::Split;
use http::{HeaderMap, HeaderValue};

use super::*;
use crate::codec::h1::HeadScratch;

/// The split of a route with `route` (TOML keys) over clusters a, b and c.
fn split(route: &str) -> Split {
    let text = format!(
        "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:0\"\n\
         [[clusters]]\nname = \"a\"\nendpoints = [\"127.0.0.1:1\"]\n\
         [[clusters]]\nname = \"b\"\nendpoints = [\"127.0.0.1:2\"]\n\
         [[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:3\"]\n\
         [[routes]]\nname = \"r\"\n{route}"
    );
    gateway_config::parse(&text, "<test>").unwrap().routes.remove(0).split.unwrap()
}

const CANARY: &str = "split = [{ cluster = \"a\", weight = 90 }, { cluster = \"b\", weight = 10 }]\n";

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (n, v) in pairs {
        map.append(http::HeaderName::from_bytes(n.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
    }
    map
}

#[test]
fn random_split_follows_the_weights() {
    let s = split(CANARY);
    let rng = XorShift::new(7);
    let mut counts = [0u32; 2];
    for _ in 0..100_000 {
        let (t, reason) = choose(&s, &HeaderMap::new(), &rng);
        assert_eq!(reason, SplitReason::Weight);
        counts[t] += 1;
    }
    // Binomial(100 000, 0.1): sd ~ 95, so +-1000 is over 10 sd.
    assert!((9_000..=11_000).contains(&counts[1]), "{counts:?}");
}

#[test]
fn a_zero_weight_target_is_never_chosen_by_weight() {
    let s = split("split = [{ cluster = \"a\", weight = 0 }, { cluster = \"b\", weight = 3 }]\n");
    let rng = XorShift::new(1);
    assert!((0..10_000).all(|_| choose(&s, &HeaderMap::new(), &rng).0 == 1));
}

#[test]
fn pins_come_first_in_order() {
    let s = split(&format!(
        "{CANARY}pin = [{{ header = \"x-canary\", value = \"1\", cluster = \"b\" }}, {{ header = \"x-c\", cluster = \"c\" }}]\n"
    ));
    let rng = XorShift::new(3);
    assert_eq!(s.targets.len(), 3, "c is a pinned-only target");
    for _ in 0..1000 {
        assert_eq!(choose(&s, &headers(&[("x-canary", "1")]), &rng), (1, SplitReason::Pin));
        assert_eq!(choose(&s, &headers(&[("x-c", "")]), &rng), (2, SplitReason::Pin), "presence is enough");
        assert_eq!(choose(&s, &headers(&[("x-c", "1"), ("x-canary", "1")]), &rng).0, 1, "first pin wins");
        assert_ne!(choose(&s, &headers(&[("x-canary", "2")]), &rng).1, SplitReason::Pin, "value must match");
    }
    // Any field line of the header may match.
    assert_eq!(choose(&s, &headers(&[("x-canary", "0"), ("x-canary", "1")]), &rng).0, 1);
}

#[test]
fn sticky_header_keeps_each_key_on_one_target_and_keeps_the_weights() {
    let s = split(&format!("{CANARY}sticky = {{ header = \"x-user-id\" }}\n"));
    let rng = XorShift::new(11);
    let mut second = 0;
    for user in 0..20_000 {
        let h = headers(&[("x-user-id", &format!("user-{user}"))]);
        let (t, reason) = choose(&s, &h, &rng);
        assert_eq!(reason, SplitReason::Sticky);
        for _ in 0..3 {
            assert_eq!(choose(&s, &h, &rng).0, t, "user-{user} moved");
        }
        second += usize::from(t == 1);
    }
    // 20 000 keys at 10%: sd ~ 42, +-400 is over 9 sd.
    assert!((1_600..=2_400).contains(&second), "{second}");
    // Without the key (or with an empty one) the split is random by weight.
    assert_eq!(choose(&s, &HeaderMap::new(), &rng).1, SplitReason::Weight);
    assert_eq!(choose(&s, &headers(&[("x-user-id", "")]), &rng).1, SplitReason::Weight);
}

#[test]
fn sticky_cookie_is_found_among_cookies_and_crumbs() {
    let s = split(&format!("{CANARY}sticky = {{ cookie = \"uid\" }}\n"));
    let rng = XorShift::new(5);
    let alone = choose(&s, &headers(&[("cookie", "uid=u-42")]), &rng);
    assert_eq!(alone.1, SplitReason::Sticky);
    for h in [
        headers(&[("cookie", "a=1; uid=u-42; b=2")]),
        headers(&[("cookie", "a=1"), ("cookie", "uid=u-42")]),
        headers(&[("cookie", "xuid=zzz;uid = u-42 ")]),
    ] {
        assert_eq!(choose(&s, &h, &rng), alone, "{h:?}");
    }
    assert_eq!(choose(&s, &headers(&[("cookie", "UID=u-42")]), &rng).1, SplitReason::Weight, "names are exact");
    assert_eq!(crate::upstream::hashkey::cookie_value(b"a=1; uid=; b=2", b"uid"), Some(&b""[..]));
    assert_eq!(crate::upstream::hashkey::cookie_value(b"a=1; b", b"b"), None);
}

#[test]
fn the_stable_hash_never_changes() {
    // Users would move between versions if it did: these values are part of the behaviour.
    assert_eq!(stable_hash(b""), STABLE_EMPTY);
    assert_eq!(stable_hash(b"user-1"), STABLE_USER_1);
    assert_ne!(stable_hash(b"user-1"), stable_hash(b"user-2"));
}

#[test]
fn h1_headers_match_names_case_insensitively() {
    let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX-User-Id: bob\r\nCookie: uid=7\r\n\r\n";
    let mut scratch = HeadScratch::new(16);
    let limits = crate::codec::h1::RequestLimits { max_request_line: 1024, max_header_bytes: 4096, max_headers: 16 };
    crate::codec::h1::parse_request(raw, &limits, &mut scratch).unwrap().unwrap();
    let h = crate::request::Fields::H1 { buf: raw, scratch: &scratch };
    let mut seen = Vec::new();
    assert!(h.any_value("x-user-id", &mut |v| {
        seen.push(v.to_vec());
        true
    }));
    assert_eq!(seen, [b"bob".to_vec()]);
    let s = split(&format!("{CANARY}sticky = {{ cookie = \"uid\" }}\n"));
    let rng = XorShift::new(9);
    assert_eq!(choose(&s, &h, &rng), choose(&s, &headers(&[("cookie", "uid=7")]), &rng));
}

const STABLE_EMPTY: u64 = 17_665_956_581_633_026_203;
const STABLE_USER_1: u64 = 14_166_554_182_431_137_624;
