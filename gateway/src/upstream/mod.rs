//! Upstream clusters as one worker sees them: endpoints, their in-flight counts, balancers and
//! keep-alive connection pools. Everything here is worker-local (`Rc`, `Cell`, `RefCell`),
//! except active health, which one checker per process writes ([`health`], [`crate::health_check`])
//! and workers read with relaxed loads.
//!
//! An endpoint is eligible for a pick when it is healthy (active checks; always, without them)
//! and not ejected by this worker's outlier detection ([`outlier`]). When none is eligible,
//! `all_unhealthy = "fail"` makes the pick return `None` (a fast 503) and `"panic"` picks among
//! all endpoints as if they were healthy (counted in `gateway_cluster_panic_picks_total`).

pub mod armed;
pub mod balancer;
mod error;
pub mod ewma;

pub mod h2pool;
pub mod hashkey;
pub mod health;

pub mod maglev;
pub mod outlier;
mod pick;
pub mod pool;
mod reresolve;
pub mod trytime;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crate::admission::limiter::{Limiter, Policy};
use crate::stats::metrics::{ClusterMetrics, Histogram};
use crate::stats::Counter;

use gateway_config::Cluster;

use balancer::{Candidate, RoundRobin, XorShift};
pub use error::UpstreamError;
use health::{EndpointHealth, HealthRegistry};
use outlier::{Ejectable, OutlierState};
pub use pool::IdlePool;
use reresolve::maglev_table;
pub use reresolve::same_but_endpoints;

/// One cluster, per worker.
pub struct ClusterState {
    pub settings: Cluster,
    /// The admission policy this state was built for (part of its identity across reloads).
    pub policy: Policy,
    /// Shared by address with the state this one replaced when only the endpoint set changed
    /// (DNS): pool, in-flight count, health, ejection and latency carry over with it.
    pub endpoints: Vec<Rc<EndpointState>>,
    /// Priority-class admission and the adaptive in-flight limit.
    pub limiter: Rc<Limiter>,
    /// Upstream connections open to this cluster (idle and busy), for `caps.max_connections`.
    pub connections: Rc<Cell<usize>>,
    /// TLS for HTTP/1.1 connections to the endpoints (`tls` set on the cluster).
    pub tls: Option<UpstreamTlsConfig>,
    /// This worker's observed time to a response head, for the adaptive per-try timeout.
    pub head_latency: trytime::HeadLatency,
    /// Retries in flight (from their backoff until their try ends), for the retry budget.
    retries: Rc<Cell<usize>>,
    /// Retries earned by requests and not yet spent (the rate form of the retry budget), in
    /// thousandths of a retry.
    retry_tokens: Cell<u32>,
    /// What one request earns, in thousandths of a retry (`retry_budget.percent * 10`).
    retry_earn: u32,
    rr: RoundRobin,
    /// `balancer = "maglev"`: the lookup table (the same in every worker and process).
    maglev: Option<maglev::Maglev>,
    /// Endpoints this worker has ejected now (shared with the state this one replaced when only
    /// the endpoint set changed).
    ejected: Rc<Cell<usize>>,
    /// Set during an `all_unhealthy = "panic"` pick: every endpoint counts as eligible.
    panic: Rc<Cell<bool>>,
    /// This worker's metric set of the cluster.
    metrics: Arc<ClusterMetrics>,
    /// The HTTP/2 transport of new endpoints (`None`: HTTP/1.1 only).
    h2_transport: Option<h2pool::Transport>,
}

/// A client TLS config and the name to send as SNI and to verify.
#[derive(Clone)]
pub struct UpstreamTlsConfig {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: rustls_pki_types::ServerName<'static>,
}

