//! Per-worker, per-route and per-cluster metric sets.
//!
//! A worker looks its sets up by name in its [`WorkerMetrics`] when it builds its view of a new
//! config (rare; a mutex is fine there) and keeps the `Arc`s on the request path, where recording
//! is a few relaxed load/store pairs on memory only that worker writes. Sets live as long as
//! their name stays configured, so counters survive config reloads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::histogram::{Histogram, HistogramSnapshot};
use super::Counter;

/// Values of the `class` label, indexed by [`status_class`].
pub const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Why an upstream exchange failed; the `reason` label of
/// `gateway_cluster_upstream_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// Connecting failed (refused, unreachable, TLS handshake error).
    ConnectError,
    /// Connecting did not finish within the connect timeout.
    ConnectTimeout,
    /// The exchange hit the route timeout after connecting.
    Timeout,
    /// The upstream sent a malformed response.
    Protocol,
    /// The upstream closed the connection before the response was complete.
    Reset,
}

/// Metrics of one route on one worker.
#[derive(Debug, Default)]
#[repr(align(128))] // own cache lines (and the adjacent-line prefetch pair) per worker
pub struct RouteMetrics {
    requests: [Counter; 5],
    /// Admission decisions by [`ClassOutcome`].
    decisions: [Counter; CLASS_OUTCOMES.len()],
    latency: Histogram,
    /// Mirror copies by [`MirrorResult`].
    mirror: [Counter; MIRROR_RESULTS.len()],
    /// Keys of a per-key rate limit evicted from this worker's table (it was full).
    rate_limit_evictions: Counter,
}

/// Split decisions of one route for one of its clusters on one worker, by [`SplitReason`].
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct SplitMetrics {
    decisions: [Counter; SPLIT_REASONS.len()],
}

/// Why a split sent a request to a cluster: the `reason` label values.
pub const SPLIT_REASONS: [&str; 3] = ["weight", "sticky", "pin"];

/// Index into [`SPLIT_REASONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitReason {
    /// At random by weight (no sticky key configured, or the request carried none).
    Weight = 0,
    /// By the hash of the request's sticky key.
    Sticky = 1,
    /// A pin matched.
    Pin = 2,
}

/// What became of a mirror copy: the `result` label values.
pub const MIRROR_RESULTS: [&str; 3] = ["mirrored", "failed", "dropped"];

/// Index into [`MIRROR_RESULTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorResult {
    /// Sent, and the shadow's whole response was read (and discarded).
    Mirrored = 0,
    /// Sent or attempted, but connecting, sending or reading failed or hit the route timeout.
    Failed = 1,
    /// Not sent: the route's copies in flight on this worker were at `max_in_flight`.
    Dropped = 2,
}

/// Metrics of one upstream cluster on one worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ClusterMetrics {
    requests: [Counter; 5],
    latency: Histogram,
    connects: Counter,
    reuses: Counter,
    failures: [Counter; 5],
    /// The cluster's current in-flight limit on this worker (a gauge).
    limit: Counter,
    /// Outlier ejections, indexed like `upstream::outlier::EjectReason::ALL`.
    ejections: [Counter; 2],
    /// Endpoints ejected now (a gauge).
    ejected: Counter,
    /// Picks made with `all_unhealthy = "panic"` because no endpoint was eligible.
    panic_picks: Counter,
    /// Tries abandoned at their per-try timeout, before the route timeout.
    try_timeouts: Counter,
    /// Requests that could not be retried kept away from a suspect endpoint.
    suspects_passed_over: Counter,
}

/// One worker's registry of route and cluster metric sets. The worker calls [`Self::route`] and
/// [`Self::cluster`] only when building its view of a new config; the admin thread reads on
/// scrape. Never locked per request.
#[derive(Debug)]
pub struct WorkerMetrics {
    worker: usize,
    routes: Named<RouteMetrics>,
    clusters: Named<ClusterMetrics>,
    /// Keyed by `route/cluster` (names never contain `/`).
    splits: Named<SplitMetrics>,
    /// Requests by priority class (index into the config's classes) and outcome.
    classes: [[Counter; CLASS_OUTCOMES.len()]; MAX_PRIORITY_CLASSES],
}

/// Priority classes counted per worker (the config allows at most this many).
pub const MAX_PRIORITY_CLASSES: usize = 8;

/// What happened to a request of a priority class: the `outcome` label values.
pub const CLASS_OUTCOMES: [&str; 4] = ["served", "shed", "overflow", "rate_limited"];

/// Index into [`CLASS_OUTCOMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassOutcome {
    Served = 0,
    Shed = 1,
    Overflow = 2,
    RateLimited = 3,
}

