//! `[[routes]]`: matches, actions, priority classes and rate limits.

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Action, DirectResponse, HeaderMatch, PathMatch, ProxyAction, Redirect};
use crate::model::{IdentityMatch, Route, RouteMatch};
use crate::problems::Problems;
use crate::raw::{RawDirectResponse, RawMatch, RawRedirect, RawRoute};
use crate::sections::Parsed;

use super::fields::{check_name, check_path, duration, host_match, host_name, int_in};
use super::fields::{is_field_value, is_token};
use super::overload::class_index;
use super::ratelimit;
use super::{check_unique_names, names};

/// Methods defined by RFC 9110 and RFC 5789; a lower-case spelling of one is a mistake, since
/// methods are case-sensitive and would never match.
const STANDARD_METHODS: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// Headers the gateway writes itself on a direct response.
const GATEWAY_OWNED_HEADERS: [&str; 3] = ["content-length", "transfer-encoding", "connection"];

const REDIRECT_STATUSES: [u16; 5] = [301, 302, 303, 307, 308];

/// What routes refer to in other sections.
pub(super) struct Refs<'a> {
    /// Cluster names by index (an element is `None` when unreadable); `None` when `clusters` is
    /// malformed, and cluster references are then unchecked.
    pub clusters: Option<&'a [Option<String>]>,
    /// Priority class names by index; `None` when `[overload]` is broken or lists no class,
    /// and priority references are then unchecked.
    pub classes: Option<&'a [String]>,
    /// The class of routes without `priority`.
    pub default_class: usize,
}

/// Converts every route.
pub(super) fn convert(raw: &[Parsed<RawRoute>], refs: &Refs<'_>, p: &mut Problems<'_>) -> Vec<Route> {
    check_unique_names(&names(raw, |r| &r.name), "routes", p);
    let section = KeyPath::root().key("routes");
    raw.iter()
        .enumerate()
        .filter_map(|(i, route)| Some((section.index(i), route.ok()?)))
        .map(|(path, route)| {
            check_name(p, &path.key("name"), &route.name);
            let action = action(route, refs.clusters, p, &path);
            let timeout = match &action {
                Action::Proxy(proxy) => Some(proxy.timeout),
                Action::Direct(_) | Action::Redirect(_) => None,
            };
            let websocket = route.websocket.unwrap_or(defaults::WEBSOCKET);
            if websocket && timeout.is_none() {
                p.at(&path.key("websocket"), "`websocket` only applies to routes with a `cluster`");
            }
            let matcher = matcher(&route.matcher, p, &path.key("match"));
            let proxies = timeout.is_some() || route.split.is_some();
            let edits = |raw: Option<&crate::raw::RawHeaderEdits>, response: bool, key: &str, p: &mut Problems<'_>| {
                raw.and_then(|r| super::edits::convert(r, response, p, &path.key(key)))
            };
            let request_headers = edits(route.request_headers.as_ref(), false, "request_headers", p);
            let response_headers = edits(route.response_headers.as_ref(), true, "response_headers", p);
            if !proxies && (request_headers.is_some() || response_headers.is_some()) {
                let key = if request_headers.is_some() { "request_headers" } else { "response_headers" };
                p.at(&path.key(key), format!("`{key}` only applies to routes with a `cluster` or `split`"));
            }
            let rewrite = route
                .rewrite
                .as_ref()
                .and_then(|r| super::edits::rewrite(r, matcher.path.as_ref(), proxies, p, &path.key("rewrite")));
            Route {
                name: route.name.clone(),
                matcher,
                action,
                priority: priority(route.priority.as_deref(), refs, p, &path.key("priority")),
                rate_limit: route
                    .rate_limit
                    .as_ref()
                    .map(|r| ratelimit::convert(r, timeout, p, &path.key("rate_limit"))),
                websocket,
                // Filled in by `traffic::convert`.
                split: None,
                mirror: None,
                hsts: route.hsts.as_ref().and_then(|h| super::headers::hsts(h, p, &path.key("hsts"))),
                request_headers,
                response_headers,
                rewrite,
            }
        })
        .collect()
}

