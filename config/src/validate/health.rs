//! `clusters[].health_check`, `outlier_detection`, `all_unhealthy` and `hash_key`: how a
//! cluster notices broken endpoints and which endpoint a request may go to.

use std::ops::RangeInclusive;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{AllUnhealthy, Balancer, HashKey, HealthCheck, OutlierDetection};
use crate::problems::Problems;
use crate::raw::{IntOrStr, RawCluster, RawHealthCheck, RawOutlierDetection};

use super::fields::{check_path, choice, duration, int_in, is_token};

/// The resilience settings of cluster `c` at `path`, given its validated `balancer`.
pub(super) struct Resilience {
    pub health_check: Option<HealthCheck>,
    pub outlier_detection: OutlierDetection,
    pub all_unhealthy: AllUnhealthy,
    pub hash_key: Option<HashKey>,
}

pub(super) fn convert(c: &RawCluster, balancer: Balancer, p: &mut Problems<'_>, path: &KeyPath) -> Resilience {
    Resilience {
        health_check: c.health_check.as_ref().map(|h| health_check(h, p, &path.key("health_check"))),
        outlier_detection: outlier(&c.outlier_detection, p, &path.key("outlier_detection")),
        all_unhealthy: choice(
            p,
            &path.key("all_unhealthy"),
            c.all_unhealthy.as_ref(),
            &[("fail", AllUnhealthy::Fail), ("panic", AllUnhealthy::Panic)],
            defaults::ALL_UNHEALTHY,
        ),
        hash_key: hash_key(c.hash_key.as_deref(), balancer, p, path),
    }
}

fn health_check(raw: &RawHealthCheck, p: &mut Problems<'_>, path: &KeyPath) -> HealthCheck {
    let check_path_text = match &raw.path {
        Some(text) => {
            if let Err(message) = check_path(text) {
                p.at(&path.key("path"), message);
            }
            text.clone()
        }
        None => {
            p.at(path, "health_check needs a `path` to request, e.g. path = \"/healthz\"");
            String::new()
        }
    };
    let interval = duration(p, &path.key("interval"), raw.interval.as_ref(), defaults::HEALTH_INTERVAL);
    if !defaults::HEALTH_INTERVAL_RANGE.contains(&interval) {
        p.at(&path.key("interval"), format!("interval must be between 100ms and 1h, got {interval:?}"));
    }
    let timeout = duration(p, &path.key("timeout"), raw.timeout.as_ref(), defaults::HEALTH_TIMEOUT);
    if timeout >= interval {
        // Point at whichever of the two the operator wrote.
        let key = if raw.timeout.is_some() { "timeout" } else { "interval" };
        p.at(
            &path.key(key),
            format!(
                "timeout ({timeout:?}{}) must be shorter than interval ({interval:?}): a check ends before the next starts",
                if raw.timeout.is_none() { ", the default" } else { "" }
            ),
        );
    }
    let threshold = |p: &mut Problems<'_>, key: &str, raw: Option<i64>, default: u32| {
        int_in(p, &path.key(key), raw, defaults::HEALTH_THRESHOLD_RANGE, default)
    };
    let host = raw.host.as_ref().map(|h| {
        let ok = !h.is_empty()
            && h.len() <= 255
            && h.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':' | b'[' | b']' | b'_'));
        if !ok {
            p.at(
                &path.key("host"),
                format!("invalid host {h:?}: expected a host name with an optional port, e.g. \"api.internal\""),
            );
        }
        h.clone()
    });
    HealthCheck {
        path: check_path_text,
        interval,
        timeout,
        healthy_threshold: threshold(p, "healthy_threshold", raw.healthy_threshold, defaults::HEALTH_HEALTHY_THRESHOLD),
        unhealthy_threshold: threshold(
            p,
            "unhealthy_threshold",
            raw.unhealthy_threshold,
            defaults::HEALTH_UNHEALTHY_THRESHOLD,
        ),
        expected_statuses: statuses(raw.expected_statuses.as_deref(), p, &path.key("expected_statuses")),
        host,
    }
}

