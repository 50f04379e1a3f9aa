//! `[[listeners]]`: addresses, protocols and TLS.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Listener, Protocol, ProxyProtocol};
use crate::problems::Problems;
use crate::raw::RawListener;
use crate::sections::Parsed;

use super::cidr::parse_cidr;
use super::fields::{check_name, duration, int_in};
use super::{check_unique_names, names, overlaps, socket_addr, tls, PLACEHOLDER_ADDRESS};

/// Converts every listener; relative file paths are resolved against `base`.
pub(super) fn convert(raw: &[Parsed<RawListener>], base: Option<&Path>, p: &mut Problems<'_>) -> Vec<Listener> {
    let section = KeyPath::root().key("listeners");
    if raw.is_empty() {
        p.at(&section, "no listeners: add at least one [[listeners]] section with a name and an address");
    }
    check_unique_names(&names(raw, |l| &l.name), "listeners", p);
    let mut seen: Vec<(SocketAddr, usize)> = Vec::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, listener) in raw.iter().enumerate() {
        let Some(l) = listener.ok() else { continue };
        let path = section.index(i);
        check_name(p, &path.key("name"), &l.name);
        let backlog = int_in(p, &path.key("backlog"), l.backlog, 1..=65535, defaults::LISTENER_BACKLOG);
        let address = socket_addr(&l.address, p, &path.key("address"));
        if let Some(address) = address {
            // Port 0 (any free port, used by tests) never conflicts.
            let clash = seen.iter().find(|(other, _)| address.port() != 0 && overlaps(*other, address));
            if let Some((other, j)) = clash {
                p.at(&path.key("address"), format!("address {address} overlaps listeners[{j}] ({other})"));
            }
            seen.push((address, i));
        }
        let tls = l.tls.as_ref().map(|t| tls::listener(t, base, p, &path.key("tls")));
        let protocols = match &l.protocols {
            Some(list) => protocols(list, p, &path.key("protocols")),
            None if tls.is_some() => defaults::TLS_PROTOCOLS.to_vec(),
            None => defaults::PLAIN_PROTOCOLS.to_vec(),
        };
        let proxy_protocol = proxy_protocol(l.proxy_protocol.as_deref(), p, &path.key("proxy_protocol"));
        let proxy_protocol_timeout = duration(
            p,
            &path.key("proxy_protocol_timeout"),
            l.proxy_protocol_timeout.as_ref(),
            defaults::PROXY_PROTOCOL_TIMEOUT,
        );
        if l.proxy_protocol_timeout.is_some() && !(MIN_PP_TIMEOUT..=MAX_PP_TIMEOUT).contains(&proxy_protocol_timeout) {
            p.at(&path.key("proxy_protocol_timeout"), "proxy_protocol_timeout must be between 10ms and 60s");
        }
        let mut trusted_proxies = Vec::new();
        for (j, text) in l.trusted_proxies.iter().flatten().enumerate() {
            match parse_cidr(text) {
                Ok(cidr) => trusted_proxies.push(cidr),
                Err(message) => p.at(&path.key("trusted_proxies").index(j), message),
            }
        }
        if proxy_protocol == ProxyProtocol::Optional && trusted_proxies.is_empty() && l.trusted_proxies.is_none() {
            p.at(
                &path.key("proxy_protocol"),
                "proxy_protocol = \"optional\" needs trusted_proxies (the balancers' networks): otherwise any \
                 client could send a PROXY header and claim any address",
            );
        }
        out.push(Listener {
            name: l.name.clone(),
            address: address.unwrap_or(PLACEHOLDER_ADDRESS),
            backlog,
            protocols,
            tls,
            proxy_protocol,
            proxy_protocol_timeout,
            trusted_proxies,
            forwarded: l.forwarded.unwrap_or(defaults::FORWARDED),
        });
    }
    out
}

const MIN_PP_TIMEOUT: Duration = Duration::from_millis(10);
const MAX_PP_TIMEOUT: Duration = Duration::from_secs(60);

/// `proxy_protocol`: `"off"` (the default), `"v1"`, `"v2"`, `"any"` or `"optional"`.
fn proxy_protocol(raw: Option<&str>, p: &mut Problems<'_>, path: &KeyPath) -> ProxyProtocol {
    match raw {
        None => defaults::PROXY_PROTOCOL,
        Some("off") => ProxyProtocol::Off,
        Some("v1") => ProxyProtocol::V1,
        Some("v2") => ProxyProtocol::V2,
        Some("any") => ProxyProtocol::Any,
        Some("optional") => ProxyProtocol::Optional,
        Some(other) => {
            p.at(
                path,
                format!(
                    "unknown proxy_protocol {other:?}: expected \"off\", \"v1\", \"v2\", \"any\" (either \
                     version, required) or \"optional\" (either version, or none)"
                ),
            );
            defaults::PROXY_PROTOCOL
        }
    }
}

/// `protocols`: ALPN names, most preferred first, each once.
fn protocols(raw: &[String], p: &mut Problems<'_>, path: &KeyPath) -> Vec<Protocol> {
    if raw.is_empty() {
        p.at(path, "protocols is empty: list at least one of \"h2\" and \"http/1.1\", most preferred first");
    }
    let mut out: Vec<Protocol> = Vec::with_capacity(raw.len());
    let mut first: Vec<(Protocol, usize)> = Vec::with_capacity(raw.len());
    for (i, name) in raw.iter().enumerate() {
        let protocol = match name.as_str() {
            "http/1.1" => Protocol::Http1,
            "h2" => Protocol::H2,
            other => {
                let hint = match other.to_ascii_lowercase().as_str() {
                    "http/1" | "http1" | "http/1.0" | "http1.1" | "http/1.1" => " (write \"http/1.1\")",
                    "http2" | "http/2" | "h2c" | "h2" => " (write \"h2\"; without tls it means cleartext HTTP/2)",
                    _ => "",
                };
                p.at(&path.index(i), format!("unknown protocol {other:?}: expected \"http/1.1\" or \"h2\"{hint}"));
                continue;
            }
        };
        if let Some((_, j)) = first.iter().find(|(seen, _)| *seen == protocol) {
            p.at(&path.index(i), format!("duplicate protocol {name:?} (already protocols[{j}])"));
            continue;
        }
        first.push((protocol, i));
        out.push(protocol);
    }
    out
}
