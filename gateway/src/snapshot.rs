//! An immutable, versioned view of the configuration that workers read.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use gateway_config::Config;

use crate::route::RouteTable;
use crate::tls::ServerTls;
pub use crate::upstream::hashkey::fnv1a64;

pub struct Snapshot {
    /// 1 for the first config, +1 for every applied reload.
    pub version: u64,
    /// FNV-1a 64 of the file's bytes (or of the config's debug form when it came from code).
    pub hash: u64,
    pub loaded_at: SystemTime,
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    pub config: Arc<Config>,
    pub routes: RouteTable,
    /// The listener sockets this config serves, by binding id (see `control`), in
    /// `config.listeners` order.
    pub bindings: Vec<Binding>,
    /// Process-wide rate-limit buckets (`scope = "process"`), by route index.
    pub shared_buckets: Vec<Option<Arc<crate::admission::bucket::SharedBucket>>>,
    /// Each listener's TLS (`None` for plain listeners), in `config.listeners` order: every
    /// certificate and key already read and checked.
    pub tls: Vec<Option<Arc<ServerTls>>>,
}

/// One listener's bound socket set (one socket per worker), shared across reloads while the
/// listener's address is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub id: u64,
    pub name: String,
    /// The address really bound (port 0 resolved).
    pub address: SocketAddr,
}

impl Snapshot {
    /// Builds a snapshot; `previous` lends its process-wide rate-limit buckets to unchanged routes.
    /// `tls` comes from [`crate::tls::load_config`] for this `config`.
    pub fn new(
        version: u64,
        hash: u64,
        source: Option<PathBuf>,
        config: Config,
        bindings: Vec<Binding>,
        tls: Vec<Option<Arc<ServerTls>>>,
        previous: Option<&Snapshot>,
    ) -> Self {
        let routes = RouteTable::new(&config);
        let shared_buckets =
            crate::admission::shared_buckets(&config, previous.map(|p| (&*p.config, p.shared_buckets.as_slice())));
        Self {
            version,
            hash,
            loaded_at: SystemTime::now(),
            source,
            config: Arc::new(config),
            routes,
            bindings,
            shared_buckets,
            tls,
        }
    }

    /// This snapshot with `config`, which differs from its config only in clusters' resolved
    /// endpoints (see `crate::dns`): the version, hash, load time, listeners and TLS stay, so
    /// `/config` shows no reload; workers see a new snapshot and carry their state over.
    pub fn with_endpoints(&self, config: Config) -> Self {
        let mut next = Self::new(
            self.version,
            self.hash,
            self.source.clone(),
            config,
            self.bindings.clone(),
            self.tls.clone(),
            Some(self),
        );
        next.loaded_at = self.loaded_at;
        next
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv_known_values() {
        assert_eq!(super::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
