//! `routes[].retry` (when and how a failed try is retried) and `clusters[].retry_budget` (how
//! many retries may be in flight).

use std::time::Duration;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Caps, RetryBudget, RetryOn, RetryPolicy};
use crate::problems::Problems;
use crate::raw::{RawRetry, RawRetryBudget};
use crate::units::show_duration;

use super::fields::{duration, int_in, size};

/// Converts a route's retry policy; `timeout` is the route timeout (a try never outlasts it).
pub(super) fn policy(raw: Option<&RawRetry>, timeout: Duration, p: &mut Problems<'_>, path: &KeyPath) -> RetryPolicy {
    let default = RawRetry::default();
    let raw = raw.unwrap_or(&default);
    let retry_on = match &raw.retry_on {
        None => defaults::RETRY_ON,
        Some(names) => {
            let mut on = RetryOn::empty();
            for (i, name) in names.iter().enumerate() {
                match RetryOn::NAMES.iter().find(|(n, _)| *n == name.as_str()) {
                    Some((_, flag)) => on = on.union(*flag),
                    None => {
                        let known: Vec<&str> = RetryOn::NAMES.iter().map(|(n, _)| *n).collect();
                        p.at(
                            &path.key("retry_on").index(i),
                            format!("unknown retry condition {name:?} (known: {})", known.join(", ")),
                        );
                    }
                }
            }
            on
        }
    };
    let num_retries = int_in(
        p,
        &path.key("num_retries"),
        raw.num_retries,
        0..=defaults::MAX_NUM_RETRIES,
        defaults::RETRY_NUM_RETRIES,
    );
    let per_try_timeout =
        raw.per_try_timeout.as_ref().map(|t| duration(p, &path.key("per_try_timeout"), Some(t), timeout));
    match per_try_timeout {
        Some(t) if t > timeout => p.at(
            &path.key("per_try_timeout"),
            format!(
                "per_try_timeout ({}) is longer than the route timeout ({}): no try can use it",
                show_duration(t),
                show_duration(timeout)
            ),
        ),
        _ => {}
    }
    let mut retriable_status_codes = Vec::new();
    for (i, code) in raw.retriable_status_codes.iter().flatten().enumerate() {
        match u16::try_from(*code) {
            Ok(c) if (500..=599).contains(&c) => {
                if !retriable_status_codes.contains(&c) {
                    retriable_status_codes.push(c);
                }
            }
            _ => p.at(
                &path.key("retriable_status_codes").index(i),
                format!("only 5xx statuses can be retried, got {code}: a 4xx is the client's to fix"),
            ),
        }
    }
    let listed = retry_on.contains(RetryOn::RETRIABLE_STATUS_CODES);
    if listed && raw.retriable_status_codes.as_ref().is_none_or(Vec::is_empty) {
        p.at(
            &path.key("retriable_status_codes"),
            "`retry_on` has \"retriable-status-codes\": list the statuses, e.g. retriable_status_codes = [503]",
        );
    } else if !listed && raw.retriable_status_codes.is_some() {
        p.at(
            &path.key("retriable_status_codes"),
            "retriable_status_codes only applies with \"retriable-status-codes\" in `retry_on`",
        );
    }
    let backoff_path = path.key("backoff");
    let backoff = raw.backoff.as_ref();
    let backoff_base =
        duration(p, &backoff_path.key("base"), backoff.and_then(|b| b.base.as_ref()), defaults::RETRY_BACKOFF_BASE);
    let backoff_max = duration(
        p,
        &backoff_path.key("max"),
        backoff.and_then(|b| b.max.as_ref()),
        defaults::RETRY_BACKOFF_MAX.max(backoff_base),
    );
    if backoff_base.is_zero() {
        p.at(&backoff_path.key("base"), "backoff base must be greater than 0 (retrying at once only adds load)");
    }
    if backoff_max < backoff_base {
        p.at(
            &backoff_path.key("max"),
            format!(
                "backoff max ({}) must not be below base ({})",
                show_duration(backoff_max),
                show_duration(backoff_base)
            ),
        );
    }
    let max_replay_bytes =
        size(p, &path.key("max_replay_bytes"), raw.max_replay_bytes.as_ref(), defaults::RETRY_MAX_REPLAY_BYTES);
    if max_replay_bytes > defaults::MAX_REPLAY_BYTES {
        p.at(
            &path.key("max_replay_bytes"),
            format!(
                "max_replay_bytes may be at most {} bytes (16MiB), got {max_replay_bytes}",
                defaults::MAX_REPLAY_BYTES
            ),
        );
    }
    RetryPolicy {
        retry_on,
        num_retries,
        per_try_timeout,
        retriable_status_codes,
        backoff_base,
        backoff_max,
        max_replay_bytes,
    }
}

/// Converts a cluster's retry budget.
pub(super) fn budget(raw: &RawRetryBudget, caps: &Caps, p: &mut Problems<'_>, path: &KeyPath) -> RetryBudget {
    let percent = raw.percent.unwrap_or(defaults::RETRY_BUDGET_PERCENT);
    if !(0.0..=100.0).contains(&percent) {
        p.at(&path.key("percent"), format!("percent must be between 0 and 100, got {percent}"));
    }
    let min_concurrent = int_in(
        p,
        &path.key("min_concurrent"),
        raw.min_concurrent,
        0..=defaults::MAX_RETRIES_CAP,
        defaults::RETRY_BUDGET_MIN_CONCURRENT.min(caps.max_retries),
    );
    if min_concurrent > caps.max_retries {
        p.at(
            &path.key("min_concurrent"),
            format!(
                "min_concurrent ({min_concurrent}) exceeds caps.max_retries ({}), which bounds every retry",
                caps.max_retries
            ),
        );
    }
    RetryBudget { percent: percent.clamp(0.0, 100.0), min_concurrent }
}
