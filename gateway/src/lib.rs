//! The edge gateway's data plane: thread-per-core workers on io_uring (or epoll), strict
//! HTTP/1.1, routing, upstream pools and per-worker stats.

// The request path's stages (listen, downstream, pipeline, worker, snapshot, route, upstream,
// admission, request, codec, tls, accesslog, stats, runtime: each uses only those after it;
// see docs/architecture.md and tests/layering.rs).
pub mod accesslog;
pub mod admission;
pub mod codec;
pub mod downstream;
pub mod drain;
pub mod listen;
pub mod pipeline;
pub mod request;
pub mod route;
pub mod runtime;
pub mod snapshot;
pub mod stats;
pub mod tls;
pub mod upstream;
pub mod worker;

// The process around the workers.
pub mod control;
pub mod dns;
pub mod health_check;
pub mod logging;
pub mod privileges;
pub mod sdnotify;
pub mod upgrade;

mod admin;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use gateway_config::{Config, Workers};

use runtime::cpus::CpuBudget;
use runtime::WorkerInfo;
use snapshot::Snapshot;
use stats::metrics::WorkerMetrics;
use stats::WorkerStats;
use worker::Shared;

fn access_log_config(s: &gateway_config::AccessLog) -> accesslog::AccessLogConfig {
    accesslog::AccessLogConfig {
        format: match s.format {
            gateway_config::AccessLogFormat::Json => accesslog::Format::Json,
            gateway_config::AccessLogFormat::Combined => accesslog::Format::Combined,
        },
        target: match &s.target {
            gateway_config::AccessLogTarget::Stdout => accesslog::Target::Stdout,
            gateway_config::AccessLogTarget::Stderr => accesslog::Target::Stderr,
            gateway_config::AccessLogTarget::File(p) => accesslog::Target::File(p.clone()),
        },
        buffer_lines: s.buffer_lines,
    }
}

/// How long the config file must be quiet before a change is applied.
const WATCH_DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(200);

/// A running gateway: its workers, listeners and admin server.
pub struct Gateway {
    shared: Arc<Shared>,
    control: Arc<control::Control>,
    threads: Vec<JoinHandle<()>>,
    workers: Vec<WorkerInfo>,
    stats: Vec<Arc<WorkerStats>>,
    metrics: Vec<Arc<WorkerMetrics>>,
    access_log: Option<accesslog::AccessLog>,
    admin: Option<gateway_admin::AdminServer>,
    watcher: Option<gateway_config::watch::ConfigWatcher>,
    /// Polls the TLS certificate, key and CA files and reloads when one changes.
    cert_poller: Option<std::thread::JoinHandle<()>>,
    /// The process's one active health checker (`health_check`); ends on drain.
    health_checker: Option<std::thread::JoinHandle<()>>,
    /// The process's one resolver of host-name endpoints (`dns`); ends on drain.
    resolver: Option<std::thread::JoinHandle<()>>,
    dns: Arc<dns::DnsStatus>,
    /// Hands the listening sockets to a successor process (`server.upgrade_socket`).
    upgrade_thread: Option<std::thread::JoinHandle<()>>,
    upgrade_stop: Arc<AtomicBool>,
    /// A successor took over the sockets (this process drains; systemd follows the successor).
    handed_over: Arc<AtomicBool>,
}

/// Facts about the running process, shown by the admin port.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerInfo {
    pub version: &'static str,
    /// Build profile and target, e.g. `release x86_64-linux`.
    pub build: String,
    pub workers: Vec<WorkerInfo>,
    pub cpus_allowed: Vec<usize>,
    pub cgroup_cpu_quota: Option<f64>,
    pub workers_setting: String,
}

impl Gateway {
    /// Starts from a config file; reloads re-read it.
    pub fn start_from_file(path: &std::path::Path) -> Result<Self, String> {
        Self::start_from_file_with(path, upgrade::Inherited::default())
    }

    /// Starts from a config file on listening sockets taken over from a previous process
    /// (listeners it lacks are bound as usual).
    pub fn start_from_file_with(path: &std::path::Path, inherited: upgrade::Inherited) -> Result<Self, String> {
        Self::start_from_file_as(path, inherited, None)
    }

