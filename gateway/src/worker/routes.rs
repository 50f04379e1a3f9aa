//! One worker's state per route of the snapshot it serves, kept across reloads by route name.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use super::Local;
use crate::admission::RouteLimit;
use crate::snapshot::Snapshot;
use crate::stats::metrics::{RouteMetrics, SplitMetrics, WorkerMetrics};

/// One route on one worker.
pub struct RouteState {
    /// Its metric series (kept by route name).
    pub metrics: Arc<RouteMetrics>,
    /// Its rate limiter, if it has a limit: kept across reloads while the route's name and
    /// limit are unchanged.
    pub limit: Option<Rc<RouteLimit>>,
    /// Split decision counters, indexed like the route's `split.targets` (empty without one).
    pub splits: Vec<Arc<SplitMetrics>>,
    /// The route's mirror copies in flight on this worker. Kept across reloads by route name,
    /// so copies started on an older snapshot still count against the bound.
    pub mirror_in_flight: Rc<Cell<usize>>,
    /// The route's kind for its clusters' adaptive limits (a key of its name).
    pub kind: u64,
}

/// The state of every route of `snap`, indexed like its routes, reusing `previous`'s limiters
/// and mirror counts by route name; series of routes, clusters and splits no longer configured
/// are dropped. `workers`: how many workers share a per-worker rate limit.
pub fn for_snapshot(
    metrics: &WorkerMetrics,
    snap: &Snapshot,
    previous: Option<&Local>,
    workers: usize,
) -> Vec<RouteState> {
    let config = &snap.config;
    let routes: Vec<&str> = config.routes.iter().map(|r| r.name.as_str()).collect();
    let clusters: Vec<&str> = config.clusters.iter().map(|c| c.name.as_str()).collect();
    metrics.retain(&routes, &clusters);
    let cluster_name = |i: usize| config.clusters.get(i).map_or("", |c| c.name.as_str());
    let old = |name: &str| {
        let p = previous?;
        let j = p.snap.config.routes.iter().position(|o| o.name == name)?;
        Some((p.snap.config.routes.get(j)?, p.routes.get(j)?))
    };
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    let states = config
        .routes
        .iter()
        .enumerate()
        .map(|(i, route)| {
            let before = old(&route.name);
            let splits = route.split.as_ref().map_or_else(Vec::new, |s| {
                s.targets
                    .iter()
                    .map(|t| {
                        pairs.push((route.name.as_str(), cluster_name(t.action.cluster)));
                        metrics.split(&route.name, cluster_name(t.action.cluster))
                    })
                    .collect()
            });
            let shared = snap.shared_buckets.get(i).and_then(Option::as_ref);
            let limit = route.rate_limit.as_ref().map(|settings| {
                let kept = before.filter(|(r, _)| r.rate_limit.as_ref() == Some(settings)).and_then(|(_, s)| {
                    let old = s.limit.as_ref()?;
                    // A process-wide bucket is the snapshot's; keep the worker's view only if
                    // it is the same.
                    match (&**old, shared) {
                        (RouteLimit::Shared(a), Some(b)) if !Arc::ptr_eq(a, b) => None,
                        _ => Some(Rc::clone(old)),
                    }
                });
                kept.unwrap_or_else(|| Rc::new(RouteLimit::new(settings, workers, shared)))
            });
            RouteState {
                metrics: metrics.route(&route.name),
                limit,
                splits,
                mirror_in_flight: before.map(|(_, s)| Rc::clone(&s.mirror_in_flight)).unwrap_or_default(),
                kind: crate::admission::gradient::kind_key(&route.name),
            }
        })
        .collect();
    metrics.retain_splits(&pairs);
    states
}
