//! The gateway's admin endpoints, served by the `gateway-admin` server on threads of its own
//! (never on a data-path worker; bounded so that no client can starve it).
//!
//! | endpoint | |
//! | --- | --- |
//! | `GET /healthz` | 200 while every worker ticks; 503 naming the workers stuck for over 2 s or dead |
//! | `GET /ready` | 200 once the first config is applied, 503 while draining |
//! | `GET /stats` | per-worker counters and totals (JSON) |
//! | `GET /server_info` | version, workers, pinned cores, I/O drivers, cgroup quota, uptime |
//! | `GET /config` | the effective config (secrets redacted), version, hash, loaded_at, source, reload status |
//! | `GET /clusters` | clusters and their endpoints: load, active health, ejections per worker; each host name's lookups |
//! | `GET /metrics` | Prometheus text: per-worker, per-route and per-cluster series |
//! | `POST /reload` | re-read the config file; 200 with the applied version, 400 with every error |
//! | `POST /drain` | stop accepting and drain, as on SIGTERM |
//! | `GET /certs` | each served certificate: names, subject, issuer, serial, validity, days left |
//! | `GET /logging` | the log filter in force |
//! | `POST /logging` | replace the log filter (body or `?filter=`, `RUST_LOG` syntax) |
//!
//! When a token is configured, the mutating endpoints need `Authorization: Bearer <token>`.

mod certs;
mod logging;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, UNIX_EPOCH};

use gateway_admin::{Handler, Request, Response};

use crate::accesslog::AccessLogStats;
use crate::control::{hex, Control};
use crate::stats::metrics::{ProcessInfo, WorkerMetrics, CONTENT_TYPE};
use crate::stats::process::ProcessStats;
use crate::stats::WorkerStats;

/// The labels of `gateway_build_info`.
const PROFILE: &str = if cfg!(debug_assertions) { "debug" } else { "release" };

use crate::upstream::EndpointViews;
use crate::worker::heartbeat::STALL_AFTER;
use crate::worker::Shared;
use crate::ServerInfo;

/// Every endpoint path (the label values of `gateway_admin_requests_total`, besides `other`).
const ENDPOINTS: [&str; 11] = [
    "/healthz",
    "/ready",
    "/stats",
    "/server_info",
    "/config",
    "/clusters",
    "/metrics",
    "/reload",
    "/drain",
    "/certs",
    "/logging",
];

pub struct AdminContext {
    pub shared: Arc<Shared>,
    pub control: Arc<Control>,
    pub stats: Vec<Arc<WorkerStats>>,
    pub metrics: Vec<Arc<WorkerMetrics>>,
    /// Each worker's endpoint gauges.
    pub endpoints: Vec<Arc<EndpointViews>>,
    pub access_log: Option<AccessLogStats>,
    /// Requests served, by index into [`ENDPOINTS`] (the last slot: any other path).
    pub requests: AdminRequests,
    pub info: ServerInfo,
    pub started: Instant,
    pub token: Option<String>,
    /// What the resolver of host-name endpoints has done.
    pub dns: Arc<crate::dns::DnsStatus>,
}

/// Admin requests by path: one counter per entry of [`ENDPOINTS`], then one for any other
/// path (the handler threads share them; the admin port is not the data path).
#[derive(Default)]
pub struct AdminRequests([std::sync::atomic::AtomicU64; ENDPOINTS.len() + 1]);

impl AdminRequests {
    fn counts(&self) -> Vec<(&'static str, u64)> {
        let paths = ENDPOINTS.iter().copied().chain(std::iter::once("other"));
        paths.zip(&self.0).map(|(p, c)| (p, c.load(Ordering::Relaxed))).collect()
    }
}

pub fn handler(ctx: AdminContext) -> Handler {
    Arc::new(move |req: &Request| {
        let slot = ENDPOINTS.iter().position(|e| *e == req.path).unwrap_or(ENDPOINTS.len());
        if let Some(count) = ctx.requests.0.get(slot) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        route(&ctx, req)
    })
}