/// The class index of `name`, or the default class when the route names none.
fn priority(name: Option<&str>, refs: &Refs<'_>, p: &mut Problems<'_>, path: &KeyPath) -> usize {
    let (Some(name), Some(classes)) = (name, refs.classes) else { return refs.default_class };
    class_index(classes, name).unwrap_or_else(|message| {
        p.at(path, message);
        refs.default_class
    })
}

fn matcher(raw: &RawMatch, p: &mut Problems<'_>, path: &KeyPath) -> RouteMatch {
    let host =
        raw.host.as_ref().and_then(|text| host_match(text).map_err(|message| p.at(&path.key("host"), message)).ok());
    let mut check = |key: &str, text: &String| match check_path(text) {
        Ok(()) => true,
        Err(message) => {
            p.at(&path.key(key), message);
            false
        }
    };
    let exact = raw.path.as_ref().filter(|text| check("path", text));
    let prefix = raw.path_prefix.as_ref().filter(|text| check("path_prefix", text));
    if raw.path.is_some() && raw.path_prefix.is_some() {
        p.at(&path.key("path_prefix"), "set at most one of `path` (exact) and `path_prefix`");
    }
    let path_match = match (exact, prefix) {
        (Some(exact), _) => Some(PathMatch::Exact(exact.clone())),
        (None, Some(prefix)) => Some(PathMatch::Prefix(prefix.clone())),
        (None, None) => None,
    };
    for (i, method) in raw.methods.iter().enumerate() {
        let upper = method.to_ascii_uppercase();
        if !is_token(method) {
            p.at(
                &path.key("methods").index(i),
                format!("invalid method {method:?}: methods are tokens such as \"GET\""),
            );
        } else if upper != *method && STANDARD_METHODS.contains(&upper.as_str()) {
            p.at(&path.key("methods").index(i), format!("methods are case-sensitive: write {upper:?}, not {method:?}"));
        }
    }
    let mut headers = Vec::with_capacity(raw.headers.len());
    for (i, header) in raw.headers.iter().enumerate() {
        let at = path.key("headers").index(i);
        if !is_token(&header.name) {
            p.at(&at.key("name"), format!("invalid header name {:?}", header.name));
        }
        if let Some(value) = header.value.as_ref().filter(|v| !is_field_value(v)) {
            p.at(&at.key("value"), format!("header value {value:?} contains control characters"));
        }
        headers.push(HeaderMatch { name: header.name.to_ascii_lowercase(), value: header.value.clone() });
    }
    let client_identity =
        raw.client_identity.as_ref().and_then(|text| identity_match(text, p, &path.key("client_identity")));
    RouteMatch { host, path: path_match, methods: raw.methods.clone(), headers, client_identity }
}

fn action(route: &RawRoute, clusters: Option<&[Option<String>]>, p: &mut Problems<'_>, path: &KeyPath) -> Action {
    let set: Vec<&str> = [
        ("cluster", route.cluster.is_some()),
        ("split", route.split.is_some()),
        ("direct_response", route.direct_response.is_some()),
        ("redirect", route.redirect.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, present)| present.then_some(key))
    .collect();
    match set.as_slice() {
        [] => p.at(path, "route has no action: set exactly one of `cluster`, `split`, `direct_response` or `redirect`"),
        [_] => {}
        [first, second, ..] => p.at(
            &path.key(second),
            format!("a route has exactly one action, but this one sets both `{first}` and `{second}`"),
        ),
    }
    if route.timeout.is_some() && route.cluster.is_none() && route.split.is_none() {
        p.at(&path.key("timeout"), "`timeout` only applies to routes with a `cluster` or `split`");
    }
    if route.retry.is_some() && route.cluster.is_none() && route.split.is_none() {
        p.at(&path.key("retry"), "`retry` only applies to routes with a `cluster` or a `split`");
    }
    // A split proxies to its first target by default (its clusters are checked with the split).
    let split_first = route.split.as_ref().and_then(|s| s.first()).map(|t| &t.cluster);
    if let Some(name) = route.cluster.as_ref().or(split_first) {
        let timeout = duration(p, &path.key("timeout"), route.timeout.as_ref(), defaults::ROUTE_TIMEOUT);
        let index = clusters.and_then(|c| c.iter().position(|c| c.as_deref() == Some(name.as_str())));
        if let (None, Some(clusters), Some(_)) = (index, clusters, &route.cluster) {
            let known: Vec<&str> = clusters.iter().flatten().map(String::as_str).collect();
            let known = if known.is_empty() {
                "no clusters are defined".to_owned()
            } else {
                format!("known: {}", known.join(", "))
            };
            p.at(&path.key("cluster"), format!("unknown cluster {name:?} ({known})"));
        }
        let retry = super::retry::policy(route.retry.as_ref(), timeout, p, &path.key("retry"));
        return Action::Proxy(ProxyAction { cluster: index.unwrap_or(0), timeout, retry });
    }
    if let Some(direct) = &route.direct_response {
        return Action::Direct(direct_response(direct, p, &path.key("direct_response")));
    }
    let redirect = route.redirect.as_ref().map(|r| self::redirect(r, p, &path.key("redirect")));
    Action::Redirect(redirect.unwrap_or(Redirect {
        status: defaults::REDIRECT_STATUS,
        scheme: None,
        host: None,
        port: None,
        path: None,
        keep_query: false,
    }))
}