pub struct EndpointState {
    pub address: SocketAddr,
    /// The cluster's open-connection count and cap (`caps.max_connections`).
    connections: Rc<Cell<usize>>,
    max_connections: usize,
    pub weight: u32,
    outstanding: Cell<u32>,
    pub pool: IdlePool,
    /// What the admin port shows of this endpoint (single-writer, read on scrape).
    pub gauge: Arc<EndpointGauge>,
    /// HTTP/2 connections (`protocol = "h2"` or `"auto"`).
    pub h2: Option<Rc<h2pool::H2Endpoint>>,
    /// With `protocol = "auto"`: the endpoint chose HTTP/1.1 by ALPN, use the HTTP/1.1 pool.
    pub speaks_http1: Cell<bool>,
    /// Active health, shared with the process's checker (always healthy without checks).
    pub health: Arc<EndpointHealth>,
    /// Passive outlier detection on this worker.
    pub outlier: OutlierState,
    /// Latency estimate (`balancer = "peak_ewma"`).
    pub ewma: ewma::PeakEwma,
    panic: Rc<Cell<bool>>,
    /// The endpoint left its cluster (DNS): its pool is closed, outcomes no longer count.
    retired: Cell<bool>,
}

impl EndpointState {
    /// The HTTP/2 endpoint to use, unless the endpoint speaks HTTP/1.1.
    pub fn h2(&self) -> Option<&Rc<h2pool::H2Endpoint>> {
        self.h2.as_ref().filter(|_| !self.speaks_http1.get())
    }
}

/// One worker's view of one endpoint, readable from the admin thread.
#[derive(Debug, Default)]
pub struct EndpointGauge {
    /// Requests in flight to the endpoint from this worker.
    pub in_flight: Counter,
    /// Idle pooled connections this worker holds to the endpoint.
    pub idle: Counter,
    /// Unix milliseconds until which this worker ejected the endpoint (0: not ejected).
    pub ejected_until_ms: AtomicU64,
    /// How many times this worker ejected the endpoint (the current multiplier).
    pub times_ejected: AtomicU64,
    /// Unix milliseconds until which the endpoint is suspect on this worker (its last try
    /// ended in a gateway error; see `outlier`), unless it answers first (0: not suspect).
    pub suspect_until_ms: AtomicU64,
    /// Responses from the endpoint by status class (`STATUS_CLASSES`), counted when the
    /// request ends; kept while the cluster's settings stay the same.
    pub requests: [Counter; 5],
    /// From sending the request to the endpoint to its response head.
    pub latency: Histogram,
}

impl EndpointGauge {
    /// Counts one request answered through this endpoint. Owning worker only.
    pub fn observe(&self, status: u16, upstream_elapsed: std::time::Duration) {
        if let Some(c) = self.requests.get(crate::stats::metrics::status_class(status)) {
            c.inc();
        }
        self.latency.record(upstream_elapsed);
    }
}

/// A worker's published list of endpoints (rebuilt when its config snapshot changes).
pub type EndpointViews = Mutex<Vec<(String, SocketAddr, Arc<EndpointGauge>)>>;

/// An upstream connection, counted against its cluster's `caps.max_connections` while it exists.
pub struct UpConn {
    pub stream: crate::runtime::stream::Stream,
    /// The next response's receive, submitted while the connection was idle in its pool
    /// (io_uring, plain TCP: [`armed`]); the response is read from it first.
    pub armed: Option<armed::ArmedRead>,
    count: Rc<Cell<usize>>,
}

impl UpConn {
    /// How many connections this worker has open to the connection's cluster, this one included.
    pub fn open(&self) -> usize {
        self.count.get()
    }
}

impl Drop for UpConn {
    fn drop(&mut self) {
        self.count.set(self.count.get().saturating_sub(1));
    }
}

impl EndpointState {
    /// Counts a newly opened connection against the cluster's cap.
    pub fn adopt(&self, stream: crate::runtime::stream::Stream) -> UpConn {
        self.connections.set(self.connections.get() + 1);
        UpConn { stream, armed: None, count: Rc::clone(&self.connections) }
    }

    /// Whether the cluster may open another connection.
    pub fn may_connect(&self) -> bool {
        self.connections.get() < self.max_connections
    }
}