impl FailureReason {
    /// Every reason, in label order.
    pub const ALL: [FailureReason; 5] =
        [Self::ConnectError, Self::ConnectTimeout, Self::Timeout, Self::Protocol, Self::Reset];

    /// The `reason` label value.
    pub const fn label(self) -> &'static str {
        match self {
            Self::ConnectError => "connect_error",
            Self::ConnectTimeout => "connect_timeout",
            Self::Timeout => "timeout",
            Self::Protocol => "protocol",
            Self::Reset => "reset",
        }
    }
}

impl RouteMetrics {
    /// Counts a final downstream response and the whole request's duration. Owning worker only.
    #[inline]
    pub fn observe(&self, status: u16, elapsed: Duration) {
        bump(&self.requests, status_class(status));
        self.latency.record(elapsed);
    }

    /// Requests by status class, indexed like [`STATUS_CLASSES`].
    pub fn requests(&self) -> [u64; 5] {
        self.requests.each_ref().map(Counter::value)
    }

    /// Request durations.
    pub fn latency(&self) -> HistogramSnapshot {
        self.latency.snapshot()
    }

    /// Counts an admission decision for a request of this route. Owning worker only.
    #[inline]
    pub fn decide(&self, outcome: ClassOutcome) {
        if let Some(c) = self.decisions.get(outcome as usize) {
            c.inc();
        }
    }

    /// Admission decisions, indexed like [`CLASS_OUTCOMES`].
    pub fn decisions(&self) -> [u64; CLASS_OUTCOMES.len()] {
        self.decisions.each_ref().map(Counter::value)
    }

    /// Counts keys evicted from the route's per-key rate-limit table. Owning worker only.
    #[inline]
    pub fn rate_limit_evicted(&self, n: u64) {
        if n > 0 {
            self.rate_limit_evictions.add(n);
        }
    }

    /// Keys evicted from the route's per-key rate-limit table.
    pub fn rate_limit_evictions(&self) -> u64 {
        self.rate_limit_evictions.value()
    }

    /// Counts a mirror copy. Owning worker only.
    #[inline]
    pub fn mirror(&self, result: MirrorResult) {
        if let Some(c) = self.mirror.get(result as usize) {
            c.inc();
        }
    }

    /// Mirror copies, indexed like [`MIRROR_RESULTS`].
    pub fn mirrors(&self) -> [u64; MIRROR_RESULTS.len()] {
        self.mirror.each_ref().map(Counter::value)
    }
}

impl SplitMetrics {
    /// Counts a request sent to this cluster. Owning worker only.
    #[inline]
    pub fn count(&self, reason: SplitReason) {
        if let Some(c) = self.decisions.get(reason as usize) {
            c.inc();
        }
    }

    /// Decisions, indexed like [`SPLIT_REASONS`].
    pub fn decisions(&self) -> [u64; SPLIT_REASONS.len()] {
        self.decisions.each_ref().map(Counter::value)
    }
}

impl ClusterMetrics {
    /// Counts an upstream response head and the time it took to arrive. Owning worker only.
    #[inline]
    pub fn observe(&self, status: u16, upstream_elapsed: Duration) {
        bump(&self.requests, status_class(status));
        self.latency.record(upstream_elapsed);
    }

    /// Counts a new upstream connection. Owning worker only.
    #[inline]
    pub fn connect(&self) {
        self.connects.inc();
    }

    /// Counts a request sent on a pooled connection. Owning worker only.
    #[inline]
    pub fn reuse(&self) {
        self.reuses.inc();
    }

    /// Counts a failed upstream exchange. Owning worker only.
    #[inline]
    pub fn failure(&self, reason: FailureReason) {
        bump(&self.failures, reason as usize);
    }

    /// Upstream responses by status class, indexed like [`STATUS_CLASSES`].
    pub fn requests(&self) -> [u64; 5] {
        self.requests.each_ref().map(Counter::value)
    }

    /// Time from sending the request to receiving the response head.
    pub fn latency(&self) -> HistogramSnapshot {
        self.latency.snapshot()
    }

    /// New upstream connections opened.
    pub fn connects(&self) -> u64 {
        self.connects.value()
    }

    /// Requests sent on a pooled connection.
    pub fn reuses(&self) -> u64 {
        self.reuses.value()
    }