fn direct_response(raw: &RawDirectResponse, p: &mut Problems<'_>, path: &KeyPath) -> DirectResponse {
    let status = int_in(p, &path.key("status"), raw.status, 200..=599, defaults::DIRECT_RESPONSE_STATUS);
    if matches!(status, 204 | 304) && !raw.body.is_empty() {
        p.at(&path.key("body"), format!("a {status} response has no body: remove `body`"));
    }
    for (name, value) in &raw.headers.0 {
        let at = path.key("headers").key(name);
        if !is_token(name) {
            p.at(&at, format!("invalid header name {name:?}"));
        } else if GATEWAY_OWNED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            p.at(&at, format!("{name} is set by the gateway and cannot be configured"));
        }
        if !is_field_value(value) {
            p.at(&at, format!("header value {value:?} contains control characters"));
        }
    }
    DirectResponse { status, headers: raw.headers.0.clone(), body: raw.body.clone() }
}

fn redirect(raw: &RawRedirect, p: &mut Problems<'_>, path: &KeyPath) -> Redirect {
    let status = int_in(p, &path.key("status"), raw.status, 0..=i64::from(u16::MAX), defaults::REDIRECT_STATUS);
    if !REDIRECT_STATUSES.contains(&status) {
        p.at(&path.key("status"), format!("redirect status must be 301, 302, 303, 307 or 308, got {status}"));
    }
    if let Some(scheme) = raw.scheme.as_deref().filter(|s| !matches!(*s, "http" | "https")) {
        p.at(&path.key("scheme"), format!("scheme must be \"http\" or \"https\", got {scheme:?}"));
    }
    let host =
        raw.host.as_ref().and_then(|text| host_name(text).map_err(|message| p.at(&path.key("host"), message)).ok());
    let port = int_in(p, &path.key("port"), raw.port, 1..=i64::from(u16::MAX), 0);
    if let Some(Err(message)) = raw.path.as_deref().map(check_path) {
        p.at(&path.key("path"), message);
    }
    if raw.scheme.is_none() && raw.host.is_none() && raw.port.is_none() && raw.path.is_none() {
        p.at(path, "redirect changes nothing and would loop: set at least one of scheme, host, port or path");
    }
    Redirect {
        status,
        scheme: raw.scheme.clone(),
        host,
        port: raw.port.map(|_| port),
        path: raw.path.clone(),
        keep_query: raw.keep_query,
    }
}

/// A verified client identity pattern: exact, or a prefix written with a trailing `*`.
pub(super) fn identity_match(text: &str, p: &mut Problems<'_>, at: &KeyPath) -> Option<IdentityMatch> {
    if text.is_empty() || text == "*" || text.chars().any(|c| c.is_control()) {
        p.at(at, format!("invalid client identity {text:?}: give a SPIFFE id, a DNS name or a subject CN, optionally ending in `*`"));
        return None;
    }
    if text.trim_end_matches('*').contains('*') {
        p.at(at, "`*` is allowed only at the end (a prefix match)");
        return None;
    }
    Some(match text.strip_suffix('*') {
        Some(prefix) => IdentityMatch::Prefix(prefix.to_owned()),
        None => IdentityMatch::Exact(text.to_owned()),
    })
}
