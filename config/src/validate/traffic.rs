//! `routes[].split`, `sticky`, `pin` and `mirror`: weighted clusters, the sticky key, pins and
//! the shadow cluster of a proxying route. Runs after `routes::convert`, whose routes are the
//! readable raw routes in order.

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Action, Cluster, Mirror, Pin, ProxyAction, Route, Split, SplitTarget, StickyKey, UpstreamProtocol};
use crate::problems::Problems;
use crate::raw::{RawMirror, RawRoute, RawSticky};
use crate::sections::Parsed;

use super::fields::{int_in, is_field_value, is_token};

const EMPTY_SPLIT: &str = "split is empty: list at least one { cluster = \"...\", weight = ... }";

/// Fills in `split` and `mirror` of every route converted from `raw`. `names`: cluster names by
/// index (`None` when `clusters` is malformed: references are then unchecked).
pub(super) fn convert(
    raw: &[Parsed<RawRoute>],
    routes: &mut [Route],
    clusters: &[Cluster],
    names: Option<&[Option<String>]>,
    p: &mut Problems<'_>,
) {
    let section = KeyPath::root().key("routes");
    let readable = raw.iter().enumerate().filter_map(|(i, r)| Some((section.index(i), r.ok()?)));
    for ((path, raw), route) in readable.zip(routes.iter_mut()) {
        let Action::Proxy(base) = &route.action else {
            if raw.split.as_ref().is_some_and(Vec::is_empty) {
                p.at(&path.key("split"), EMPTY_SPLIT);
            }
            for (key, set) in
                [("sticky", raw.sticky.is_some()), ("pin", raw.pin.is_some()), ("mirror", raw.mirror.is_some())]
            {
                if set {
                    p.at(&path.key(key), format!("`{key}` only applies to routes with a `cluster` or `split`"));
                }
            }
            continue;
        };
        let split = split(raw, base, names, p, &path);
        route.mirror = raw.mirror.as_ref().map(|m| mirror(m, raw, clusters, names, p, &path.key("mirror")));
        route.split = split;
    }
}

