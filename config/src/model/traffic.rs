//! Traffic shaping of a proxying route: weighted splits (canary), sticky keys, pins and
//! mirroring (shadow traffic).

use super::ProxyAction;

/// Several clusters for one route: a request goes to the first matching pin's cluster, else to
/// a target chosen by weight (by a stable hash of the sticky key when the request carries one,
/// at random otherwise).
///
/// As loaded: `targets` is non-empty, its clusters are distinct, and `targets[0].action` equals
/// the route's `Action::Proxy` (so code that ignores the split sends everything to the first
/// target). Targets differ only in `action.cluster`. The weights sum to more than 0; a cluster
/// reachable only by a pin is a target of weight 0.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Split {
    /// The weighted targets in file order, then clusters named only by pins (weight 0). A route
    /// with `cluster` and pins has that cluster first, with weight 1.
    pub targets: Vec<SplitTarget>,
    /// `None`: every unpinned request is split at random by weight.
    pub sticky: Option<StickyKey>,
    /// Checked in order; the first that matches decides.
    pub pins: Vec<Pin>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SplitTarget {
    pub action: ProxyAction,
    /// 0 to 10 000.
    pub weight: u32,
}

/// What keeps one client on one target: the same key value always picks the same target
/// (a stable 64-bit hash, the same in every worker and process, for a given set of weights).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StickyKey {
    /// A request header (lower-case name); its first value is the key.
    Header(String),
    /// A cookie name (case-sensitive); its first occurrence is the key.
    Cookie(String),
}

/// A request with header `header` (lower-case; with value exactly `value` when given) goes to
/// `targets[target]`, whatever the weights.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pin {
    pub header: String,
    pub value: Option<String>,
    /// Index into [`Split::targets`].
    pub target: usize,
}

/// Copies of the route's requests sent, fire and forget, to a shadow cluster; its answers are
/// read and discarded. Only requests without a body are mirrored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Mirror {
    /// Index into `Config::clusters`: an HTTP/1.1 cluster that is none of the route's targets.
    pub cluster: usize,
    /// Share of eligible requests mirrored, 0.0 to 100.0.
    pub percent: f64,
    /// Copies in flight per worker for this route (1 to 10 000); beyond it copies are dropped
    /// and counted.
    pub max_in_flight: usize,
    /// Methods mirrored (upper-case tokens, non-empty).
    pub methods: Vec<String>,
}
