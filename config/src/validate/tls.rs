//! `listeners[].tls` and `clusters[].tls`: the shape of TLS settings. Files are only named
//! here; the gateway reads and checks them when it applies the configuration.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{CertificateFiles, ClientAuth, ClientAuthMode, ListenerTls, TlsVersion, UnknownSni};
use crate::problems::Problems;
use crate::raw::{RawCertificate, RawListenerTls};

use super::fields::{choice, duration, host_name, int_in, is_token};
use super::overload::RESERVED_HEADERS;

/// Converts a listener's `tls` table.
pub(super) fn listener(raw: &RawListenerTls, base: Option<&Path>, p: &mut Problems<'_>, path: &KeyPath) -> ListenerTls {
    let certs_path = path.key("certificates");
    if raw.certificates.is_empty() {
        p.at(
            &certs_path,
            "a TLS listener needs at least one certificate: certificates = [{ cert = \"...pem\", key = \"...key\" }]",
        );
    }
    let mut served: Vec<(String, usize)> = Vec::new();
    let certificates = raw
        .certificates
        .iter()
        .enumerate()
        .map(|(i, c)| certificate(c, i, &mut served, base, p, &certs_path.index(i)))
        .collect();
    let handshake_timeout =
        duration(p, &path.key("handshake_timeout"), raw.handshake_timeout.as_ref(), defaults::TLS_HANDSHAKE_TIMEOUT);
    ListenerTls {
        certificates,
        unknown_sni: choice(
            p,
            &path.key("unknown_sni"),
            raw.unknown_sni.as_ref(),
            &[("default", UnknownSni::Default), ("refuse", UnknownSni::Refuse)],
            defaults::UNKNOWN_SNI,
        ),
        min_version: choice(
            p,
            &path.key("min_version"),
            raw.min_version.as_ref(),
            &[("1.2", TlsVersion::Tls12), ("1.3", TlsVersion::Tls13)],
            defaults::TLS_MIN_VERSION,
        ),
        handshake_timeout,
        session_tickets: raw.session_tickets.unwrap_or(defaults::TLS_SESSION_TICKETS),
        session_ticket_keys: ticket_keys(raw, base, p, path),
        session_cache: int_in(
            p,
            &path.key("session_cache"),
            raw.session_cache,
            0..=defaults::MAX_SESSION_CACHE,
            defaults::TLS_SESSION_CACHE,
        ),
        client_auth: raw.client_auth.as_ref().map(|c| {
            let at = path.key("client_auth");
            ClientAuth {
                ca: file(&c.ca, base, p, &at.key("ca")),
                mode: choice(
                    p,
                    &at.key("mode"),
                    c.mode.as_ref(),
                    &[("required", ClientAuthMode::Required), ("optional", ClientAuthMode::Optional)],
                    defaults::CLIENT_AUTH_MODE,
                ),
            }
        }),
        identity_header: identity_header(raw.identity_header.as_deref(), p, &path.key("identity_header")),
    }
}

/// `session_ticket_keys`: files, only with session tickets on.
fn ticket_keys(raw: &RawListenerTls, base: Option<&Path>, p: &mut Problems<'_>, path: &KeyPath) -> Vec<PathBuf> {
    let at = path.key("session_ticket_keys");
    let Some(keys) = &raw.session_ticket_keys else { return Vec::new() };
    if !raw.session_tickets.unwrap_or(defaults::TLS_SESSION_TICKETS) {
        p.at(&at, "session ticket keys need session_tickets = true");
    }
    if keys.len() > defaults::MAX_SESSION_TICKET_KEYS {
        p.at(
            &at,
            format!(
                "at most {} files (the first encrypts, the others only decrypt)",
                defaults::MAX_SESSION_TICKET_KEYS
            ),
        );
    }
    keys.iter().enumerate().map(|(i, k)| file(k, base, p, &at.index(i))).collect()
}

/// The SNI name of an upstream: a DNS name (lower-cased), never an IP address.
pub(super) fn sni_name(text: &str) -> Result<String, String> {
    if text.parse::<IpAddr>().is_ok() {
        return Err(format!("{text:?} is an IP address: SNI carries DNS names only"));
    }
    host_name(text)
}