/// `[200, "300-399"]`: codes and inclusive ranges within 100..=599.
fn statuses(raw: Option<&[IntOrStr]>, p: &mut Problems<'_>, path: &KeyPath) -> Vec<RangeInclusive<u16>> {
    let Some(raw) = raw else { return vec![defaults::HEALTH_EXPECTED_STATUSES] };
    if raw.is_empty() {
        p.at(path, "expected_statuses is empty: list at least one status or range, e.g. [200, \"300-399\"]");
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, item) in raw.iter().enumerate() {
        match status_range(item) {
            Ok(range) => out.push(range),
            Err(message) => p.at(&path.index(i), message),
        }
    }
    out
}

fn status_range(item: &IntOrStr) -> Result<RangeInclusive<u16>, String> {
    let code = |text: &str| -> Result<u16, String> {
        text.trim()
            .parse::<u16>()
            .ok()
            .filter(|c| (100..=599).contains(c))
            .ok_or_else(|| format!("invalid status {text:?}: expected a code from 100 to 599"))
    };
    match item {
        IntOrStr::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|c| (100..=599).contains(c))
            .map(|c| c..=c)
            .ok_or_else(|| format!("invalid status {n}: expected a code from 100 to 599")),
        IntOrStr::Str(s) => match s.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (code(lo)?, code(hi)?);
                if lo > hi {
                    return Err(format!("invalid range {s:?}: the first code must not exceed the second"));
                }
                Ok(lo..=hi)
            }
            None => code(s).map(|c| c..=c),
        },
    }
}

fn outlier(raw: &RawOutlierDetection, p: &mut Problems<'_>, path: &KeyPath) -> OutlierDetection {
    let consecutive = |p: &mut Problems<'_>, key: &str, raw: Option<i64>, default: u32| {
        int_in(p, &path.key(key), raw, defaults::OUTLIER_CONSECUTIVE_RANGE, default)
    };
    let base = duration(
        p,
        &path.key("base_ejection_time"),
        raw.base_ejection_time.as_ref(),
        defaults::OUTLIER_BASE_EJECTION_TIME,
    );
    let max = duration(
        p,
        &path.key("max_ejection_time"),
        raw.max_ejection_time.as_ref(),
        defaults::OUTLIER_MAX_EJECTION_TIME,
    );
    if max < base {
        let key = if raw.max_ejection_time.is_some() { "max_ejection_time" } else { "base_ejection_time" };
        p.at(&path.key(key), format!("max_ejection_time ({max:?}) must be at least base_ejection_time ({base:?})"));
    }
    OutlierDetection {
        enabled: raw.enabled.unwrap_or(defaults::OUTLIER_ENABLED),
        consecutive_5xx: consecutive(p, "consecutive_5xx", raw.consecutive_5xx, defaults::OUTLIER_CONSECUTIVE_5XX),
        consecutive_gateway_errors: consecutive(
            p,
            "consecutive_gateway_errors",
            raw.consecutive_gateway_errors,
            defaults::OUTLIER_CONSECUTIVE_GATEWAY_ERRORS,
        ),
        base_ejection_time: base,
        max_ejection_time: max.max(base),
        max_ejection_percent: int_in(
            p,
            &path.key("max_ejection_percent"),
            raw.max_ejection_percent,
            0..=100,
            defaults::OUTLIER_MAX_EJECTION_PERCENT,
        ),
    }
}

/// `hash_key`: required with `balancer = "maglev"`, rejected with any other balancer.
fn hash_key(raw: Option<&str>, balancer: Balancer, p: &mut Problems<'_>, path: &KeyPath) -> Option<HashKey> {
    let Some(text) = raw else {
        if balancer == Balancer::Maglev {
            p.at(
                &path.key("balancer"),
                "balancer \"maglev\" needs a `hash_key`: \"client_ip\", \"header:<name>\" or \"cookie:<name>\"",
            );
        }
        return None;
    };
    let at = path.key("hash_key");
    if balancer != Balancer::Maglev {
        p.at(&at, "hash_key is used only by balancer = \"maglev\": remove it or set the balancer");
        return None;
    }
    let key = match text.split_once(':') {
        None if text == "client_ip" => Some(HashKey::ClientIp),
        Some(("header", name)) if is_token(name) => Some(HashKey::Header(name.to_ascii_lowercase())),
        Some(("cookie", name)) if is_token(name) => Some(HashKey::Cookie(name.to_owned())),
        _ => None,
    };
    if key.is_none() {
        p.at(&at, format!("invalid hash_key {text:?}: expected \"client_ip\", \"header:<name>\" or \"cookie:<name>\""));
    }
    key
}