    /// Publishes the in-flight limit. Owning worker only.
    pub fn set_limit(&self, limit: u64) {
        let old = self.limit.value();
        if limit >= old {
            self.limit.add(limit - old);
        } else {
            self.limit.sub(old - limit);
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit.value()
    }

    /// Counts an outlier ejection (and one more endpoint ejected). Owning worker only.
    pub fn ejection(&self, reason: super::metrics::EjectReason) {
        if let Some(c) = self.ejections.get(reason as usize) {
            c.inc();
        }
        self.ejected.inc();
    }

    /// An endpoint ejected before a reload is still ejected in the rebuilt cluster state
    /// (the old state's drop takes its count out). Owning worker only.
    pub fn still_ejected(&self) {
        self.ejected.inc();
    }

    /// An ejected endpoint came back. Owning worker only.
    pub fn returned(&self) {
        self.ejected.sub(1);
    }

    /// Counts a panic pick. Owning worker only.
    pub fn panic_pick(&self) {
        self.panic_picks.inc();
    }

    /// Counts a try abandoned at its per-try timeout. Owning worker only.
    pub fn try_timeout(&self) {
        self.try_timeouts.inc();
    }

    /// Counts a request kept away from a suspect endpoint. Owning worker only.
    pub fn suspect_passed_over(&self) {
        self.suspects_passed_over.inc();
    }

    /// Ejections, indexed like `EjectReason::ALL`.
    pub fn ejections(&self) -> [u64; 2] {
        self.ejections.each_ref().map(Counter::value)
    }

    /// Endpoints ejected now.
    pub fn ejected(&self) -> u64 {
        self.ejected.value()
    }

    pub fn panic_picks(&self) -> u64 {
        self.panic_picks.value()
    }

    pub fn try_timeouts(&self) -> u64 {
        self.try_timeouts.value()
    }

    pub fn suspects_passed_over(&self) -> u64 {
        self.suspects_passed_over.value()
    }

    /// Failures, indexed like [`FailureReason::ALL`].
    pub fn failures(&self) -> [u64; 5] {
        self.failures.each_ref().map(Counter::value)
    }
}

impl WorkerMetrics {
    /// An empty registry for worker `worker` (the value of its `worker` label).
    pub fn new(worker: usize) -> Self {
        Self {
            worker,
            routes: Named::default(),
            clusters: Named::default(),
            splits: Named::default(),
            classes: Default::default(),
        }
    }

    /// Counts a request of priority class `class`. Owning worker only.
    pub fn count_class(&self, class: usize, outcome: ClassOutcome) {
        if let Some(c) = self.classes.get(class).and_then(|row| row.get(outcome as usize)) {
            c.inc();
        }
    }

    /// Requests of priority class `class`, indexed like [`CLASS_OUTCOMES`].
    pub fn class_counts(&self, class: usize) -> [u64; CLASS_OUTCOMES.len()] {
        let mut out = [0; CLASS_OUTCOMES.len()];
        if let Some(row) = self.classes.get(class) {
            for (o, c) in out.iter_mut().zip(row) {
                *o = c.value();
            }
        }
        out
    }

    /// The worker's id, as passed to [`Self::new`].
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The metrics of route `name`, created on first use and kept until [`Self::retain`] drops
    /// the name.
    pub fn route(&self, name: &str) -> Arc<RouteMetrics> {
        self.routes.get_or_create(name)
    }

    /// The metrics of cluster `name`, created on first use and kept until [`Self::retain`] drops
    /// the name.
    pub fn cluster(&self, name: &str) -> Arc<ClusterMetrics> {
        self.clusters.get_or_create(name)
    }

    /// Drops the series of routes and clusters not named here (no longer configured). A set
    /// still held by the worker keeps counting but is no longer exported; if its name comes back
    /// it starts from zero, which Prometheus reads as a counter reset.
    pub fn retain(&self, routes: &[&str], clusters: &[&str]) {
        self.routes.retain(routes);
        self.clusters.retain(clusters);
    }

    /// The split decisions of route `route` for cluster `cluster`, created on first use and
    /// kept until [`Self::retain_splits`] drops the pair.
    pub fn split(&self, route: &str, cluster: &str) -> Arc<SplitMetrics> {
        self.splits.get_or_create(&format!("{route}/{cluster}"))
    }

