//! The control plane of one process: applies configurations atomically.
//!
//! A candidate is parsed and validated completely; listener sockets it adds are bound before
//! anything changes (a bind failure rejects the whole candidate); only then is the new
//! [`Snapshot`] published with one atomic store. Workers pick it up on their next request
//! (routes, clusters) and on their next tick (listeners). An invalid candidate changes nothing:
//! the error is logged, counted and kept for the admin port.
//!
//! Settings that cannot change in a running process (`workers`, `io_driver`, the admin
//! address) keep their running values; the reload reports each one as a warning.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use gateway_config::Config;

use crate::runtime::listeners;
use crate::snapshot::{fnv1a64, Binding, Snapshot};
use crate::tls::ServerTls;
use crate::worker::Shared;

pub use crate::worker::{lock, Handoff};

pub struct Control {
    shared: Arc<Shared>,
    source: Option<PathBuf>,
    workers: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Live bindings by configured address (and name, for port 0, which binds anew otherwise).
    bindings: HashMap<BindKey, Binding>,
    next_binding: u64,
    reloads_ok: u64,
    reloads_failed: u64,
    last_error: Option<ReloadFailure>,
    last_warnings: Vec<String>,
    /// The last load was rejected (the previous config runs).
    last_failed: bool,
    /// When a config was last loaded successfully (start or reload).
    last_success: Option<SystemTime>,
    /// Duplicates of every live binding's sockets, by binding id, kept to hand them to a new
    /// process on upgrade (the workers own the originals).
    dups: HashMap<u64, Vec<std::net::TcpListener>>,
    /// Sockets received from the previous process, used by the first config's listeners.
    inherited: crate::upgrade::Inherited,
}

type BindKey = (SocketAddr, Option<String>);

fn bind_key(l: &gateway_config::Listener) -> BindKey {
    (l.address, (l.address.port() == 0).then(|| l.name.clone()))
}

/// A rejected candidate, as shown on the admin port.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadFailure {
    pub at: SystemTime,
    pub trigger: String,
    pub message: String,
}

/// The result of an applied reload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Applied {
    pub version: u64,
    pub hash: String,
    /// Settings that changed in the file but cannot change live (kept at their running value).
    pub warnings: Vec<String>,
    /// False when the content was identical to the running config (nothing swapped).
    pub changed: bool,
}

/// Counters and the last error, for `/config` and `/metrics`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadStatus {
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub last_error: Option<ReloadFailure>,
    pub last_warnings: Vec<String>,
    /// Whether the last load (start, file change, SIGHUP, `POST /reload`) succeeded.
    pub last_reload_ok: bool,
    /// When a config was last loaded successfully.
    pub last_success_at: Option<SystemTime>,
}

impl Control {
    /// Binds the first config's listeners and publishes it as version 1.
    pub fn start(
        config: Config,
        source: Option<PathBuf>,
        hash: u64,
        workers: usize,
        handoff_to: &Arc<Shared>,
        inherited: crate::upgrade::Inherited,
    ) -> Result<Self, String> {
        let state = State { inherited, ..State::default() };
        let control = Self { shared: Arc::clone(handoff_to), source, workers, state: Mutex::new(state) };
        {
            let tls = control.load_tls(&config, None)?;
            let mut state = control.lock();
            let bindings = control.bind_new(&mut state, &config)?;
            let snap = Snapshot::new(1, hash, control.source.clone(), config, bindings, tls, None);
            control.shared.snapshot.store(Arc::new(snap));
            state.last_success = Some(SystemTime::now());
        }
        Ok(control)
    }

    /// Reads the config file again and applies it. `trigger` says why (for logs and `/config`).
    pub fn reload(&self, trigger: &str) -> Result<Applied, String> {
        let Some(path) = self.source.clone() else {
            return Err("this gateway was started from an in-memory config; there is no file to reload".into());
        };
        crate::sdnotify::reloading();
        let result = self.reload_file(&path, trigger);
        let version = self.shared.snapshot.load().version;
        crate::sdnotify::ready(&format!("serving config version {version}"));
        result
    }

