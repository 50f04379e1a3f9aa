//! `listeners[].proxy_protocol`, `proxy_protocol_timeout`, `trusted_proxies`, `forwarded`.

use std::time::Duration;

use super::{assert_one, errors, valid};
use crate::model::ProxyProtocol;

/// A listener (lines 1-3) with `extra` from line 4 on.
fn listener(extra: &str) -> String {
    format!("[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n{extra}")
}

#[test]
fn proxy_protocol_and_trusted_proxies() {
    let l = valid(&listener("")).listeners.remove(0);
    assert_eq!(
        (l.proxy_protocol, l.proxy_protocol_timeout, l.trusted_proxies.len(), l.forwarded),
        (ProxyProtocol::Off, Duration::from_secs(5), 0, false)
    );
    let text = listener(
        "proxy_protocol = \"v2\"\nproxy_protocol_timeout = \"2s\"\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n\
         forwarded = true\n",
    );
    let l = valid(&text).listeners.remove(0);
    assert_eq!(
        (l.proxy_protocol, l.proxy_protocol_timeout, l.forwarded),
        (ProxyProtocol::V2, Duration::from_secs(2), true)
    );
    assert!(l.trusted_proxies[0].contains("10.9.8.7".parse().unwrap()));
    assert!(l.trusted_proxies[1].contains("::1".parse().unwrap()));
    for (value, expected) in [("off", ProxyProtocol::Off), ("v1", ProxyProtocol::V1), ("any", ProxyProtocol::Any)] {
        let l = valid(&listener(&format!("proxy_protocol = \"{value}\"\n"))).listeners.remove(0);
        assert_eq!(l.proxy_protocol, expected);
    }
    let text = listener("proxy_protocol = \"optional\"\ntrusted_proxies = [\"10.0.0.0/8\"]\n");
    assert_eq!(valid(&text).listeners[0].proxy_protocol, ProxyProtocol::Optional);
}

#[test]
fn bad_proxy_protocol_keys() {
    assert_one(
        &listener("proxy_protocol = \"v3\"\n"),
        "listeners[0].proxy_protocol",
        Some(4),
        "unknown proxy_protocol",
    );
    assert_one(
        &listener("proxy_protocol = \"optional\"\n"),
        "listeners[0].proxy_protocol",
        Some(4),
        "needs trusted_proxies",
    );
    assert_one(
        &listener("proxy_protocol_timeout = \"5ms\"\n"),
        "listeners[0].proxy_protocol_timeout",
        Some(4),
        "between 10ms and 60s",
    );
    assert_one(
        &listener("proxy_protocol_timeout = 5\n"),
        "listeners[0].proxy_protocol_timeout",
        Some(4),
        "needs a unit",
    );
    assert_one(
        &listener("trusted_proxies = [\"10.0.0.0/8\", \"10.0.0.300\"]\n"),
        "listeners[0].trusted_proxies[1]",
        Some(4),
        "",
    );
    assert_eq!(errors(&listener("forwarded = \"yes\"\n")).len(), 1);
}