impl Candidate for EndpointState {
    fn weight(&self) -> u32 {
        self.weight
    }
    fn outstanding(&self) -> u32 {
        self.outstanding.get()
    }
    #[inline]
    fn eligible(&self) -> bool {
        self.panic.get() || (self.health.is_healthy() && !self.outlier.is_ejected())
    }
}

impl Ejectable for EndpointState {
    fn outlier(&self) -> &OutlierState {
        &self.outlier
    }
}

impl ewma::Measured for EndpointState {
    fn ewma(&self) -> &ewma::PeakEwma {
        &self.ewma
    }
}

impl ClusterState {
    /// Builds a worker's state of `settings`; endpoint health comes from (and stays in)
    /// `health`, keyed by cluster name and address, so a reload keeps it.
    /// This worker's metric set of the cluster (kept across reloads by cluster name).
    pub fn metrics(&self) -> &Arc<ClusterMetrics> {
        &self.metrics
    }

    pub fn new(settings: &Cluster, policy: Policy, health: &HealthRegistry, metrics: Arc<ClusterMetrics>) -> Self {
        Self::with_limiter(settings, policy, health, metrics, Limiter::new(settings, policy))
    }

    /// [`ClusterState::new`] with this admission (a worker's part of a limit shared across
    /// workers, see [`crate::admission::controller`]).
    pub fn with_limiter(
        settings: &Cluster,
        policy: Policy,
        health: &HealthRegistry,
        metrics: Arc<ClusterMetrics>,
        limiter: Limiter,
    ) -> Self {
        let connections = Rc::new(Cell::new(0));
        let panic = Rc::new(Cell::new(false));
        let (tls, h2_transport) = upstream_tls(settings);
        let endpoints = settings
            .endpoints
            .iter()
            .map(|e| {
                Rc::new(EndpointState::new(
                    settings,
                    e,
                    h2_transport.clone(),
                    health,
                    Rc::clone(&connections),
                    Rc::clone(&panic),
                ))
            })
            .collect::<Vec<_>>();
        let maglev = maglev_table(settings);
        Self {
            rr: RoundRobin::new(endpoints.len()),
            maglev,
            ejected: Rc::new(Cell::new(0)),
            panic,
            metrics,
            endpoints,
            limiter: Rc::new(limiter),
            connections,
            tls,
            h2_transport,
            head_latency: trytime::HeadLatency::default(),
            retries: Rc::new(Cell::new(0)),
            retry_tokens: Cell::new(0),
            retry_earn: (settings.retry_budget.percent * 10.0).round() as u32,
            settings: settings.clone(),
            policy,
        }
    }

    /// Picks an endpoint with the cluster's balancer and counts a request in flight to it
    /// until the returned guard is dropped.
    pub fn pick(self: &Rc<Self>, rng: &XorShift) -> Option<InFlight> {
        self.pick_with(rng, PickHints::default())
    }

    /// Counts a request to the cluster: it earns `retry_budget.percent` of a retry.
    #[inline]
    pub fn note_request(&self) {
        let earned = self.retry_tokens.get() + self.retry_earn;
        self.retry_tokens.set(earned.min(RETRY_TOKEN_CAP * RETRY_TOKEN_UNIT));
    }

    /// A slot for one retry, if the cluster's retry budget has one. Below
    /// `retry_budget.min_concurrent` retries in flight, a retry is always allowed (low traffic
    /// cannot amplify much). Above it, a retry needs both forms of the budget: retries in flight
    /// stay below `percent` of the requests in flight to the cluster, and retries made stay
    /// below `percent` of the requests made (each request earns `percent / 100` of a retry,
    /// banked up to [`RETRY_TOKEN_CAP`]; each retry spends one). `caps.max_retries` bounds all.
    pub fn retry_slot(&self) -> Option<RetrySlot> {
        let budget = &self.settings.retry_budget;
        let in_flight = self.retries.get();
        if in_flight >= self.settings.caps.max_retries {
            return None;
        }
        let tokens = self.retry_tokens.get();
        if in_flight >= budget.min_concurrent {
            let share = self.limiter.in_flight() as f64 * budget.percent / 100.0;
            if in_flight as f64 >= share || tokens < RETRY_TOKEN_UNIT {
                return None;
            }
        }
        self.retry_tokens.set(tokens.saturating_sub(RETRY_TOKEN_UNIT));
        self.retries.set(in_flight + 1);
        Some(RetrySlot(Rc::clone(&self.retries)))
    }

