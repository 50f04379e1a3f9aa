//! Admission control: priority classes, per-cluster limits and queues, rate limits.
//!
//! Order on the request path: the route's rate limit (429 or a bounded delay), then, for proxied
//! requests, the cluster's priority-class admission (503 shed / overflow, or a bounded wait for a
//! slot). Refusals cost no upstream work and are never retried.

pub mod bucket;
pub mod controller;
pub mod gradient;
pub mod limiter;
pub mod penalty;
pub mod queue_delay;
pub mod ratelimit_headers;
pub mod reserve;
#[cfg(test)]
mod sim;

use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gateway_config::{Config, RateLimit, RateLimitKey, RateLimitMode, RateLimitScope};

use crate::request::Request;
use crate::stats::metrics::RouteMetrics;
use crate::stats::WorkerStats;
use bucket::{Decision, KeyedBuckets, LocalBucket, Rate, SharedBucket};
use limiter::Policy;

/// The limiter policy a config implies.
pub fn policy(config: &Config) -> Policy {
    Policy {
        enabled: config.overload.enabled,
        classes: config.overload.classes.len().clamp(1, limiter::MAX_CLASSES),
        queue_wait_factor: config.overload.queue_wait_factor,
        first_class_reserve: config.overload.first_class_reserve,
        queue_delay_target: config.overload.queue_delay_target,
        queue_delay_interval: config.overload.queue_delay_interval,
    }
}

/// The request's priority class: the route's, or the one named by the priority header when the
/// client is trusted: its address is in `trusted_sources`, or its verified client certificate
/// (mTLS) matches `trusted_identities`. The header is removed before forwarding either way.
pub fn class_of(config: &Config, req: &Request<'_>, route: usize) -> usize {
    let overload = &config.overload;
    let route_class = config.routes.get(route).map_or(overload.default_class, |r| r.priority);
    let Some(header) = &overload.priority_header else { return route_class };
    let peer = req.addr;
    let trusted_identity =
        || req.client.identity().is_some_and(|id| overload.trusted_identities.iter().any(|m| m.matches(id)));
    if !overload.trusted_sources.iter().any(|c| c.contains(peer)) && !trusted_identity() {
        return route_class;
    }
    req.fields
        .first(header.as_bytes())
        .and_then(|v| overload.classes.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(v)))
        .unwrap_or(route_class)
}

/// Nanoseconds on the clock every bucket of the process shares.
pub fn now_nanos() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A route's rate limiter as one worker runs it.
pub enum RouteLimit {
    Route(std::cell::RefCell<LocalBucket>),
    Keyed(std::cell::RefCell<KeyedBuckets<KeyValue>>),
    Shared(Arc<SharedBucket>),
}

/// A per-key bucket key: the client address or a hash of a header's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyValue {
    Ip(IpAddr),
    Hash(u64),
    Missing,
}

impl RouteLimit {
    /// This worker's limiter for `settings`; `shared` is the process bucket for process scope.
    pub fn new(settings: &RateLimit, workers: usize, shared: Option<&Arc<SharedBucket>>) -> Self {
        let rate = Rate { per_second: settings.rate, burst: settings.burst };
        match (&settings.scope, shared) {
            (RateLimitScope::Process, Some(b)) => RouteLimit::Shared(Arc::clone(b)),
            _ => {
                let rate = bucket::split_for_workers(rate, workers);
                match settings.key {
                    RateLimitKey::Route => RouteLimit::Route(std::cell::RefCell::new(LocalBucket::new(rate))),
                    _ => RouteLimit::Keyed(std::cell::RefCell::new(KeyedBuckets::new(rate, settings.max_keys))),
                }
            }
        }
    }

    /// Takes a token for `key`; also says how many keys were evicted to make room for it.
    fn acquire(&self, key: &KeyValue, now: u64, max_wait: Duration) -> (Decision, u64) {
        match self {
            RouteLimit::Route(b) => (b.borrow_mut().acquire(now, max_wait), 0),
            RouteLimit::Keyed(b) => {
                let mut b = b.borrow_mut();
                let before = b.evictions();
                let decision = b.acquire(key, now, max_wait);
                (decision, b.evictions() - before)
            }
            RouteLimit::Shared(b) => (b.acquire(now, max_wait), 0),
        }
    }

    fn remaining(&self, key: &KeyValue, now: u64) -> u32 {
        match self {
            RouteLimit::Route(b) => b.borrow().remaining(now),
            RouteLimit::Keyed(b) => b.borrow().remaining(key, now),
            RouteLimit::Shared(b) => b.remaining(now),
        }
    }