    fn reload_file(&self, path: &Path, trigger: &str) -> Result<Applied, String> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) => return self.fail(trigger, format!("cannot read {}: {e}", path.display())),
        };
        let hash = fnv1a64(&text);
        let tls_changed = self.shared.snapshot.load().tls.iter().flatten().any(|t| t.files_changed());
        if hash == self.shared.snapshot.load().hash && !tls_changed {
            let mut state = self.lock();
            state.last_failed = false;
            state.last_success = Some(SystemTime::now());
            drop(state);
            let snap = self.shared.snapshot.load();
            return Ok(Applied { version: snap.version, hash: hex(hash), warnings: Vec::new(), changed: false });
        }
        let parsed = std::str::from_utf8(&text)
            .map_err(|e| format!("{}: not UTF-8: {e}", path.display()))
            .and_then(|t| gateway_config::parse_file(t, path).map_err(|e| e.to_string()));
        match parsed {
            Ok(config) => self.apply(config, hash, trigger),
            Err(message) => self.fail(trigger, message),
        }
    }

    /// Applies an already validated config (used by reloads and by in-process callers).
    pub fn apply(&self, mut config: Config, hash: u64, trigger: &str) -> Result<Applied, String> {
        let mut state = self.lock();
        let current = self.shared.snapshot.load_full();
        let warnings = keep_fixed_settings(&mut config, &current.config);
        crate::warn_timeouts(&config);
        // Certificates are read before any socket is bound: a bad file changes nothing.
        let tls = match self.load_tls(&config, Some(&current)) {
            Ok(tls) => tls,
            Err(message) => {
                drop(state);
                return self.fail(trigger, message);
            }
        };
        let bindings = match self.bind_new(&mut state, &config) {
            Ok(b) => b,
            Err(message) => {
                drop(state);
                return self.fail(trigger, message);
            }
        };
        let version = current.version + 1;
        let snap = Snapshot::new(version, hash, self.source.clone(), config, bindings, tls, Some(&current));
        self.shared.snapshot.store(Arc::new(snap));
        state.reloads_ok += 1;
        state.last_failed = false;
        state.last_success = Some(SystemTime::now());
        state.last_warnings = warnings.clone();
        for w in &warnings {
            tracing::warn!(trigger, "{w}");
        }
        tracing::info!(trigger, version, hash = %hex(hash), "configuration applied");
        Ok(Applied { version, hash: hex(hash), warnings, changed: true })
    }

    /// Publishes new endpoint sets found by re-resolving host names, without a reload: each
    /// update names a cluster, the endpoints as configured that it was resolved from, and the
    /// resolved set. An update whose cluster a reload changed meanwhile (other configured
    /// endpoints, or gone) is dropped. Returns the clusters changed.
    pub fn publish_endpoints(&self, updates: Vec<crate::dns::Update>) -> Vec<String> {
        let _serialized_with_reloads = self.lock();
        let current = self.shared.snapshot.load_full();
        let mut config = (*current.config).clone();
        let mut changed = Vec::new();
        for update in updates {
            let found =
                config.clusters.iter_mut().find(|c| c.name == update.cluster && c.configured == update.configured);
            if let Some(cluster) = found.filter(|c| c.endpoints != update.endpoints) {
                cluster.endpoints = update.endpoints;
                changed.push(update.cluster);
            }
        }
        if !changed.is_empty() {
            self.shared.snapshot.store(Arc::new(current.with_endpoints(config)));
        }
        changed
    }

    pub fn status(&self) -> ReloadStatus {
        let s = self.lock();
        ReloadStatus {
            reloads_ok: s.reloads_ok,
            reloads_failed: s.reloads_failed,
            last_error: s.last_error.clone(),
            last_warnings: s.last_warnings.clone(),
            last_reload_ok: !s.last_failed,
            last_success_at: s.last_success,
        }
    }

    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    fn fail(&self, trigger: &str, message: String) -> Result<Applied, String> {
        tracing::error!(trigger, "configuration rejected; the running configuration stays:\n{message}");
        let mut state = self.lock();
        state.reloads_failed += 1;
        state.last_failed = true;
        state.last_error =
            Some(ReloadFailure { at: SystemTime::now(), trigger: trigger.into(), message: message.clone() });
        Err(message)
    }

    /// Reads every listener's certificates and keys (keeping `previous`'s for unchanged ones)
    /// and checks the clusters' CA files; one line per problem, prefixed by the config file.
    fn load_tls(&self, config: &Config, previous: Option<&Snapshot>) -> Result<Vec<Option<Arc<ServerTls>>>, String> {
        let previous = previous.map(|p| (&*p.config, p.tls.as_slice()));
        crate::tls::load_config(config, previous).map_err(|errors| {
            let source = self.source.as_ref().map_or_else(|| "<config>".to_owned(), |p| p.display().to_string());
            errors.iter().map(|e| format!("{source}: {e}")).collect::<Vec<_>>().join("\n")
        })
    }

    /// Resolves every listener of `config` to a binding: unchanged addresses keep theirs, new
    /// ones are bound now and handed to the workers. Bindings no longer used are forgotten
    /// (workers close them when they see the new snapshot). On error nothing changes.
    fn bind_new(&self, state: &mut State, config: &Config) -> Result<Vec<Binding>, String> {
        let mut result = Vec::with_capacity(config.listeners.len());
        let mut fresh: Vec<(BindKey, Binding, Vec<TcpListener>)> = Vec::new();
        for l in &config.listeners {
            if let Some(b) = state.bindings.get(&bind_key(l)) {
                result.push(Binding { name: l.name.clone(), ..b.clone() });
                continue;
            }
            let bound = match state.inherited.take(&l.name, l.address) {
                Some((address, sockets)) => listeners::adopt(&l.name, address, sockets, l.backlog, self.workers),
                None => listeners::bind(&l.name, l.address, l.backlog, self.workers),
            }
            .map_err(|e| format!("listeners: {} cannot bind {}: {e}", l.name, l.address))?;
            state.next_binding += 1;
            let binding = Binding { id: state.next_binding, name: l.name.clone(), address: bound.address };
            tracing::info!(listener = %l.name, address = %bound.address, "listener bound");
            result.push(binding.clone());
            fresh.push((bind_key(l), binding, bound.sockets));
        }
        let mut handoff = lock(&self.shared.handoff);
        for (configured, binding, sockets) in fresh {
            let dups = sockets.iter().filter_map(|s| s.try_clone().ok()).collect();
            state.dups.insert(binding.id, dups);
            handoff.insert(binding.id, sockets.into_iter().map(Some).collect());
            state.bindings.insert(configured, binding);
        }
        let live: Vec<u64> = result.iter().map(|b| b.id).collect();
        state.bindings.retain(|_, b| live.contains(&b.id));
        state.dups.retain(|id, _| live.contains(id));
        // Sockets of bindings that were never taken and are no longer used are closed here.
        handoff.retain(|id, slots| live.contains(id) && slots.iter().any(Option::is_some));
        Ok(result)
    }

    /// Calls `f` with every live listener's sockets (for a takeover by a new process), holding
    /// them open meanwhile.
    pub fn offer_sockets(
        &self,
        admin: Option<std::os::fd::BorrowedFd<'_>>,
        f: &mut crate::upgrade::SendOffer<'_>,
    ) -> std::io::Result<()> {
        use std::os::fd::AsFd;
        let state = self.lock();
        let offered: Vec<crate::upgrade::Offered<'_>> = state
            .bindings
            .values()
            .filter_map(|b| {
                let dups = state.dups.get(&b.id)?;
                Some(crate::upgrade::Offered {
                    name: &b.name,
                    address: b.address,
                    sockets: dups.iter().map(AsFd::as_fd).collect(),
                })
            })
            .collect();
        f(&offered, admin)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// Settings a running process cannot change: keep the running values, say so.
fn keep_fixed_settings(next: &mut Config, running: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    let (n, r) = (&mut next.server, &running.server);
    if n.workers != r.workers {
        warnings.push(format!(
            "server.workers changed ({:?} -> {:?}): needs a restart; keeping {:?}",
            r.workers, n.workers, r.workers
        ));
        n.workers = r.workers;
    }
    if n.io_driver != r.io_driver {
        warnings.push(format!("server.io_driver changed: needs a restart; keeping {:?}", r.io_driver));
        n.io_driver = r.io_driver;
    }
    if n.admin.as_ref().map(|a| a.address) != r.admin.as_ref().map(|a| a.address) {
        warnings.push("server.admin address changed: needs a restart; keeping the running admin listener".into());
        n.admin.clone_from(&r.admin);
    }
    if n.log_level != r.log_level {
        warnings.push(format!("server.log_level changed: needs a restart; keeping {:?}", r.log_level));
        n.log_level.clone_from(&r.log_level);
    }
    if (&n.user, &n.group) != (&r.user, &r.group) {
        // The process switched (or not) at start, for good.
        warnings.push("server.user or server.group changed: needs a restart; the process keeps its user".into());
        n.user.clone_from(&r.user);
        n.group.clone_from(&r.group);
    }
    warnings
}

pub fn hex(hash: u64) -> String {
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn user_and_group_changes_need_a_restart() {
        let text = "[server]\nworkers = 1\n[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:0\"\n";
        let running = gateway_config::parse(text, "a.toml").unwrap();
        let with_user = text.replace("workers = 1", "workers = 1\nuser = \"nobody\"");
        let mut next = gateway_config::parse(&with_user, "b.toml").unwrap();
        let warnings = keep_fixed_settings(&mut next, &running);
        assert_eq!(warnings, ["server.user or server.group changed: needs a restart; the process keeps its user"]);
        assert_eq!(next.server.user, None);
        let mut same = gateway_config::parse(text, "c.toml").unwrap();
        assert!(keep_fixed_settings(&mut same, &running).is_empty());
    }
}