fn route(ctx: &AdminContext, req: &Request) -> Response {
    let method = req.method.as_str();
    match (method, req.path.as_str()) {
        ("GET" | "HEAD", "/healthz") => healthz(ctx),
        ("GET" | "HEAD", "/ready") => {
            if ctx.shared.draining.load(Ordering::Acquire) {
                Response::text(503, "draining\n")
            } else if ctx.shared.snapshot.load().version == 0 {
                Response::text(503, "starting\n")
            } else {
                Response::text(200, "ready\n")
            }
        }
        ("GET" | "HEAD", "/stats") => Response::json(200, &crate::stats::to_json(&ctx.stats)),
        ("GET" | "HEAD", "/server_info") => server_info(ctx),
        ("GET" | "HEAD", "/config") => config(ctx),
        ("GET" | "HEAD", "/clusters") => clusters(ctx),
        ("GET" | "HEAD", "/metrics") => prometheus(ctx, req),
        ("GET" | "HEAD", "/certs") => certs::certs(&ctx.shared.snapshot.load()),
        ("GET" | "HEAD", "/logging") => logging::show(),
        ("POST", "/logging") => authorized(ctx, req, || logging::change(req)),
        ("POST", "/reload") => authorized(ctx, req, || match ctx.control.reload("admin") {
            Ok(applied) => Response::json(200, &serde_json::to_value(&applied).unwrap_or_default()),
            Err(message) => {
                Response::text(400, format!("reload rejected; the running configuration stays:\n{message}\n"))
            }
        }),
        ("POST", "/drain") => authorized(ctx, req, || {
            ctx.shared.draining.store(true, Ordering::Release);
            tracing::info!("drain requested through the admin port");
            Response::text(202, "draining\n")
        }),
        (
            _,
            "/healthz" | "/ready" | "/stats" | "/server_info" | "/config" | "/clusters" | "/metrics" | "/reload"
            | "/drain" | "/certs" | "/logging",
        ) => Response::text(405, "method not allowed\n"),
        _ => Response::text(404, "not found\n"),
    }
}

/// 200 while every worker serves; 503 with one line per worker that stopped ticking (stuck
/// for longer than `heartbeat::STALL_AFTER`) or whose thread died. During a drain, workers
/// that finished draining count as healthy.
fn healthz(ctx: &AdminContext) -> Response {
    let draining = ctx.shared.draining.load(Ordering::Acquire);
    let bad = ctx.shared.heartbeats.unhealthy(Instant::now(), STALL_AFTER, draining);
    if bad.is_empty() {
        return Response::text(200, "ok\n");
    }
    let mut body = String::from("unhealthy\n");
    for (worker, pulse) in bad {
        body.push_str(&format!("worker {worker}: {pulse}\n"));
    }
    Response::text(503, body)
}

/// Runs `f` if the request carries the admin token (or none is configured).
fn authorized(ctx: &AdminContext, req: &Request, f: impl FnOnce() -> Response) -> Response {
    let Some(token) = &ctx.token else { return f() };
    let presented = req.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        f()
    } else {
        Response::text(401, "admin token required\n")
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The Prometheus exposition: summed over workers, or per worker with `?per_worker=1` or
/// `server.admin.per_worker_metrics`.
fn prometheus(ctx: &AdminContext, req: &Request) -> Response {
    let status = ctx.control.status();
    let snap = ctx.shared.snapshot.load();
    let draining = ctx.shared.draining.load(Ordering::Acquire);
    let process = ProcessInfo {
        config_version: snap.version,
        reloads_ok: status.reloads_ok,
        reloads_failed: status.reloads_failed,
        access_log_written: ctx.access_log.as_ref().map_or(0, AccessLogStats::written),
        access_log_dropped: ctx.access_log.as_ref().map_or(0, AccessLogStats::dropped),
        access_log_write_errors: ctx.access_log.as_ref().map_or(0, AccessLogStats::write_errors),
        draining,
        uptime: ctx.started.elapsed(),
        workers_unhealthy: ctx.shared.heartbeats.unhealthy(Instant::now(), STALL_AFTER, draining).len() as u64,
        build: [ctx.info.version, PROFILE, std::env::consts::ARCH],
        last_reload_ok: status.last_reload_ok,
        last_reload_success_time: status
            .last_success_at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64()),
        certificates: certs::samples(&snap),
        process: Some(ProcessStats::read()),
        admin_requests: ctx.requests.counts(),
        classes: snap.config.overload.classes.clone(),
        health: ctx.shared.health.samples(),
        endpoints: endpoint_samples(ctx),
        dns: ctx.dns.samples(),
    };
    let workers: Vec<_> = ctx.stats.iter().cloned().zip(ctx.metrics.iter().cloned()).collect();
    let mut out = String::with_capacity(16 * 1024);
    let asked = req
        .query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|p| matches!(p, "per_worker" | "per_worker=1" | "per_worker=true")));
    let configured = snap.config.server.admin.as_ref().is_some_and(|a| a.per_worker_metrics);
    crate::stats::metrics::render_prometheus(&mut out, &workers, &process, asked || configured);
    Response { status: 200, content_type: CONTENT_TYPE, body: out.into_bytes() }
}

/// Each worker's requests and latency per endpoint of its current clusters.
fn endpoint_samples(ctx: &AdminContext) -> Vec<crate::stats::metrics::EndpointSample> {
    let mut out = Vec::new();
    for (worker, views) in ctx.endpoints.iter().enumerate() {
        for (cluster, address, gauge) in crate::control::lock(views).iter() {
            out.push(crate::stats::metrics::EndpointSample {
                cluster: cluster.clone(),
                endpoint: address.to_string(),
                worker,
                requests: gauge.requests.each_ref().map(crate::stats::Counter::value),
                latency: gauge.latency.snapshot(),
            });
        }
    }
    out
}