    /// A slot for a retry of a try whose endpoint outlier detection has ejected (by this
    /// failure or while the try was in flight), bounded by `caps.max_retries` only: the
    /// ejection says the endpoint failed, not the cluster, and the requests it can concern are
    /// those in flight to that endpoint, so they are retried however many arrive at once (a
    /// hanging endpoint's tries all expire together). It spends an earned retry if one is
    /// banked.
    pub fn retry_slot_after_ejection(&self) -> Option<RetrySlot> {
        let in_flight = self.retries.get();
        if in_flight >= self.settings.caps.max_retries {
            return None;
        }
        self.retry_tokens.set(self.retry_tokens.get().saturating_sub(RETRY_TOKEN_UNIT));
        self.retries.set(in_flight + 1);
        Some(RetrySlot(Rc::clone(&self.retries)))
    }

    /// Whether an endpoint other than `index` is eligible (a retry could go elsewhere).
    pub fn has_other_eligible(&self, index: usize) -> bool {
        self.endpoints.iter().enumerate().any(|(i, e)| i != index && e.eligible())
    }

    /// Retries in flight to the cluster (this worker).
    pub fn retries_in_flight(&self) -> usize {
        self.retries.get()
    }

    /// Closes pooled connections that have been idle too long.
    pub fn evict_idle(&self) {
        let now = std::time::Instant::now();
        for e in &self.endpoints {
            e.pool.evict_expired();
            if let Some(h2) = &e.h2 {
                h2.evict_idle(now);
            }
        }
    }
}

/// The HTTP/1.1 TLS config of a cluster, and the transport of its HTTP/2 connections (`None`:
/// the cluster speaks HTTP/1.1 only). The files were checked when the config was loaded; a
/// failure here (a file changed since) leaves the cluster without TLS and is logged.
fn upstream_tls(settings: &Cluster) -> (Option<UpstreamTlsConfig>, Option<h2pool::Transport>) {
    use gateway_config::UpstreamProtocol;
    let make = |alpn: &[&[u8]]| -> Option<UpstreamTlsConfig> {
        let tls = settings.tls.as_ref()?;
        let server_name = rustls_pki_types::ServerName::try_from(tls.sni.clone()).ok()?;
        match crate::tls::client_config(tls, alpn) {
            Ok(config) => Some(UpstreamTlsConfig { config, server_name }),
            Err(e) => {
                tracing::error!(cluster = %settings.name, error = %e, "upstream TLS config");
                None
            }
        }
    };
    let h1 = make(&[b"http/1.1"]);
    let h2 = match settings.protocol {
        UpstreamProtocol::Http1 => None,
        UpstreamProtocol::H2 if settings.tls.is_none() => Some(h2pool::Transport::Plain),
        UpstreamProtocol::H2 => make(&[b"h2"]).map(tls_transport),
        UpstreamProtocol::Auto => make(&[b"h2", b"http/1.1"]).map(tls_transport),
    };
    (h1, h2)
}

fn tls_transport(t: UpstreamTlsConfig) -> h2pool::Transport {
    h2pool::Transport::Tls { config: t.config, server_name: t.server_name }
}

/// HTTP/2 connection settings for a cluster's endpoints.
fn h2_settings(settings: &Cluster) -> h2pool::H2Settings {
    h2pool::H2Settings {
        connect_timeout: settings.connect_timeout,
        idle_timeout: settings.pool.idle_timeout,
        // Each connection multiplexes many streams: a few per endpoint per worker suffice.
        max_connections: settings.caps.max_connections.clamp(1, 4),
        initial_stream_window: 256 * 1024,
        initial_connection_window: 1024 * 1024,
        max_header_list_bytes: 64 * 1024,
    }
}

