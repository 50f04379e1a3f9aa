//! Choosing the cluster of a request on a route with a split (or pins): the first matching pin,
//! else the target that the sticky key's stable hash falls on, else a target at random by
//! weight. Chosen at dispatch, before admission (which is per cluster); the forwarders only see
//! the chosen target's [`ProxyAction`].

use std::sync::Arc;

use gateway_config::{ProxyAction, Route, Split, StickyKey};

use crate::stats::metrics::{SplitMetrics, SplitReason};
use crate::upstream::balancer::XorShift;

/// A request's header fields, as the split looks at them.
pub trait Headers {
    /// Calls `f` on each value of field `name` (lower-case), in order, until it returns true;
    /// whether one did.
    fn any_value(&self, name: &str, f: &mut dyn FnMut(&[u8]) -> bool) -> bool;
}

/// The action for a request on `route`: `proxy` (the route's own) unless the route splits,
/// then the chosen target's, counted in `counters` (indexed like the split's targets).
pub fn action<'a>(
    route: &'a Route,
    proxy: &'a ProxyAction,
    counters: &[Arc<SplitMetrics>],
    headers: &impl Headers,
    rng: &XorShift,
) -> &'a ProxyAction {
    let Some(split) = route.split.as_ref() else { return proxy };
    let (target, reason) = choose(split, headers, rng);
    if let Some(m) = counters.get(target) {
        m.count(reason);
    }
    split.targets.get(target).map_or(proxy, |t| &t.action)
}

/// The index of the target in `split.targets` that serves a request, and why.
pub fn choose(split: &Split, headers: &impl Headers, rng: &XorShift) -> (usize, SplitReason) {
    for pin in &split.pins {
        let want = pin.value.as_deref().map(str::as_bytes);
        if headers.any_value(&pin.header, &mut |v| want.is_none_or(|w| v == w)) {
            return (pin.target, SplitReason::Pin);
        }
    }
    let total: u64 = split.targets.iter().map(|t| u64::from(t.weight)).sum();
    if total == 0 {
        // Never as loaded (some weight is above 0).
        return (0, SplitReason::Weight);
    }
    match split.sticky.as_ref().and_then(|key| sticky_hash(key, headers)) {
        Some(hash) => (by_weight(split, scale(hash, total)), SplitReason::Sticky),
        None => (by_weight(split, scale(rng.next_u64(), total)), SplitReason::Weight),
    }
}

/// A stable 64-bit hash of a sticky key: the one consistent hashing uses (FNV-1a and the
/// SplitMix64 finalizer), with no per-process seed, so one user lands on one target in every
/// worker and every gateway.
pub use crate::upstream::hashkey::hash_bytes as stable_hash;

/// `hash` mapped uniformly onto `0..total` by multiply-shift (`total` > 0).
fn scale(hash: u64, total: u64) -> u64 {
    ((u128::from(hash) * u128::from(total)) >> 64) as u64
}

/// The target whose cumulative weight range holds `point` (`point` < the sum of the weights).
fn by_weight(split: &Split, point: u64) -> usize {
    let mut upper = 0u64;
    for (i, t) in split.targets.iter().enumerate() {
        upper += u64::from(t.weight);
        if point < upper {
            return i;
        }
    }
    0
}

/// The hash of the request's sticky key; `None` when it has none (or an empty one).
fn sticky_hash(key: &StickyKey, headers: &impl Headers) -> Option<u64> {
    let mut hash = None;
    match key {
        StickyKey::Header(name) => {
            // The first field line decides, even when it is empty (no key).
            headers.any_value(name, &mut |v| {
                hash = (!v.is_empty()).then(|| stable_hash(v));
                true
            });
        }
        StickyKey::Cookie(name) => {
            headers.any_value("cookie", &mut |v| match crate::upstream::hashkey::cookie_value(v, name.as_bytes()) {
                Some(value) => {
                    hash = (!value.is_empty()).then(|| stable_hash(value));
                    true
                }
                None => false,
            });
        }
    }
    hash
}

impl Headers for crate::request::Fields<'_> {
    fn any_value(&self, name: &str, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.any(name.as_bytes(), f)
    }
}

impl Headers for http::HeaderMap {
    fn any_value(&self, name: &str, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.get_all(name).iter().any(|v| f(v.as_bytes()))
    }
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