    fn reset_after(&self, key: &KeyValue, now: u64) -> Duration {
        match self {
            RouteLimit::Route(b) => b.borrow().reset_after(now),
            RouteLimit::Keyed(b) => b.borrow().reset_after(key, now),
            RouteLimit::Shared(b) => b.reset_after(now),
        }
    }

    /// The rate this worker actually enforces (advertised in the RateLimit headers).
    fn enforced(&self, settings: &RateLimit, workers: usize) -> Rate {
        let rate = Rate { per_second: settings.rate, burst: settings.burst };
        match self {
            RouteLimit::Shared(_) => rate,
            _ => bucket::split_for_workers(rate, workers),
        }
    }
}

/// Applies a route's rate limit (`limit`, this worker's limiter for `settings`; `workers`:
/// how many share a per-worker split of it). `Err(fields)`: refuse with 429 and these field
/// lines. A delay is counted in `stats`, evicted keys in `route_metrics`.
pub async fn rate_limit(
    limit: &RouteLimit,
    settings: &RateLimit,
    route_name: &str,
    req: &Request<'_>,
    workers: usize,
    stats: &WorkerStats,
    route_metrics: &RouteMetrics,
) -> Result<(), Vec<u8>> {
    let key = match &settings.key {
        RateLimitKey::Route => KeyValue::Missing,
        RateLimitKey::ClientIp => KeyValue::Ip(req.addr),
        RateLimitKey::Header(name) => {
            req.fields.first(name.as_bytes()).map_or(KeyValue::Missing, |v| KeyValue::Hash(bucket::key_hash(v)))
        }
    };
    let max_wait = match settings.mode {
        RateLimitMode::Reject => Duration::ZERO,
        RateLimitMode::Delay { max_delay } => max_delay,
    };
    let now = now_nanos();
    let (decision, evicted) = limit.acquire(&key, now, max_wait);
    route_metrics.rate_limit_evicted(evicted);
    match decision {
        Decision::Admit => Ok(()),
        Decision::Wait(d) => {
            stats.requests_delayed.inc();
            crate::runtime::sleep(d).await;
            Ok(())
        }
        Decision::Reject { retry_after } => {
            let rate = limit.enforced(settings, workers);
            let remaining = limit.remaining(&key, now);
            let reset = limit.reset_after(&key, now);
            let mut headers = Vec::with_capacity(160);
            ratelimit_headers::write_429_headers(&mut headers, route_name, &rate, remaining, reset, retry_after);
            headers.extend_from_slice(b"x-gateway-reason: rate-limited\r\n");
            Err(headers)
        }
    }
}

/// Process-wide buckets of `scope = "process"` limits, by route index (others `None`), carried
/// over from `previous` for routes whose name and settings are unchanged.
pub fn shared_buckets(
    config: &Config,
    previous: Option<(&Config, &[Option<Arc<SharedBucket>>])>,
) -> Vec<Option<Arc<SharedBucket>>> {
    config
        .routes
        .iter()
        .map(|r| {
            let settings = r.rate_limit.as_ref().filter(|l| l.scope == RateLimitScope::Process)?;
            let kept = previous.and_then(|(old, buckets)| {
                let i = old.routes.iter().position(|o| o.name == r.name && o.rate_limit.as_ref() == Some(settings))?;
                buckets.get(i).cloned().flatten()
            });
            Some(kept.unwrap_or_else(|| {
                Arc::new(SharedBucket::new(Rate { per_second: settings.rate, burst: settings.burst }))
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_per_key_table_counts_the_keys_it_evicts() {
        let settings = RateLimit {
            rate: 1.0,
            burst: 1,
            key: RateLimitKey::ClientIp,
            mode: RateLimitMode::Reject,
            scope: RateLimitScope::Worker,
            max_keys: 2,
        };
        let limit = RouteLimit::new(&settings, 1, None);
        let ip = |n: u8| KeyValue::Ip(IpAddr::from([10, 0, 0, n]));
        let now = now_nanos();
        let evicted: u64 = (1..=5).map(|n| limit.acquire(&ip(n), now, Duration::ZERO).1).sum();
        assert_eq!(evicted, 3, "two keys fit; each of the three others evicts one");
        let route = RouteLimit::new(&RateLimit { key: RateLimitKey::Route, ..settings }, 1, None);
        assert_eq!(route.acquire(&KeyValue::Missing, now, Duration::ZERO).1, 0);
    }
}