fn split(
    raw: &RawRoute,
    base: &ProxyAction,
    names: Option<&[Option<String>]>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> Option<Split> {
    if raw.sticky.is_some() && raw.split.is_none() {
        p.at(&path.key("sticky"), "`sticky` only applies to routes with a `split`");
    }
    if raw.split.is_none() && raw.pin.is_none() {
        return None;
    }
    // Cluster names of `targets`, to resolve pins and find duplicates.
    let mut target_names: Vec<&str> = Vec::new();
    let mut targets: Vec<SplitTarget> = Vec::new();
    match &raw.split {
        Some(list) => {
            let at = path.key("split");
            if list.is_empty() {
                p.at(&at, EMPTY_SPLIT);
            }
            if list.len() > defaults::MAX_SPLIT_TARGETS {
                p.at(&at, format!("at most {} targets, got {}", defaults::MAX_SPLIT_TARGETS, list.len()));
            }
            let mut weights_valid = true;
            for (i, t) in list.iter().enumerate() {
                let at = at.index(i);
                let cluster = cluster_index(&t.cluster, names, p, &at.key("cluster")).unwrap_or(0);
                if let Some(j) = target_names.iter().position(|n| *n == t.cluster) {
                    p.at(
                        &at.key("cluster"),
                        format!("cluster {:?} is already split[{j}]: list each cluster once", t.cluster),
                    );
                }
                weights_valid &= (0..=defaults::MAX_SPLIT_WEIGHT).contains(&t.weight);
                let weight = int_in(p, &at.key("weight"), Some(t.weight), 0..=defaults::MAX_SPLIT_WEIGHT, 0u32);
                target_names.push(&t.cluster);
                targets.push(SplitTarget { action: ProxyAction { cluster, ..base.clone() }, weight });
            }
            if weights_valid && !list.is_empty() && targets.iter().all(|t| t.weight == 0) {
                p.at(&at, "every weight is 0: give at least one target a weight above 0");
            }
        }
        None => {
            target_names.extend(raw.cluster.as_deref());
            targets.push(SplitTarget { action: base.clone(), weight: 1 });
        }
    }
    let sticky = raw.sticky.as_ref().map(|s| sticky(s, p, &path.key("sticky")));
    let mut pins = Vec::new();
    let raw_pins = raw.pin.as_deref().unwrap_or_default();
    if raw_pins.len() > defaults::MAX_SPLIT_TARGETS {
        p.at(&path.key("pin"), format!("at most {} pins, got {}", defaults::MAX_SPLIT_TARGETS, raw_pins.len()));
    }
    for (i, pin) in raw_pins.iter().enumerate() {
        let at = path.key("pin").index(i);
        if !is_token(&pin.header) {
            p.at(&at.key("header"), format!("invalid header name {:?}", pin.header));
        }
        if let Some(value) = pin.value.as_ref().filter(|v| !is_field_value(v)) {
            p.at(&at.key("value"), format!("header value {value:?} contains control characters"));
        }
        let target = match target_names.iter().position(|n| *n == pin.cluster) {
            Some(j) => j,
            None => {
                // A cluster reached only by this pin: a target of weight 0.
                let cluster = cluster_index(&pin.cluster, names, p, &at.key("cluster")).unwrap_or(0);
                target_names.push(&pin.cluster);
                targets.push(SplitTarget { action: ProxyAction { cluster, ..base.clone() }, weight: 0 });
                targets.len() - 1
            }
        };
        pins.push(Pin { header: pin.header.to_ascii_lowercase(), value: pin.value.clone(), target });
    }
    Some(Split { targets, sticky, pins })
}

fn sticky(raw: &RawSticky, p: &mut Problems<'_>, path: &KeyPath) -> StickyKey {
    match (&raw.header, &raw.cookie) {
        (Some(header), None) => {
            if !is_token(header) {
                p.at(&path.key("header"), format!("invalid header name {header:?}"));
            }
            StickyKey::Header(header.to_ascii_lowercase())
        }
        (None, Some(cookie)) => {
            if !is_token(cookie) {
                p.at(&path.key("cookie"), format!("invalid cookie name {cookie:?}"));
            }
            StickyKey::Cookie(cookie.clone())
        }
        (Some(_), Some(_)) => {
            p.at(&path.key("cookie"), "set one of `header` and `cookie`, not both");
            StickyKey::Header(String::new())
        }
        (None, None) => {
            p.at(path, "sticky needs a key: `{ header = \"x-user-id\" }` or `{ cookie = \"uid\" }`");
            StickyKey::Header(String::new())
        }
    }
}

fn mirror(
    raw: &RawMirror,
    route: &RawRoute,
    clusters: &[Cluster],
    names: Option<&[Option<String>]>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> Mirror {
    let at = path.key("cluster");
    let cluster = cluster_index(&raw.cluster, names, p, &at);
    let serving = route
        .cluster
        .iter()
        .chain(route.split.iter().flatten().map(|t| &t.cluster))
        .chain(route.pin.iter().flatten().map(|t| &t.cluster))
        .any(|name| *name == raw.cluster);
    if serving {
        p.at(&at, format!("cluster {:?} already serves this route: mirror to a cluster of its own", raw.cluster));
    }
    let protocol = clusters.iter().find(|c| c.name == raw.cluster).map(|c| c.protocol);
    if let Some(protocol) = protocol.filter(|p| *p != UpstreamProtocol::Http1) {
        let spoken = match protocol {
            UpstreamProtocol::H2 => "h2",
            UpstreamProtocol::Auto | UpstreamProtocol::Http1 => "auto",
        };
        p.at(
            &at,
            format!("cluster {:?} speaks {spoken:?}: a shadow cluster must use protocol = \"http/1.1\"", raw.cluster),
        );
    }
    let percent = match raw.percent {
        None => defaults::MIRROR_PERCENT,
        Some(x) if x.is_finite() && (0.0..=100.0).contains(&x) => x,
        Some(x) => {
            p.at(&path.key("percent"), format!("percent must be from 0 to 100, got {x}"));
            defaults::MIRROR_PERCENT
        }
    };
    let max_in_flight = int_in(
        p,
        &path.key("max_in_flight"),
        raw.max_in_flight,
        1..=defaults::MAX_MIRROR_IN_FLIGHT,
        defaults::MIRROR_MAX_IN_FLIGHT,
    );
    let methods = match &raw.methods {
        None => defaults::MIRROR_METHODS.iter().map(|m| (*m).to_owned()).collect(),
        Some(list) => {
            if list.is_empty() {
                p.at(&path.key("methods"), "methods is empty: list at least one, e.g. [\"GET\"], or remove `mirror`");
            }
            for (i, m) in list.iter().enumerate() {
                if !is_token(m) {
                    p.at(
                        &path.key("methods").index(i),
                        format!("invalid method {m:?}: methods are tokens such as \"GET\""),
                    );
                } else if *m != m.to_ascii_uppercase() {
                    let upper = m.to_ascii_uppercase();
                    p.at(
                        &path.key("methods").index(i),
                        format!("methods are case-sensitive: write {upper:?}, not {m:?}"),
                    );
                }
            }
            list.clone()
        }
    };
    Mirror { cluster: cluster.unwrap_or(0), percent, max_in_flight, methods }
}

/// The index of cluster `name`; `None` (and a problem) when it is unknown, `None` silently when
/// cluster references are unchecked.
fn cluster_index(name: &str, names: Option<&[Option<String>]>, p: &mut Problems<'_>, at: &KeyPath) -> Option<usize> {
    let names = names?;
    let index = names.iter().position(|c| c.as_deref() == Some(name));
    if index.is_none() {
        let known: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
        let known = if known.is_empty() {
            "no clusters are defined".to_owned()
        } else {
            format!("known: {}", known.join(", "))
        };
        p.at(at, format!("unknown cluster {name:?} ({known})"));
    }
    index
}