/// A file path: non-empty; relative paths are resolved against `base` when there is one.
pub(super) fn file(text: &str, base: Option<&Path>, p: &mut Problems<'_>, path: &KeyPath) -> PathBuf {
    if text.is_empty() {
        p.at(path, "file path is empty");
    }
    match base {
        Some(dir) if Path::new(text).is_relative() => dir.join(text),
        _ => PathBuf::from(text),
    }
}

/// One element of `certificates`; `served` maps each explicit name to its certificate index.
fn certificate(
    raw: &RawCertificate,
    index: usize,
    served: &mut Vec<(String, usize)>,
    base: Option<&Path>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> CertificateFiles {
    let mut names = Vec::new();
    if let Some(list) = &raw.names {
        if list.is_empty() {
            p.at(
                &path.key("names"),
                "names is empty: list the SNI names, or leave `names` out to use the certificate's DNS names",
            );
        }
        for (i, text) in list.iter().enumerate() {
            let at = path.key("names").index(i);
            match sni_pattern(text) {
                Ok(name) => {
                    if let Some((_, j)) = served.iter().find(|(seen, _)| *seen == name) {
                        let whom =
                            if *j == index { "this certificate".to_owned() } else { format!("certificates[{j}]") };
                        p.at(&at, format!("name {name:?} is already served by {whom}"));
                    } else {
                        served.push((name.clone(), index));
                    }
                    names.push(name);
                }
                Err(message) => p.at(&at, message),
            }
        }
    }
    CertificateFiles {
        cert: file(&raw.cert, base, p, &path.key("cert")),
        key: file(&raw.key, base, p, &path.key("key")),
        names,
    }
}

/// A certificate name: a DNS name, or `*.` followed by a domain of at least two labels (a
/// wildcard covers exactly one leftmost label). Returned in lower case.
fn sni_pattern(text: &str) -> Result<String, String> {
    if text.ends_with('.') {
        return Err(format!("invalid name {text:?}: write it without the trailing dot"));
    }
    let Some(domain) = text.strip_prefix("*.") else {
        return sni_name(text).map_err(|e| format!("invalid name: {e}"));
    };
    let domain = host_name(domain).map_err(|e| format!("invalid wildcard {text:?}: {e}"))?;
    if !domain.contains('.') {
        return Err(format!(
            "invalid wildcard {text:?}: a wildcard must cover names under a domain of at least two labels, \
             as in \"*.example.com\""
        ));
    }
    if domain.parse::<IpAddr>().is_ok() {
        return Err(format!("invalid wildcard {text:?}: SNI carries DNS names only"));
    }
    Ok(format!("*.{domain}"))
}

/// A lower-case header name that is not a connection or framing header.
fn identity_header(raw: Option<&str>, p: &mut Problems<'_>, path: &KeyPath) -> String {
    let Some(name) = raw else { return defaults::IDENTITY_HEADER.to_owned() };
    if !is_token(name) || name.bytes().any(|b| b.is_ascii_uppercase()) {
        p.at(path, format!("invalid header name {name:?}: use a lower-case token such as \"x-client-identity\""));
    } else if RESERVED_HEADERS.contains(&name) {
        p.at(
            path,
            format!("{name} is a connection or framing header: choose another name, e.g. \"x-client-identity\""),
        );
    }
    name.to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn sni_patterns() {
        assert_eq!(sni_pattern("A.Example").unwrap(), "a.example");
        assert_eq!(sni_pattern("*.Example.com").unwrap(), "*.example.com");
        for (bad, hint) in [
            ("*.com", "at least two labels"),
            ("a.*.com", "leading label"),
            ("*a.example.com", "leading label"),
            ("*.*.example.com", "leading label"),
            ("example.com.", "trailing dot"),
            ("10.0.0.1", "IP address"),
            ("*", "leading label"),
            ("", "empty"),
            ("a_b.example", "labels"),
        ] {
            let err = sni_pattern(bad).unwrap_err();
            assert!(err.contains(hint), "{bad:?}: {err}");
        }
    }
}
