//! Upstream resilience settings of a cluster: active health checks, passive outlier detection,
//! what to do when no endpoint is eligible, and the consistent-hashing key.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::ser;

/// `clusters[].health_check`: active HTTP/1.1 checks, run by one checker per process (never
/// per worker, so health traffic does not grow with the worker count).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HealthCheck {
    /// The request path (`GET path HTTP/1.1`), starting with `/`.
    pub path: String,
    /// Time between two checks of one endpoint; 100ms to 1h.
    #[serde(serialize_with = "ser::duration")]
    pub interval: Duration,
    /// Connecting and reading the status line must finish within this; below `interval`.
    #[serde(serialize_with = "ser::duration")]
    pub timeout: Duration,
    /// Consecutive passing checks that make an unhealthy endpoint healthy; 1 to 100.
    pub healthy_threshold: u32,
    /// Consecutive failing checks that make a healthy endpoint unhealthy; 1 to 100.
    pub unhealthy_threshold: u32,
    /// Statuses that pass, as inclusive ranges (a single code is a one-code range); each
    /// within 100..=599, at least one.
    #[serde(serialize_with = "ser::status_ranges")]
    pub expected_statuses: Vec<RangeInclusive<u16>>,
    /// The `Host` field sent; `None`: the endpoint's name as written in `endpoints`.
    pub host: Option<String>,
}

impl HealthCheck {
    /// Whether `status` counts as a passing check.
    pub fn expects(&self, status: u16) -> bool {
        self.expected_statuses.iter().any(|r| r.contains(&status))
    }
}

/// `clusters[].outlier_detection`: passive ejection of endpoints that keep failing, counted
/// per worker (shared-nothing: each worker ejects on what it saw itself).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutlierDetection {
    /// When false, no endpoint is ever ejected passively (nor suspect: see below).
    pub enabled: bool,
    /// Consecutive 5xx responses that eject an endpoint; 0 turns this rule off.
    pub consecutive_5xx: u32,
    /// Consecutive gateway errors (connect failure, reset, timeout, protocol error) that eject
    /// an endpoint; 0 turns this rule off.
    pub consecutive_gateway_errors: u32,
    /// An ejection lasts this times the number of times the endpoint was ejected... Also how
    /// long an endpoint whose last try ended in a gateway error stays suspect (unless it answers
    /// first): requests that could not be retried after a failure go to another endpoint.
    #[serde(serialize_with = "ser::duration")]
    pub base_ejection_time: Duration,
    /// ...capped at this (at least `base_ejection_time`).
    #[serde(serialize_with = "ser::duration")]
    pub max_ejection_time: Duration,
    /// At most `floor(endpoints * percent / 100)` endpoints of the cluster are ejected at once
    /// (0 to 100), so a one-endpoint cluster is never ejected passively.
    pub max_ejection_percent: u8,
}

/// `clusters[].all_unhealthy`: what a request does when no endpoint is eligible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllUnhealthy {
    /// Answer 503 at once (`x-gateway-reason: no-healthy-upstream`).
    Fail,
    /// Pick among all endpoints as if they were healthy (counted).
    Panic,
}

/// `clusters[].hash_key`: what a consistent-hashing balancer hashes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HashKey {
    /// The client's IP address (the TCP peer).
    ClientIp,
    /// The value of this request header (name in lower case).
    Header(String),
    /// The value of this cookie (name as written, matched exactly).
    Cookie(String),
}

impl Default for OutlierDetection {
    /// The defaults of [`crate::defaults`]: on, 5 consecutive 5xx or gateway errors, 30s
    /// ejections up to 300s, at most half of a cluster ejected.
    fn default() -> Self {
        use crate::defaults as d;
        Self {
            enabled: d::OUTLIER_ENABLED,
            consecutive_5xx: d::OUTLIER_CONSECUTIVE_5XX,
            consecutive_gateway_errors: d::OUTLIER_CONSECUTIVE_GATEWAY_ERRORS,
            base_ejection_time: d::OUTLIER_BASE_EJECTION_TIME,
            max_ejection_time: d::OUTLIER_MAX_EJECTION_TIME,
            max_ejection_percent: d::OUTLIER_MAX_EJECTION_PERCENT,
        }
    }
}
