//! Per-worker state of the routes' splits and mirrors, built with each config snapshot.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use crate::snapshot::Snapshot;
use crate::stats::metrics::{SplitMetrics, WorkerMetrics};
use crate::worker::Local;

/// One route's split counters and mirror bound on one worker.
#[derive(Debug, Default)]
pub struct RouteTraffic {
    /// Decision counters, indexed like the route's `split.targets` (empty without a split).
    pub splits: Vec<Arc<SplitMetrics>>,
    /// The route's mirror copies in flight on this worker. Kept across reloads by route name,
    /// so copies started on an older snapshot still count against the bound.
    pub mirror_in_flight: Rc<Cell<usize>>,
}

/// The state of every route of `snap` (indexed like its routes), reusing `previous`'s mirror
/// counts by route name; split series of pairs no longer configured are dropped.
pub fn for_snapshot(metrics: &WorkerMetrics, snap: &Snapshot, previous: Option<&Local>) -> Vec<RouteTraffic> {
    let config = &snap.config;
    let cluster_name = |i: usize| config.clusters.get(i).map_or("", |c| c.name.as_str());
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    let traffic = config
        .routes
        .iter()
        .map(|route| {
            let splits = route.split.as_ref().map_or_else(Vec::new, |s| {
                s.targets
                    .iter()
                    .map(|t| {
                        pairs.push((route.name.as_str(), cluster_name(t.action.cluster)));
                        metrics.split(&route.name, cluster_name(t.action.cluster))
                    })
                    .collect()
            });
            let mirror_in_flight = previous
                .and_then(|p| {
                    let j = p.snap.config.routes.iter().position(|o| o.name == route.name)?;
                    p.traffic.get(j).map(|t| Rc::clone(&t.mirror_in_flight))
                })
                .unwrap_or_default();
            RouteTraffic { splits, mirror_in_flight }
        })
        .collect();
    metrics.retain_splits(&pairs);
    traffic
}