fn server_info(ctx: &AdminContext) -> Response {
    let snap = ctx.shared.snapshot.load();
    let mut v = serde_json::to_value(&ctx.info).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("uptime_seconds".into(), ctx.started.elapsed().as_secs().into());
        obj.insert("config_version".into(), snap.version.into());
        obj.insert("draining".into(), ctx.shared.draining.load(Ordering::Acquire).into());
    }
    Response::json(200, &v)
}

fn config(ctx: &AdminContext) -> Response {
    let snap = ctx.shared.snapshot.load();
    let loaded_at = snap.loaded_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    let listeners: Vec<serde_json::Value> =
        snap.bindings.iter().map(|b| serde_json::json!({ "name": b.name, "address": b.address.to_string() })).collect();
    Response::json(
        200,
        &serde_json::json!({
            "version": snap.version,
            "hash": hex(snap.hash),
            "loaded_at": loaded_at,
            "source": ctx.control.source().map(|p| p.display().to_string()),
            "reload": ctx.control.status(),
            "bound_listeners": listeners,
            "config": &*snap.config,
        }),
    )
}

/// A cluster's host names and their last lookups (`null` when every endpoint is an IP).
fn dns_json(ctx: &AdminContext, c: &gateway_config::Cluster) -> serde_json::Value {
    let Some(refresh) = c.dns_refresh else { return serde_json::Value::Null };
    let status = ctx.dns.cluster(&c.name);
    let names: Vec<serde_json::Value> = c
        .configured
        .iter()
        .filter(|e| e.is_name)
        .map(|e| {
            let in_use: Vec<String> =
                c.endpoints.iter().filter(|x| x.name == e.name).map(|x| x.address.to_string()).collect();
            let mut v =
                serde_json::to_value(status.names.get(&e.name).cloned().unwrap_or_default()).unwrap_or_default();
            if let Some(obj) = v.as_object_mut() {
                obj.insert("name".into(), e.name.clone().into());
                obj.insert("in_use".into(), in_use.into());
            }
            v
        })
        .collect();
    serde_json::json!({
        "refresh": gateway_config::show_duration(refresh),
        "resolutions": status.resolutions,
        "failures": status.failures,
        "changes": status.changes,
        "names": names,
    })
}

fn clusters(ctx: &AdminContext) -> Response {
    let snap = ctx.shared.snapshot.load();
    use std::sync::atomic::Ordering::Relaxed;
    // (cluster, address) -> (in flight, idle pooled) summed over workers, and each worker's
    // outlier ejection state.
    type Live = ((u64, u64), Vec<serde_json::Value>);
    let mut live: std::collections::HashMap<(String, std::net::SocketAddr), Live> = Default::default();
    let now_ms = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    for (worker, views) in ctx.endpoints.iter().enumerate() {
        for (cluster, address, gauge) in crate::control::lock(views).iter() {
            let e = live.entry((cluster.clone(), *address)).or_default();
            e.0 .0 += gauge.in_flight.value();
            e.0 .1 += gauge.idle.value();
            let until = gauge.ejected_until_ms.load(Relaxed);
            let suspect_until = gauge.suspect_until_ms.load(Relaxed);
            e.1.push(serde_json::json!({
                "worker": worker,
                "ejected": until > now_ms,
                "ejected_until": (until > now_ms).then(|| until as f64 / 1000.0),
                "times_ejected": gauge.times_ejected.load(Relaxed),
                "suspect": suspect_until > now_ms,
                "suspect_until": (suspect_until > now_ms).then(|| suspect_until as f64 / 1000.0),
            }));
        }
    }
    let clusters: Vec<serde_json::Value> = snap
        .config
        .clusters
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name,
                "balancer": c.balancer,
                "all_unhealthy": c.all_unhealthy,
                "dns": dns_json(ctx, c),
                "endpoints": c.endpoints.iter().map(|e| {
                    let ((in_flight, idle), workers) = live.get(&(c.name.clone(), e.address)).cloned().unwrap_or_default();
                    let health = ctx.shared.health.get(&c.name, e.address).map_or_else(
                        || serde_json::json!({ "health": "unchecked" }),
                        |h| h.to_json(),
                    );
                    serde_json::json!({
                        "name": e.name,
                        "address": e.address.to_string(),
                        "weight": e.weight,
                        "in_flight": in_flight,
                        "idle_connections": idle,
                        // Active health, process-wide: healthy, unhealthy or unchecked.
                        "health": health.get("health").cloned().unwrap_or_default(),
                        "active_health": health,
                        // Passive outlier detection is per worker.
                        "ejected": workers.iter().any(|w| w["ejected"] == true),
                        "workers": workers,
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    Response::json(200, &serde_json::json!({ "version": snap.version, "clusters": clusters }))
}
