//! A cluster whose endpoint set changed (host names re-resolved, see `crate::dns`) without any
//! other setting changing: the worker's new state shares every kept endpoint, by address, with
//! the state it replaces, so an address that stays keeps its pooled connections, its requests
//! in flight, its active health, its ejection and its latency estimate. An address that left
//! is retired: its idle connections are closed at once, connections of requests still in
//! flight are closed when those finish, and its outcomes no longer feed outlier detection.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use gateway_config::{Balancer, Cluster, Endpoint};

use super::balancer::RoundRobin;
use super::health::HealthRegistry;
use super::outlier::OutlierState;
use super::{ewma, h2_settings, h2pool, maglev, ClusterState, EndpointGauge, EndpointState, IdlePool};

/// Whether `a` and `b` differ at most in their resolved `endpoints`.
pub fn same_but_endpoints(a: &Cluster, b: &Cluster) -> bool {
    let strip = |c: &Cluster| Cluster { endpoints: Vec::new(), ..c.clone() };
    a.endpoints != b.endpoints && strip(a) == strip(b)
}

impl ClusterState {
    /// The state of `settings`, which differs from `old.settings` only in its endpoints (see
    /// [`same_but_endpoints`]): kept endpoints (same address and weight) are shared with
    /// `old`, new ones start fresh, and the ones that left are retired (see the module docs).
    /// Admission (limiter, connection count, retry budget) carries over whole.
    pub fn with_endpoints(old: &ClusterState, settings: &Cluster, health: &HealthRegistry) -> Self {
        let endpoints: Vec<Rc<EndpointState>> = settings
            .endpoints
            .iter()
            .map(|e| {
                let kept = old.endpoints.iter().find(|o| o.address == e.address && o.weight == e.weight);
                kept.map(Rc::clone).unwrap_or_else(|| {
                    Rc::new(EndpointState::new(
                        settings,
                        e,
                        old.h2_transport.clone(),
                        health,
                        Rc::clone(&old.connections),
                        Rc::clone(&old.panic),
                    ))
                })
            })
            .collect();
        for gone in old.endpoints.iter().filter(|o| !endpoints.iter().any(|e| Rc::ptr_eq(e, o))) {
            gone.retire();
            if gone.outlier.is_ejected() {
                gone.outlier.forget_ejection();
                gone.gauge.ejected_until_ms.store(0, std::sync::atomic::Ordering::Relaxed);
                old.ejected.set(old.ejected.get().saturating_sub(1));
                old.metrics.returned();
            }
        }
        Self {
            settings: settings.clone(),
            policy: old.policy,
            rr: RoundRobin::new(endpoints.len()),
            maglev: maglev_table(settings),
            endpoints,
            limiter: Rc::clone(&old.limiter),
            connections: Rc::clone(&old.connections),
            tls: old.tls.clone(),
            h2_transport: old.h2_transport.clone(),
            head_latency: {
                let h = super::trytime::HeadLatency::default();
                h.take_over(&old.head_latency);
                h
            },
            retries: Rc::clone(&old.retries),
            retry_tokens: Cell::new(old.retry_tokens.get()),
            retry_earn: old.retry_earn,
            ejected: Rc::clone(&old.ejected),
            panic: Rc::clone(&old.panic),
            metrics: Arc::clone(&old.metrics),
        }
    }
}

impl EndpointState {
    /// A fresh endpoint of `settings`: empty pool, no requests, not ejected; active health
    /// from (and kept in) `health` by cluster name and address.
    pub(super) fn new(
        settings: &Cluster,
        e: &Endpoint,
        h2_transport: Option<h2pool::Transport>,
        health: &HealthRegistry,
        connections: Rc<Cell<usize>>,
        panic: Rc<Cell<bool>>,
    ) -> Self {
        let gauge = Arc::new(EndpointGauge::default());
        let h2 = h2_transport.map(|t| h2pool::H2Endpoint::new(e.address, t, h2_settings(settings)));
        EndpointState {
            h2,
            speaks_http1: Cell::new(false),
            address: e.address,
            connections,
            max_connections: settings.caps.max_connections,
            weight: e.weight,
            outstanding: Cell::new(0),
            pool: IdlePool::new(settings.pool.max_idle_per_endpoint, settings.pool.idle_timeout, Arc::clone(&gauge)),
            gauge,
            health: health.endpoint(&settings.name, e.address),
            outlier: OutlierState::default(),
            ewma: ewma::PeakEwma::default(),
            panic,
            retired: Cell::new(false),
        }
    }

    /// Takes the endpoint out of service (see the module docs).
    fn retire(&self) {
        self.retired.set(true);
        self.pool.close_all();
        if let Some(h2) = &self.h2 {
            h2.close_idle();
        }
    }

    /// Whether the endpoint left its cluster.
    pub fn is_retired(&self) -> bool {
        self.retired.get()
    }
}

/// The maglev table of `settings` (`balancer = "maglev"` only), placing each endpoint by
/// [`Endpoint::hash_key`].
pub(super) fn maglev_table(settings: &Cluster) -> Option<maglev::Maglev> {
    (settings.balancer == Balancer::Maglev).then(|| {
        let keys: Vec<(std::borrow::Cow<'_, str>, u32)> =
            settings.endpoints.iter().map(|e| (e.hash_key(), e.weight)).collect();
        maglev::Maglev::new(keys.iter().map(|(k, w)| (k.as_ref(), *w)))
    })
}

#[cfg(test)]
#[path = "reresolve_tests.rs"]
mod tests;