    /// As [`Gateway::start_from_file_with`], and when `switch_to` is set (started as root with
    /// `server.user`), switches the whole process to that account once every listener and the
    /// admin port are bound, before any worker or helper thread starts.
    pub fn start_from_file_as(
        path: &std::path::Path,
        inherited: upgrade::Inherited,
        switch_to: Option<&privileges::Account>,
    ) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let utf8 = std::str::from_utf8(&text).map_err(|e| format!("{}: not UTF-8: {e}", path.display()))?;
        let config = gateway_config::parse_file(utf8, path).map_err(|e| e.to_string())?;
        Self::start_inner(config, Some(path.to_path_buf()), snapshot::fnv1a64(&text), inherited, switch_to)
    }

    /// Starts from an in-memory config (tests, embedding); [`Gateway::apply`] replaces it.
    pub fn start(config: Config) -> Result<Self, String> {
        let hash = snapshot::fnv1a64(format!("{config:?}").as_bytes());
        Self::start_inner(config, None, hash, upgrade::Inherited::default(), None)
    }

    /// Binds every listener, starts the workers and the admin server. Returns once every worker
    /// runs; on error nothing keeps running.
    fn start_inner(
        config: Config,
        source: Option<std::path::PathBuf>,
        hash: u64,
        mut inherited: upgrade::Inherited,
        switch_to: Option<&privileges::Account>,
    ) -> Result<Self, String> {
        let started = Instant::now();
        warn_timeouts(&config);
        let budget = CpuBudget::detect();
        let n = match config.server.workers {
            Workers::Fixed(n) => n.get(),
            Workers::Auto => {
                let n = budget.auto_workers();
                if let Some(q) = budget.quota {
                    tracing::info!(
                        cpus_allowed = budget.allowed.len(),
                        cgroup_quota = q,
                        workers = n,
                        "workers = auto: cgroup cpu.max quota rounded up"
                    );
                }
                n
            }
        };
        let driver = config.server.io_driver;
        let admin_cfg = config.server.admin.clone();
        let shared = Arc::new(Shared {
            snapshot: Arc::new(ArcSwap::from_pointee(Snapshot::new(
                0,
                hash,
                None,
                config.clone(),
                Vec::new(),
                Vec::new(),
                None,
            ))),
            draining: AtomicBool::new(false),
            handoff: Default::default(),
            heartbeats: worker::heartbeat::Heartbeats::new(n),
            health: Default::default(),
            controllers: Default::default(),
        });
        // The admin socket is bound here, with the listeners, so that both exist before the
        // process switches to an unprivileged user.
        let admin_listener = match (inherited.admin.take(), &admin_cfg) {
            (Some(listener), _) => Some(listener),
            (None, Some(admin)) => Some(
                std::net::TcpListener::bind(admin.address)
                    .map_err(|e| format!("admin cannot bind {}: {e}", admin.address))?,
            ),
            (None, None) => None,
        };
        let control = Arc::new(control::Control::start(config, source, hash, n, &shared, inherited)?);
        if let Some(account) = switch_to {
            privileges::switch(account).map_err(|e| format!("cannot switch to user {:?}: {e}", account.user))?;
            tracing::info!(
                user = %account.user,
                uid = account.uid,
                group = %account.group,
                gid = account.gid,
                "switched to an unprivileged user; root cannot be regained"
            );
        }
        let stats: Vec<Arc<WorkerStats>> = (0..n).map(|_| Arc::new(WorkerStats::default())).collect();
        let metrics: Vec<Arc<WorkerMetrics>> = (0..n).map(|i| Arc::new(WorkerMetrics::new(i))).collect();
        let access_log = match &shared.snapshot.load().config.server.access_log {
            Some(settings) => {
                Some(accesslog::AccessLog::start(access_log_config(settings)).map_err(|e| format!("access log: {e}"))?)
            }
            None => None,
        };
        let endpoints: Vec<Arc<upstream::EndpointViews>> = (0..n).map(|_| Arc::default()).collect();
        let parts = stats
            .iter()
            .zip(&metrics)
            .zip(&endpoints)
            .enumerate()
            .map(|(i, ((s, m), e))| worker::WorkerParts {
                stats: Arc::clone(s),
                endpoints: Arc::clone(e),
                metrics: Arc::clone(m),
                log: access_log.as_ref().map(|l| l.worker_handle(i)),
            })
            .collect();
        let label = {
            let snap = shared.snapshot.load();
            snap.bindings.iter().map(|b| format!("{}@{}", b.name, b.address)).collect::<Vec<_>>().join(", ")
        };
        let for_workers = Arc::clone(&shared);
        let main =
            move |id, parts| listen::run(std::rc::Rc::new(worker::Worker::new(id, Arc::clone(&for_workers), parts)));
        let for_exit = Arc::clone(&shared);
        let exited = move |id: usize, clean: bool| for_exit.heartbeats.exited(id, clean);
        logging::install_panic_hook();
        let (threads, workers) = match runtime::spawn_workers(driver, &budget.allowed, parts, &label, main, exited) {
            Ok(x) => x,
            Err(e) => {
                shared.draining.store(true, Ordering::Release);
                return Err(e);
            }
        };
        let watch = shared.snapshot.load().config.server.watch;
        let mut gateway = Self {
            shared,
            control,
            threads,
            workers,
            stats,
            metrics,
            access_log,
            admin: None,
            watcher: None,
            cert_poller: None,
            health_checker: None,
            resolver: None,
            dns: Arc::default(),
            upgrade_thread: None,
            upgrade_stop: Arc::new(AtomicBool::new(false)),
            handed_over: Arc::new(AtomicBool::new(false)),
        };
        match health_check::start(Arc::clone(&gateway.shared)) {
            Ok(t) => gateway.health_checker = Some(t),
            Err(e) => tracing::error!(error = %e, "cannot start the health checker; endpoints stay healthy"),
        }
        match dns::start(Arc::clone(&gateway.shared), Arc::clone(&gateway.control), Arc::clone(&gateway.dns)) {
            Ok(t) => gateway.resolver = Some(t),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the resolver; host-name endpoints keep their addresses")
            }
        }
        if let (true, Some(path)) = (watch, gateway.control.source().map(std::path::Path::to_path_buf)) {
            let control = Arc::clone(&gateway.control);
            let on_change = move || {
                let _ = control.reload("file watcher");
            };
            match gateway_config::watch::ConfigWatcher::start(&path, WATCH_DEBOUNCE, on_change) {
                Ok(w) => gateway.watcher = Some(w),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot watch the config file; SIGHUP and POST /reload still reload")
                }
            }
            let (control, shared) = (Arc::clone(&gateway.control), Arc::clone(&gateway.shared));
            gateway.cert_poller = std::thread::Builder::new()
                .name("cert-poller".into())
                .spawn(move || poll_certificates(&control, &shared))
                .ok();
        }
        if let Some(admin) = admin_cfg {
            let info = ServerInfo {
                version: env!("CARGO_PKG_VERSION"),
                build: format!(
                    "{} {}-{}",
                    if cfg!(debug_assertions) { "debug" } else { "release" },
                    std::env::consts::ARCH,
                    std::env::consts::OS
                ),
                workers: gateway.workers.clone(),
                cpus_allowed: budget.allowed.clone(),
                cgroup_cpu_quota: budget.quota,
                workers_setting: match gateway.snapshot().config.server.workers {
                    Workers::Auto => "auto".into(),
                    Workers::Fixed(n) => n.to_string(),
                },
            };
            let ctx = admin::AdminContext {
                shared: Arc::clone(&gateway.shared),
                control: Arc::clone(&gateway.control),
                stats: gateway.stats.clone(),
                metrics: gateway.metrics.clone(),
                endpoints: endpoints.clone(),
                access_log: gateway.access_log.as_ref().map(accesslog::AccessLog::stats),
                requests: Default::default(),
                info,
                started,
                token: admin.token.clone(),
                dns: Arc::clone(&gateway.dns),
            };
            let server = match admin_listener {
                Some(listener) => gateway_admin::AdminServer::from_listener(listener, admin::handler(ctx)),
                None => gateway_admin::AdminServer::start(admin.address, admin::handler(ctx)),
            };
            match server {
                Ok(server) => {
                    tracing::info!(address = %server.local_addr(), "admin listening");
                    gateway.admin = Some(server);
                }
                Err(e) => {
                    gateway.begin_drain();
                    return Err(format!("admin cannot bind {}: {e}", admin.address));
                }
            }
        }
        gateway.start_upgrade_socket();
        Ok(gateway)
    }

    /// Re-reads the config file and applies it (SIGHUP, the file watcher, `POST /reload`).
    pub fn reload(&self, trigger: &str) -> Result<control::Applied, String> {
        self.control.reload(trigger)
    }

    /// Reopens the access log file by its path (after a rotation renamed it; SIGHUP). Lines
    /// handed over before go to the old file; stdout and stderr are left alone.
    pub fn reopen_access_log(&self) {
        if let Some(log) = &self.access_log {
            log.reopen();
        }
    }

    /// Applies an in-memory config.
    pub fn apply(&self, config: Config) -> Result<control::Applied, String> {
        let hash = snapshot::fnv1a64(format!("{config:?}").as_bytes());
        self.control.apply(config, hash, "api")
    }

    pub fn control(&self) -> &Arc<control::Control> {
        &self.control
    }

    /// The bound address of the named listener in the current config (port 0 resolved).
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.shared.snapshot.load().bindings.iter().find(|b| b.name == name).map(|b| b.address)
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|a| a.local_addr())
    }

    pub fn workers(&self) -> &[WorkerInfo] {
        &self.workers
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot.load_full()
    }

    /// Per-worker stats and totals as JSON (the admin `/stats` body).
    pub fn stats_json(&self) -> serde_json::Value {
        stats::to_json(&self.stats)
    }

    /// Stops accepting, lets in-flight requests finish (up to the drain timeout), closes idle
    /// connections. Returns immediately; [`Gateway::join`] waits.
    pub fn begin_drain(&self) {
        self.shared.draining.store(true, Ordering::Release);
    }

    /// Offers this process's listening sockets to a successor on `server.upgrade_socket`; once
    /// one serves on them, this process drains. Without a config file there is nothing to
    /// upgrade from.
    fn start_upgrade_socket(&mut self) {
        let snap = self.shared.snapshot.load();
        let (Some(path), Some(_)) = (snap.config.server.upgrade_socket.clone(), self.control.source()) else {
            return;
        };
        let control = Arc::clone(&self.control);
        let admin = self.admin.as_ref().and_then(|a| a.listener().try_clone().ok());
        let offer = move |f: &mut upgrade::SendOffer<'_>| {
            use std::os::fd::AsFd;
            control.offer_sockets(admin.as_ref().map(AsFd::as_fd), f)
        };
        let shared = Arc::clone(&self.shared);
        let handed_over = Arc::clone(&self.handed_over);
        let on_handed_over = move || {
            handed_over.store(true, Ordering::Release);
            shared.draining.store(true, Ordering::Release);
        };
        match upgrade::serve(path.clone(), Arc::clone(&self.upgrade_stop), offer, on_handed_over) {
            Ok(t) => {
                tracing::info!(path = %path.display(), "upgrade socket listening");
                self.upgrade_thread = Some(t);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open the upgrade socket; binary upgrades need a restart")
            }
        }
    }

    /// Workers whose thread ended with a panic (outside any connection, which would have been
    /// contained): the process should drain and exit so that its supervisor restarts it.
    pub fn dead_workers(&self) -> Vec<usize> {
        let pulses = self.shared.heartbeats.pulses(Instant::now());
        pulses.enumerate().filter(|(_, p)| *p == worker::heartbeat::Pulse::Died).map(|(i, _)| i).collect()
    }

    /// A probe of worker liveness for the systemd watchdog.
    pub fn liveness(&self) -> worker::Liveness {
        worker::Liveness::new(Arc::clone(&self.shared))
    }

    /// Whether a successor process took over the listening sockets.
    pub fn handed_over(&self) -> bool {
        self.handed_over.load(Ordering::Acquire)
    }

    pub fn is_draining(&self) -> bool {
        self.shared.draining.load(Ordering::Acquire)
    }

    /// Waits for every worker to finish, then stops the admin server.
    pub fn join(mut self) {
        self.watcher.take();
        if let Some(p) = self.cert_poller.take() {
            let _ = p.join();
        }
        self.upgrade_stop.store(true, Ordering::Release);
        if let Some(t) = self.upgrade_thread.take() {
            let _ = t.join();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(t) = self.health_checker.take() {
            let _ = t.join();
        }
        if let Some(t) = self.resolver.take() {
            let _ = t.join();
        }
        if let Some(log) = self.access_log.take() {
            log.shutdown();
        }
        if let Some(a) = self.admin.take() {
            a.stop();
        }
    }

    /// Drains and waits.
    pub fn shutdown(self) {
        self.begin_drain();
        self.join();
    }
}

