//! `[overload]`: priority classes, the trusted priority header and the queue wait factor.

use std::collections::HashMap;
use std::time::Duration;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::Overload;
use crate::problems::Problems;
use crate::raw::RawOverload;

use super::cidr::parse_cidr;
use super::fields::{check_name, duration, is_token};

/// Headers that describe the connection or the message framing: a priority header with one of
/// these names would be removed or reinterpreted by HTTP itself.
pub(super) const RESERVED_HEADERS: [&str; 9] = [
    "connection",
    "content-length",
    "transfer-encoding",
    "host",
    "te",
    "upgrade",
    "keep-alive",
    "trailer",
    "proxy-connection",
];

/// Converts `[overload]`. `classes` holds the names as written (even invalid ones, so that
/// route references can still be checked against them); `default_class` is 0 when `classes`
/// is empty (already reported).
pub(super) fn convert(raw: &RawOverload, p: &mut Problems<'_>, path: &KeyPath) -> Overload {
    let classes: Vec<String> = match &raw.classes {
        Some(classes) => classes.clone(),
        None => defaults::OVERLOAD_CLASSES.iter().map(|c| (*c).to_owned()).collect(),
    };
    check_classes(&classes, p, &path.key("classes"));
    let default_class = match &raw.default_class {
        None => classes
            .iter()
            .position(|c| c == defaults::OVERLOAD_DEFAULT_CLASS)
            .unwrap_or_else(|| classes.len().saturating_sub(1)),
        Some(name) => class_index(&classes, name).unwrap_or_else(|message| {
            p.at(&path.key("default_class"), message);
            0
        }),
    };
    let priority_header = raw.priority_header.as_ref().map(|name| {
        let lower = name.to_ascii_lowercase();
        if !is_token(name) {
            p.at(&path.key("priority_header"), format!("invalid header name {name:?}"));
        } else if RESERVED_HEADERS.contains(&lower.as_str()) {
            p.at(
                &path.key("priority_header"),
                format!("{name} is a connection or framing header and cannot carry a priority: choose another name, e.g. \"x-gateway-priority\""),
            );
        }
        lower
    });
    let mut trusted_sources = Vec::with_capacity(raw.trusted_sources.len());
    for (i, text) in raw.trusted_sources.iter().enumerate() {
        match parse_cidr(text) {
            Ok(cidr) => trusted_sources.push(cidr),
            Err(message) => p.at(&path.key("trusted_sources").index(i), message),
        }
    }
    let mut trusted_identities = Vec::with_capacity(raw.trusted_identities.len());
    for (i, text) in raw.trusted_identities.iter().enumerate() {
        if let Some(m) = super::routes::identity_match(text, p, &path.key("trusted_identities").index(i)) {
            trusted_identities.push(m);
        }
    }
    if !raw.trusted_identities.is_empty() && raw.priority_header.is_none() {
        p.at(
            &path.key("trusted_identities"),
            "trusted_identities has no effect without priority_header: set priority_header, or remove trusted_identities",
        );
    }
    if !raw.trusted_sources.is_empty() && raw.priority_header.is_none() {
        p.at(
            &path.key("trusted_sources"),
            "trusted_sources has no effect without priority_header: set priority_header, or remove trusted_sources",
        );
    }
    let queue_wait_factor = raw.queue_wait_factor.unwrap_or(defaults::QUEUE_WAIT_FACTOR);
    if !(0.0..=defaults::MAX_QUEUE_WAIT_FACTOR).contains(&queue_wait_factor) {
        p.at(
            &path.key("queue_wait_factor"),
            format!(
                "queue_wait_factor must be between 0.0 and {:.1}, got {queue_wait_factor}",
                defaults::MAX_QUEUE_WAIT_FACTOR
            ),
        );
    }
    let queue_delay_target =
        duration(p, &path.key("queue_delay_target"), raw.queue_delay_target.as_ref(), defaults::QUEUE_DELAY_TARGET);
    let queue_delay_interval = duration(
        p,
        &path.key("queue_delay_interval"),
        raw.queue_delay_interval.as_ref(),
        defaults::QUEUE_DELAY_INTERVAL,
    );
    if !(Duration::from_millis(1)..=Duration::from_secs(10)).contains(&queue_delay_target) {
        p.at(
            &path.key("queue_delay_target"),
            format!("queue_delay_target must be between 1ms and 10s, got {queue_delay_target:?}"),
        );
    } else if !(Duration::from_millis(1)..=Duration::from_secs(60)).contains(&queue_delay_interval) {
        p.at(
            &path.key("queue_delay_interval"),
            format!("queue_delay_interval must be between 1ms and 60s, got {queue_delay_interval:?}"),
        );
    } else if queue_delay_target >= queue_delay_interval {
        p.at(
            &path.key("queue_delay_target"),
            format!(
                "queue_delay_target ({queue_delay_target:?}) must be shorter than queue_delay_interval ({queue_delay_interval:?}): the signal is a standing queue over a whole interval"
            ),
        );
    }
    Overload {
        enabled: raw.enabled.unwrap_or(defaults::OVERLOAD_ENABLED),
        classes,
        default_class,
        priority_header,
        trusted_sources,
        trusted_identities,
        queue_wait_factor,
        first_class_reserve: raw.first_class_reserve.unwrap_or(defaults::FIRST_CLASS_RESERVE),
        queue_delay_target,
        queue_delay_interval,
    }
}

/// The index of class `name`, or a message naming the known classes.
pub(super) fn class_index(classes: &[String], name: &str) -> Result<usize, String> {
    classes.iter().position(|c| c == name).ok_or_else(|| {
        let mut known: Vec<&str> = Vec::with_capacity(classes.len());
        for class in classes {
            if !known.contains(&class.as_str()) {
                known.push(class);
            }
        }
        let known =
            if known.is_empty() { "no classes are defined".to_owned() } else { format!("known: {}", known.join(", ")) };
        format!("unknown class {name:?} ({known})")
    })
}

/// 1 to [`defaults::MAX_CLASSES`] unique names.
fn check_classes(classes: &[String], p: &mut Problems<'_>, path: &KeyPath) {
    if classes.is_empty() || classes.len() > defaults::MAX_CLASSES {
        p.at(
            path,
            format!(
                "classes must list 1 to {} priority classes, most important first; got {}",
                defaults::MAX_CLASSES,
                classes.len()
            ),
        );
    }
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, class) in classes.iter().enumerate() {
        check_name(p, &path.index(i), class);
        if let Some(earlier) = first.get(class.as_str()) {
            p.at(&path.index(i), format!("duplicate class {class:?} (already classes[{earlier}])"));
        } else {
            first.insert(class, i);
        }
    }
}
