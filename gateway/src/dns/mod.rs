//! Re-resolution of host-name endpoints: ONE resolver thread per process, never a worker.
//!
//! Every `clusters[].dns_refresh` the thread resolves each host-name endpoint of the cluster
//! again (`server.hosts_file` first, then the system resolver: see
//! [`gateway_config::resolve`]). getaddrinfo reports no TTL, so the interval is what applies.
//! Every address of a name is an endpoint (strict DNS). When a cluster's set changed, the
//! control plane publishes a snapshot with the same version and the new set
//! ([`crate::control::Control::publish_endpoints`]); workers carry their per-endpoint state over
//! by address (`crate::upstream::reresolve`). A lookup that fails or finds no usable address
//! keeps the name's last good addresses, and is counted and shown in `/clusters`.
//!
//! Lookups block this thread only: a slow resolver delays later lookups of the round, never a
//! request. Names are resolved one after the other.

mod merge;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gateway_config::{Cluster, ConfiguredEndpoint, Endpoint};

use crate::control::{lock, Control};
use crate::stats::prometheus::DnsSample;
use crate::worker::Shared;

pub use merge::merge;

/// How often the thread looks for due clusters and for the drain.
const TICK: Duration = Duration::from_millis(50);

/// A cluster's new endpoint set, and the configured endpoints it was resolved from.
#[derive(Debug, Clone)]
pub struct Update {
    pub cluster: String,
    pub configured: Vec<ConfiguredEndpoint>,
    pub endpoints: Vec<Endpoint>,
}

/// What the resolver has done, by cluster, for `/clusters` and `/metrics`.
#[derive(Default)]
pub struct DnsStatus(Mutex<HashMap<String, ClusterDns>>);

/// One cluster's re-resolution record.
#[derive(Debug, Default, Clone)]
pub struct ClusterDns {
    pub resolutions: u64,
    pub failures: u64,
    pub changes: u64,
    /// By configured name.
    pub names: HashMap<String, NameStatus>,
}

/// One host name's last lookups.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct NameStatus {
    /// The addresses the last successful lookup found.
    pub addresses: Vec<String>,
    /// Unix seconds of the last successful lookup.
    pub last_success: Option<f64>,
    /// The last failure's message, while the latest lookup failed.
    pub last_error: Option<String>,
    /// Unix seconds of the last failed lookup.
    pub last_failure: Option<f64>,
    pub resolutions: u64,
    pub failures: u64,
}

impl DnsStatus {
    /// The record of `cluster` (default when it has no host name or was never resolved).
    pub fn cluster(&self, cluster: &str) -> ClusterDns {
        lock(&self.0).get(cluster).cloned().unwrap_or_default()
    }

    /// Counters of every cluster re-resolved at least once.
    pub fn samples(&self) -> Vec<DnsSample> {
        let map = lock(&self.0);
        let mut out: Vec<DnsSample> = map
            .iter()
            .map(|(cluster, d)| DnsSample {
                cluster: cluster.clone(),
                resolutions: d.resolutions,
                failures: d.failures,
                changes: d.changes,
            })
            .collect();
        out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        out
    }

    /// Records one lookup; returns whether the name's previous lookup had failed.
    fn record(&self, cluster: &str, name: &str, answer: &Result<Vec<SocketAddr>, String>) -> bool {
        let mut map = lock(&self.0);
        let c = map.entry(cluster.to_owned()).or_default();
        let n = c.names.entry(name.to_owned()).or_default();
        let was_failing = n.last_error.is_some();
        let now = unix_now();
        c.resolutions += 1;
        n.resolutions += 1;
        match answer {
            Ok(found) => {
                n.addresses = found.iter().map(ToString::to_string).collect();
                n.last_success = Some(now);
                n.last_error = None;
            }
            Err(message) => {
                c.failures += 1;
                n.failures += 1;
                n.last_error = Some(message.clone());
                n.last_failure = Some(now);
            }
        }
        was_failing
    }

    fn changed(&self, cluster: &str) {
        lock(&self.0).entry(cluster.to_owned()).or_default().changes += 1;
    }

    /// Forgets clusters no longer configured, and names no longer configured in the others.
    fn retain(&self, clusters: &[Cluster]) {
        let mut map = lock(&self.0);
        map.retain(|name, _| clusters.iter().any(|c| c.name == *name && c.dns_refresh.is_some()));
        for c in clusters {
            if let Some(d) = map.get_mut(&c.name) {
                d.names.retain(|n, _| c.configured.iter().any(|e| e.name == *n));
            }
        }
    }
}

/// Starts the resolver thread; it ends once the process drains.
pub fn start(
    shared: Arc<Shared>,
    control: Arc<Control>,
    status: Arc<DnsStatus>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("dns-resolver".into()).spawn(move || run(&shared, &control, &status))
}

fn run(shared: &Shared, control: &Control, status: &DnsStatus) {
    // When each cluster (by name) is due next. A cluster seen for the first time was resolved
    // by the config load just now.
    let mut due: HashMap<String, Instant> = HashMap::new();
    while !shared.draining.load(Ordering::Acquire) {
        std::thread::sleep(TICK);
        let snap = shared.snapshot.load_full();
        let now = Instant::now();
        due.retain(|name, _| snap.config.clusters.iter().any(|c| c.name == *name && c.dns_refresh.is_some()));
        status.retain(&snap.config.clusters);
        let mut updates = Vec::new();
        for cluster in &snap.config.clusters {
            let Some(refresh) = cluster.dns_refresh else { continue };
            let next = due.entry(cluster.name.clone()).or_insert(now + refresh);
            if *next > now {
                continue;
            }
            let hosts_file = snap.config.server.hosts_file.as_deref();
            let answers: Vec<Option<Result<Vec<SocketAddr>, String>>> = cluster
                .configured
                .iter()
                .map(|spec| {
                    spec.is_name.then(|| {
                        let answer = gateway_config::resolve::resolve(&spec.name, hosts_file);
                        let was_failing = status.record(&cluster.name, &spec.name, &answer);
                        match &answer {
                            // Once per outage, not every round.
                            Err(message) if !was_failing => {
                                tracing::warn!(cluster = %cluster.name, endpoint = %spec.name, error = %message,
                                    "endpoint name did not resolve; its last good addresses stay in use")
                            }
                            Ok(_) if was_failing => {
                                tracing::info!(cluster = %cluster.name, endpoint = %spec.name, "endpoint name resolves again")
                            }
                            _ => {}
                        }
                        answer
                    })
                })
                .collect();
            // Scheduled after the lookups, so a slow resolver does not make rounds pile up.
            *next = Instant::now() + refresh;
            let endpoints = merge(&cluster.configured, &cluster.endpoints, &answers);
            if endpoints != cluster.endpoints {
                updates.push(Update {
                    cluster: cluster.name.clone(),
                    configured: cluster.configured.clone(),
                    endpoints,
                });
            }
        }
        if updates.is_empty() {
            continue;
        }
        for name in control.publish_endpoints(updates) {
            status.changed(&name);
            let snap = shared.snapshot.load();
            let addresses = snap
                .config
                .clusters
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.endpoints.iter().map(|e| e.address.to_string()).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            tracing::info!(cluster = %name, endpoints = %addresses, "endpoint set changed (host names re-resolved)");
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
