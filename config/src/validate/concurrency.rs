//! `clusters[].caps` and `clusters[].adaptive_concurrency`: how much one worker may send to a
//! cluster at once.

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{AdaptiveConcurrency, Caps};
use crate::problems::Problems;
use crate::raw::{RawAdaptiveConcurrency, RawCaps};

use super::fields::{duration, int_in};

/// Converts a cluster's circuit-breaker caps.
pub(super) fn caps(raw: &RawCaps, p: &mut Problems<'_>, path: &KeyPath) -> Caps {
    let cap = |p: &mut Problems<'_>, key: &str, value: Option<i64>, default: usize| {
        int_in(p, &path.key(key), value, 1..=defaults::MAX_CAP, default)
    };
    Caps {
        max_connections: cap(p, "max_connections", raw.max_connections, defaults::CAPS_MAX_CONNECTIONS),
        max_pending: cap(p, "max_pending", raw.max_pending, defaults::CAPS_MAX_PENDING),
        max_requests: cap(p, "max_requests", raw.max_requests, defaults::CAPS_MAX_REQUESTS),
        max_retries: int_in(
            p,
            &path.key("max_retries"),
            raw.max_retries,
            0..=defaults::MAX_RETRIES_CAP,
            defaults::CAPS_MAX_RETRIES,
        ),
    }
}

/// Converts a cluster's adaptive concurrency limit: `1 <= min_limit <= initial_limit <=
/// caps.max_requests` (the caps are at `caps_path`), whether or not it is enabled, so that
/// enabling it later cannot make a valid file invalid.
pub(super) fn adaptive(
    raw: &RawAdaptiveConcurrency,
    caps: &Caps,
    raw_caps: &RawCaps,
    p: &mut Problems<'_>,
    path: &KeyPath,
    caps_path: &KeyPath,
    classes_named: bool,
) -> AdaptiveConcurrency {
    let initial_limit = int_in(
        p,
        &path.key("initial_limit"),
        raw.initial_limit,
        1..=defaults::MAX_CAP,
        // The default never exceeds a small cap.
        defaults::ADAPTIVE_INITIAL_LIMIT.min(caps.max_requests.max(1)),
    );
    let min_limit = int_in(
        p,
        &path.key("min_limit"),
        raw.min_limit,
        1..=defaults::MAX_CAP,
        defaults::ADAPTIVE_MIN_LIMIT.min(initial_limit),
    );
    if min_limit > initial_limit {
        // Point at whichever of the two the operator wrote.
        let key = if raw.min_limit.is_some() { "min_limit" } else { "initial_limit" };
        p.at(&path.key(key), format!("min_limit ({min_limit}) must not exceed initial_limit ({initial_limit})"));
    }
    if initial_limit > caps.max_requests {
        let message = format!(
            "initial_limit ({initial_limit}{}) must not exceed caps.max_requests ({}): the adaptive limit stays within the cap",
            if raw.initial_limit.is_none() { ", the default: set adaptive_concurrency.initial_limit" } else { "" },
            caps.max_requests
        );
        let at = if raw.initial_limit.is_some() || raw_caps.max_requests.is_none() {
            path.key("initial_limit")
        } else {
            caps_path.key("max_requests")
        };
        p.at(&at, message);
    }
    let tolerance = raw.tolerance.unwrap_or(defaults::ADAPTIVE_TOLERANCE);
    if !(tolerance > 0.0 && tolerance <= defaults::MAX_TOLERANCE) {
        p.at(
            &path.key("tolerance"),
            format!("tolerance must be greater than 0 and at most {:.1}, got {tolerance}", defaults::MAX_TOLERANCE),
        );
    }
    let probe_interval =
        duration(p, &path.key("probe_interval"), raw.probe_interval.as_ref(), defaults::ADAPTIVE_PROBE_INTERVAL);
    if !(defaults::MIN_PROBE_INTERVAL..=defaults::MAX_PROBE_INTERVAL).contains(&probe_interval) {
        p.at(
            &path.key("probe_interval"),
            format!("probe_interval must be between {:?} and 1h, got {probe_interval:?}", defaults::MIN_PROBE_INTERVAL),
        );
    }
    AdaptiveConcurrency {
        enabled: raw.enabled.unwrap_or(defaults::ADAPTIVE_ENABLED && classes_named),
        initial_limit,
        min_limit,
        tolerance,
        probe_interval,
    }
}