    /// Drops the split series of (route, cluster) pairs not listed here.
    pub fn retain_splits(&self, pairs: &[(&str, &str)]) {
        let keys: Vec<String> = pairs.iter().map(|(r, c)| format!("{r}/{c}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        self.splits.retain(&keys);
    }

    /// Every split series as (route, cluster, metrics), sorted by route, then cluster.
    pub fn splits(&self) -> Vec<(String, String, Arc<SplitMetrics>)> {
        self.splits
            .list()
            .into_iter()
            .filter_map(|(key, m)| key.split_once('/').map(|(r, c)| (r.to_owned(), c.to_owned(), m)))
            .collect()
    }

    /// Every route's metrics, sorted by name.
    pub fn routes(&self) -> Vec<(Arc<str>, Arc<RouteMetrics>)> {
        self.routes.list()
    }

    /// Every cluster's metrics, sorted by name.
    pub fn clusters(&self) -> Vec<(Arc<str>, Arc<ClusterMetrics>)> {
        self.clusters.list()
    }
}

/// Index into [`STATUS_CLASSES`]; anything outside 100..=499 counts as 5xx, as in
/// [`super::WorkerStats::count_status`].
#[inline]
pub fn status_class(status: u16) -> usize {
    match status {
        100..=199 => 0,
        200..=299 => 1,
        300..=399 => 2,
        400..=499 => 3,
        _ => 4,
    }
}

#[inline]
fn bump(counters: &[Counter; 5], index: usize) {
    if let Some(c) = counters.get(index) {
        c.inc();
    }
}

/// Metric sets by name.
#[derive(Debug)]
struct Named<T>(Mutex<BTreeMap<Arc<str>, Arc<T>>>);

impl<T> Default for Named<T> {
    fn default() -> Self {
        Self(Mutex::new(BTreeMap::new()))
    }
}

impl<T: Default> Named<T> {
    fn get_or_create(&self, name: &str) -> Arc<T> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = map.get(name) {
            return Arc::clone(set);
        }
        let set = Arc::new(T::default());
        map.insert(Arc::from(name), Arc::clone(&set));
        set
    }

    fn retain(&self, names: &[&str]) {
        let keep: BTreeSet<&str> = names.iter().copied().collect();
        self.0.lock().unwrap_or_else(PoisonError::into_inner).retain(|name, _| keep.contains(&**name));
    }

    fn list(&self) -> Vec<(Arc<str>, Arc<T>)> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter().map(|(name, set)| (Arc::clone(name), Arc::clone(set))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        for (status, class) in [(100, "1xx"), (204, "2xx"), (399, "3xx"), (404, "4xx"), (503, "5xx"), (99, "5xx")] {
            assert_eq!(STATUS_CLASSES[status_class(status)], class, "{status}");
        }
    }

    #[test]
    fn failure_reasons_index_their_labels() {
        for (i, reason) in FailureReason::ALL.iter().enumerate() {
            assert_eq!(*reason as usize, i);
        }
        let labels: Vec<_> = FailureReason::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(labels, ["connect_error", "connect_timeout", "timeout", "protocol", "reset"]);
    }

    #[test]
    fn sets_are_shared_by_name_and_survive_until_retain_drops_them() {
        let m = WorkerMetrics::new(3);
        let a = m.route("a");
        a.observe(200, Duration::from_millis(2));
        assert!(Arc::ptr_eq(&a, &m.route("a")), "same name, same set");
        m.route("b");
        m.cluster("c").connect();
        m.retain(&["a"], &[]);
        let names: Vec<_> = m.routes().into_iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, ["a"]);
        assert!(m.clusters().is_empty());
        assert_eq!(m.route("a").requests(), [0, 1, 0, 0, 0], "kept across the reload");
        assert_eq!(m.cluster("c").connects(), 0, "dropped, then new");
        assert_eq!(m.worker(), 3);
    }

    #[test]
    fn writes_from_a_worker_thread_are_seen_after_join() {
        let m = Arc::new(WorkerMetrics::new(0));
        let worker = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let route = m.route("r");
                let cluster = m.cluster("c");
                for i in 0..1000u64 {
                    let status = if i % 10 == 0 { 502 } else { 200 };
                    route.observe(status, Duration::from_millis(i % 7));
                    cluster.observe(status, Duration::from_micros(i));
                    if i % 100 == 0 {
                        cluster.connect();
                    } else {
                        cluster.reuse();
                    }
                }
                cluster.failure(FailureReason::ConnectTimeout);
                cluster.failure(FailureReason::Reset);
                cluster.failure(FailureReason::Reset);
            })
        };
        worker.join().unwrap();
        let (_, route) = m.routes().pop().unwrap();
        assert_eq!(route.requests(), [0, 900, 0, 0, 100]);
        assert_eq!(route.latency().count(), 1000);
        let (_, cluster) = m.clusters().pop().unwrap();
        assert_eq!(cluster.requests(), [0, 900, 0, 0, 100]);
        assert_eq!(cluster.latency().count(), 1000);
        assert_eq!(cluster.latency().cumulative[0], 501, "0..=500 us");
        assert_eq!((cluster.connects(), cluster.reuses()), (10, 990));
        assert_eq!(cluster.failures(), [0, 1, 0, 0, 2]);
    }

    #[test]
    fn sets_do_not_share_cache_lines() {
        assert_eq!(std::mem::align_of::<RouteMetrics>(), 128);
        assert_eq!(std::mem::align_of::<ClusterMetrics>(), 128);
    }
}
