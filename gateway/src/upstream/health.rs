//! Active health state of every endpoint, process-wide.
//!
//! One checker per process ([`crate::health_check`]) writes it; every worker reads it on the
//! request path with a relaxed load (single writer, no lock). Entries live in the
//! [`HealthRegistry`], keyed by (cluster name, endpoint address), so that config reloads, which
//! rebuild the workers' cluster states, keep each endpoint's health: a worker's new state looks
//! its endpoints up here. New endpoints start healthy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// One endpoint's active health. Written by the checker thread only.
#[derive(Debug)]
pub struct EndpointHealth {
    healthy: AtomicBool,
    /// Checked at least once since checks were (re)configured.
    checked: AtomicBool,
    consecutive_ok: AtomicU32,
    consecutive_failed: AtomicU32,
    /// Unix milliseconds of the last finished check (0: none).
    last_check_ms: AtomicU64,
    /// Status of the last check (0: no status line: connect failure, timeout, garbage).
    last_status: AtomicU32,
    pub checks_ok: AtomicU64,
    pub checks_failed: AtomicU64,
    pub became_healthy: AtomicU64,
    pub became_unhealthy: AtomicU64,
}

/// A change of an endpoint's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    ToHealthy,
    ToUnhealthy,
}

impl Default for EndpointHealth {
    fn default() -> Self {
        Self {
            healthy: AtomicBool::new(true),
            checked: AtomicBool::new(false),
            consecutive_ok: AtomicU32::new(0),
            consecutive_failed: AtomicU32::new(0),
            last_check_ms: AtomicU64::new(0),
            last_status: AtomicU32::new(0),
            checks_ok: AtomicU64::new(0),
            checks_failed: AtomicU64::new(0),
            became_healthy: AtomicU64::new(0),
            became_unhealthy: AtomicU64::new(0),
        }
    }
}

impl EndpointHealth {
    /// Whether the endpoint may get traffic as far as active checks know (true when unchecked).
    #[inline]
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    /// Counts one check (`status`: the status line's code, `None` when there was none) that
    /// passed or not; flips the state after `healthy_threshold` passes in a row (when
    /// unhealthy) or `unhealthy_threshold` failures in a row (when healthy).
    pub fn record(
        &self,
        passed: bool,
        status: Option<u16>,
        healthy_threshold: u32,
        unhealthy_threshold: u32,
    ) -> Option<Transition> {
        self.checked.store(true, Relaxed);
        self.last_status.store(status.map_or(0, u32::from), Relaxed);
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self.last_check_ms.store(now, Relaxed);
        if passed {
            self.checks_ok.fetch_add(1, Relaxed);
            self.consecutive_failed.store(0, Relaxed);
            let ok = self.consecutive_ok.load(Relaxed).saturating_add(1);
            self.consecutive_ok.store(ok, Relaxed);
            if !self.is_healthy() && ok >= healthy_threshold {
                self.healthy.store(true, Relaxed);
                self.became_healthy.fetch_add(1, Relaxed);
                return Some(Transition::ToHealthy);
            }
        } else {
            self.checks_failed.fetch_add(1, Relaxed);
            self.consecutive_ok.store(0, Relaxed);
            let failed = self.consecutive_failed.load(Relaxed).saturating_add(1);
            self.consecutive_failed.store(failed, Relaxed);
            if self.is_healthy() && failed >= unhealthy_threshold {
                self.healthy.store(false, Relaxed);
                self.became_unhealthy.fetch_add(1, Relaxed);
                return Some(Transition::ToUnhealthy);
            }
        }
        None
    }

    /// Forgets the checks (health checking was turned off for the endpoint): healthy, unchecked.
    pub fn reset(&self) {
        self.healthy.store(true, Relaxed);
        self.checked.store(false, Relaxed);
        self.consecutive_ok.store(0, Relaxed);
        self.consecutive_failed.store(0, Relaxed);
    }