/// The most retries a cluster banks (per worker) from earlier requests: after a quiet period an
/// outage starts with at most this many retries beyond `percent` of the requests.
pub const RETRY_TOKEN_CAP: u32 = 10;

/// Retry budget tokens are counted in thousandths of a retry (exact for any `percent` with one
/// decimal).
const RETRY_TOKEN_UNIT: u32 = 1000;

/// One retry's place in its cluster's retry budget, given back when dropped.
pub struct RetrySlot(Rc<Cell<usize>>);

impl Drop for RetrySlot {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// What the balancer may use beyond load.
#[derive(Debug, Default, Clone, Copy)]
pub struct PickHints {
    /// The request's hash key (consistent-hashing balancers).
    pub hash: Option<u64>,
    /// An endpoint index not to pick when another eligible one exists (a retry's last try).
    pub avoid: Option<usize>,
    /// The suspect endpoints (see `outlier`) this request passes over when an eligible one that
    /// is not suspect exists: those whose last failure it would not be retried after.
    pub shy: Shy,
}

/// Which suspect endpoints a request passes over (`PickHints::shy`), by the failure that made
/// them suspect.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shy {
    /// Of an endpoint whose last try failed before a response (connect failure, reset,
    /// timeout): the request would not be retried after a reset or a timeout (a method that is
    /// not idempotent, a body not held, no retry left, or the policy does not retry resets).
    pub of_failures: bool,
    /// Of an endpoint whose last answer was malformed: the request would not be retried after
    /// one (the default `retry_on` retries none; `gateway-error` or `5xx` in it do).
    pub of_malformed: bool,
}

impl Shy {
    /// Shy of every suspect endpoint.
    pub const ALL: Self = Self { of_failures: true, of_malformed: true };

    #[inline]
    pub fn any(self) -> bool {
        self.of_failures || self.of_malformed
    }

    /// Whether a request with these hints passes over an endpoint suspect as `s`.
    #[inline]
    pub fn avoids(self, s: outlier::Suspicion) -> bool {
        match s {
            outlier::Suspicion::None => false,
            outlier::Suspicion::Failed => self.of_failures,
            outlier::Suspicion::Malformed => self.of_malformed,
        }
    }
}

/// How one try against an endpoint ended: feeds outlier detection and latency-aware balancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response head arrived with this status.
    Response(u16),
    /// The TCP (or TLS) connection could not be established.
    ConnectFailure,
    /// The connection was closed or reset before a response head.
    Reset,
    /// No response head within the (per-try) timeout.
    Timeout,
    /// A malformed or refused response.
    Protocol,
}

impl Outcome {
    /// Connect failures, resets, timeouts and protocol errors: the gateway's own view of a
    /// broken endpoint (as opposed to a status the application chose).
    pub fn is_gateway_error(self) -> bool {
        !matches!(self, Outcome::Response(_))
    }
}

/// A request in flight to one endpoint; decrements the endpoint's count when dropped.
pub struct InFlight {
    cluster: Rc<ClusterState>,
    index: usize,
    /// When the endpoint was picked; read only for the peak-EWMA balancer (a clock read per
    /// request is not free).
    started: Option<std::time::Instant>,
}

impl InFlight {
    /// The endpoint's index in its cluster.
    pub fn index(&self) -> usize {
        self.index
    }

    /// When the endpoint was picked (peak-EWMA clusters only).
    pub fn started(&self) -> Option<std::time::Instant> {
        self.started
    }

    pub fn endpoint(&self) -> Option<&EndpointState> {
        self.cluster.endpoints.get(self.index).map(|e| &**e)
    }

    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(ep) = self.cluster.endpoints.get(self.index) {
            ep.outstanding.set(ep.outstanding.get().saturating_sub(1));
            ep.gauge.in_flight.sub(1);
        }
    }
}

#[cfg(test)]
mod pick_tests;