/// How often certificate files are checked for changes.
const CERT_POLL: Duration = Duration::from_secs(2);

/// Reloads when a TLS file of the serving snapshot changed on disk (a renewed certificate,
/// also when replaced through a symlink swap as Kubernetes secrets are). A file that fails to
/// load is retried only once it changes again; the old certificate keeps serving meanwhile.
fn poll_certificates(control: &control::Control, shared: &worker::Shared) {
    let mut last_failed: Option<u64> = None;
    let step = Duration::from_millis(100);
    loop {
        let mut waited = Duration::ZERO;
        while waited < CERT_POLL {
            if shared.draining.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(step);
            waited += step;
        }
        let snap = shared.snapshot.load();
        if !snap.tls.iter().flatten().any(|t| t.files_changed()) {
            continue;
        }
        let state = snap.tls.iter().flatten().fold(0u64, |acc, t| acc.rotate_left(11) ^ t.disk_state());
        if last_failed == Some(state) {
            continue;
        }
        drop(snap);
        match control.reload("certificate files changed") {
            Ok(_) => last_failed = None,
            Err(_) => last_failed = Some(state),
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.upgrade_stop.store(true, Ordering::Release);
        if !self.threads.is_empty() {
            self.begin_drain();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// Logs every route whose tries cannot fit its timeout (`gateway check` fails on them; a
/// running gateway applies the config and cuts each try to what remains).
pub(crate) fn warn_timeouts(config: &Config) {
    for problem in gateway_config::timeouts::budgets(config).iter().filter_map(|b| b.problem()) {
        tracing::warn!("{problem}");
    }
}