    /// The state as the admin port shows it.
    pub fn to_json(&self) -> serde_json::Value {
        let checked = self.checked.load(Relaxed);
        let last = self.last_check_ms.load(Relaxed);
        serde_json::json!({
            "health": match (checked, self.is_healthy()) {
                (false, _) => "unchecked",
                (true, true) => "healthy",
                (true, false) => "unhealthy",
            },
            "last_check": (last > 0).then(|| last as f64 / 1000.0),
            "last_status": match self.last_status.load(Relaxed) { 0 => None, s => Some(s) },
            "consecutive_ok": self.consecutive_ok.load(Relaxed),
            "consecutive_failed": self.consecutive_failed.load(Relaxed),
        })
    }
}

/// Cluster name and endpoint address.
pub type HealthKey = (String, SocketAddr);

/// Every endpoint's [`EndpointHealth`], by cluster name and address. Locked when a worker
/// builds a cluster state, when the checker follows a new config and on admin scrapes; never
/// per request.
#[derive(Debug, Default)]
pub struct HealthRegistry {
    entries: Mutex<HashMap<HealthKey, Arc<EndpointHealth>>>,
}

impl HealthRegistry {
    /// The health of `address` in `cluster`, created healthy on first use.
    pub fn endpoint(&self, cluster: &str, address: SocketAddr) -> Arc<EndpointHealth> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(entries.entry((cluster.to_owned(), address)).or_default())
    }

    /// Drops the entries `keep` refuses (endpoints no longer configured).
    pub fn retain(&self, mut keep: impl FnMut(&HealthKey, &Arc<EndpointHealth>) -> bool) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).retain(|k, v| keep(k, v));
    }

    /// The entry of `key`, if any.
    pub fn get(&self, cluster: &str, address: SocketAddr) -> Option<Arc<EndpointHealth>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(&(cluster.to_owned(), address)).cloned()
    }

    /// Every entry, sorted by key (metrics).
    /// Every endpoint's counters, by cluster and address, for the metrics exposition.
    pub fn samples(&self) -> Vec<crate::stats::prometheus::EndpointHealthSample> {
        use std::sync::atomic::Ordering::Relaxed;
        self.list()
            .into_iter()
            .map(|((cluster, address), h)| crate::stats::prometheus::EndpointHealthSample {
                cluster,
                endpoint: address.to_string(),
                checks_passed: h.checks_ok.load(Relaxed),
                checks_failed: h.checks_failed.load(Relaxed),
                became_healthy: h.became_healthy.load(Relaxed),
                became_unhealthy: h.became_unhealthy.load(Relaxed),
                healthy: h.is_healthy(),
            })
            .collect()
    }

    pub fn list(&self) -> Vec<(HealthKey, Arc<EndpointHealth>)> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<_> = entries.iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_flip_the_state() {
        let h = EndpointHealth::default();
        assert!(h.is_healthy());
        assert_eq!(h.to_json()["health"], "unchecked");
        assert_eq!(h.record(false, Some(503), 2, 3), None);
        assert_eq!(h.record(false, None, 2, 3), None);
        assert_eq!(h.record(true, Some(200), 2, 3), None);
        assert_eq!(h.record(false, Some(503), 2, 3), None);
        assert_eq!(h.record(false, Some(503), 2, 3), None);
        assert_eq!(h.record(false, Some(503), 2, 3), Some(Transition::ToUnhealthy));
        assert!(!h.is_healthy());
        assert_eq!(h.record(false, Some(503), 2, 3), None);
        assert_eq!(h.record(true, Some(200), 2, 3), None);
        assert_eq!(h.record(true, Some(200), 2, 3), Some(Transition::ToHealthy));
        assert_eq!(h.to_json()["health"], "healthy");
        assert_eq!(h.became_unhealthy.load(Relaxed), 1);
        h.reset();
        assert_eq!(h.to_json()["health"], "unchecked");
    }

    #[test]
    fn registry_keeps_entries_by_cluster_and_address() {
        let r = HealthRegistry::default();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap_or_else(|_| unreachable!());
        let first = r.endpoint("c", a);
        assert!(Arc::ptr_eq(&first, &r.endpoint("c", a)));
        assert!(!Arc::ptr_eq(&first, &r.endpoint("d", a)));
        r.retain(|k, _| k.0 == "d");
        assert!(r.get("c", a).is_none() && r.get("d", a).is_some());
    }
}
