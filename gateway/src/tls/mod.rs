//! TLS for listeners and upstreams: certificates and keys read and checked once per applied
//! configuration, turned into rustls configs the data plane uses as they are.
//!
//! [`ServerTls::load`] reads every file a listener's `tls` names; any problem (unreadable file,
//! no key, a key that does not match its certificate, a CA file without certificates) is a
//! [`TlsError`] naming the config key and the file, so a bad certificate rejects the whole
//! configuration and the running one keeps serving.

mod failure;
mod identity;
mod info;
mod pem;
mod resolver;
#[cfg(test)]
#[path = "../../tests/common/tls.rs"]
mod testpki;
#[cfg(test)]
mod tests;
mod tickets;

use std::path::PathBuf;
use std::sync::Arc;

use gateway_config::{ClientAuthMode, Config, ListenerTls, Protocol, TlsVersion, UpstreamTls};
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{ClientConfig, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::ServerName;

pub use failure::{handshake_failure_reason, HANDSHAKE_FAILURE_REASONS};
pub use identity::ClientIdentity;
pub use info::CertInfo;

use pem::{file_error, FileSet};
use resolver::SniResolver;

/// A problem with a TLS file or setting, naming the config key (e.g.
/// `listeners.tls.certificates[1].key`) and, for files, the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("{key}: {}: {message}", path.display())]
    File { key: String, path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Setting { key: String, message: String },
}

impl TlsError {
    /// The same error with its key placed in `section[index]` (`listeners.tls.x` ->
    /// `listeners[2].tls.x`).
    pub fn at_index(self, section: &str, index: usize) -> TlsError {
        let place = |key: String| match key.strip_prefix(section).and_then(|rest| rest.strip_prefix('.')) {
            Some(rest) => format!("{section}[{index}].{rest}"),
            None => key,
        };
        match self {
            TlsError::File { key, path, message } => TlsError::File { key: place(key), path, message },
            TlsError::Setting { key, message } => TlsError::Setting { key: place(key), message },
        }
    }
}

/// Loads the TLS of every listener of `config`, in listener order (`None` for plain
/// listeners), and checks that every cluster's TLS files load. `previous` is the running
/// config and its listener TLS: a listener whose name, settings and file contents are unchanged
/// keeps its [`ServerTls`] (and so its session cache and ticket keys). Every problem is
/// reported, with its key placed (`listeners[1].tls.certificates[0].key`).
pub fn load_config(
    config: &Config,
    previous: Option<(&Config, &[Option<Arc<ServerTls>>])>,
) -> Result<Vec<Option<Arc<ServerTls>>>, Vec<TlsError>> {
    let mut errors = Vec::new();
    let mut loaded = Vec::with_capacity(config.listeners.len());
    for (i, listener) in config.listeners.iter().enumerate() {
        let Some(tls) = &listener.tls else {
            loaded.push(None);
            continue;
        };
        match ServerTls::load(tls, &listener.protocols) {
            Ok(fresh) => {
                let kept = previous.and_then(|(running, all)| {
                    let j = running.listeners.iter().position(|l| l.name == listener.name)?;
                    all.get(j)?.as_ref().filter(|old| old.same_as(&fresh)).map(Arc::clone)
                });
                loaded.push(Some(kept.unwrap_or_else(|| Arc::new(fresh))));
            }
            Err(e) => {
                errors.push(e.at_index("listeners", i));
                loaded.push(None);
            }
        }
    }
    for (i, cluster) in config.clusters.iter().enumerate() {
        if let Some(Err(e)) = cluster.tls.as_ref().map(|tls| client_config(tls, &[])) {
            errors.push(e.at_index("clusters", i));
        }
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

/// A listener's TLS, ready to accept with: the rustls config and what it was built from.
#[derive(Debug)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    files: Vec<PathBuf>,
    /// FNV-1a of each file's bytes as last seen, to notice a certificate renewed in place.
    file_hashes: Vec<u64>,
    fingerprint: u64,
    settings: ListenerTls,
    protocols: Vec<Protocol>,
    /// Each configured certificate's leaf, in config order.
    certificates: Vec<CertInfo>,
}

impl ServerTls {
    /// Reads and checks every certificate, key and CA file of `tls`, and builds the server
    /// config: versions from `min_version` (never below 1.2), cipher suite chosen by the server's
    /// order (`ignore_client_order`), ALPN = `protocols` in order, SNI
    /// selection by exact name or one-label wildcard (missing or unknown SNI: the first
    /// certificate, or a failed handshake with `unknown_sni = "refuse"`), session cache and
    /// tickets as configured, and client certificates verified against `client_auth.ca`.
    pub fn load(tls: &ListenerTls, protocols: &[Protocol]) -> Result<ServerTls, TlsError> {
        let provider = provider();
        let mut files = FileSet::default();
        let (resolver, certificates) = SniResolver::load(tls, &provider, &mut files)?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions(tls.min_version))
            .map_err(|e| setting("listeners.tls.min_version", e))?;
        let builder = match &tls.client_auth {
            None => builder.with_no_client_auth(),
            Some(auth) => {
                let key = "listeners.tls.client_auth.ca";
                let roots = files.roots(key, &auth.ca)?;
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
                let verifier = match auth.mode {
                    ClientAuthMode::Required => verifier,
                    ClientAuthMode::Optional => verifier.allow_unauthenticated(),
                };
                builder.with_client_cert_verifier(verifier.build().map_err(|e| setting(key, e))?)
            }
        };
        let mut config = builder.with_cert_resolver(Arc::new(resolver));
        // The server's preference decides the suite (the provider's order: AES-256-GCM,
        // AES-128-GCM, then ChaCha20-Poly1305, forward-secret only), not the client's.
        config.ignore_client_order = true;
        config.alpn_protocols = protocols.iter().map(|p| p.alpn().to_vec()).collect();
        config.session_storage = if tls.session_cache > 0 {
            ServerSessionMemoryCache::new(tls.session_cache)
        } else {
            Arc::new(NoServerSessionStorage {})
        };
        if tls.session_tickets && !tls.session_ticket_keys.is_empty() {
            let key = |i: usize| format!("listeners.tls.session_ticket_keys[{i}]");
            let bytes = tls
                .session_ticket_keys
                .iter()
                .enumerate()
                .map(|(i, path)| files.bytes(&key(i), path))
                .collect::<Result<Vec<_>, _>>()?;
            let ticketer = tickets::FileTicketer::new(&bytes).map_err(|(i, message)| {
                let path = tls.session_ticket_keys.get(i).map_or_else(PathBuf::new, Clone::clone);
                file_error(&key(i), &path, message)
            })?;
            config.ticketer = Arc::new(ticketer);
        } else if tls.session_tickets {
            config.ticketer =
                rustls::crypto::aws_lc_rs::Ticketer::new().map_err(|e| setting("listeners.tls.session_tickets", e))?;
        } else if tls.session_cache == 0 {
            // Nothing could resume: do not send TLS 1.3 tickets that would never be honoured.
            config.send_tls13_tickets = 0;
        }
        let (files, fingerprint) = files.finish();
        let file_hashes = files.iter().map(|f| file_hash(f)).collect();
        Ok(ServerTls {
            config: Arc::new(config),
            files,
            file_hashes,
            fingerprint,
            settings: tls.clone(),
            protocols: protocols.to_vec(),
            certificates,
        })
    }

    /// The rustls config to accept connections with.
    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config)
    }

    /// Whether the server writes session tickets right after every TLS 1.3 handshake (then
    /// they carry the ACK of the client's Finished). False when neither tickets nor the session
    /// cache are on: nothing could resume, so none are sent.
    pub fn tickets_after_tls13(&self) -> bool {
        self.config.send_tls13_tickets > 0
    }

    /// Each configured certificate's leaf, in config order.
    pub fn certificates(&self) -> &[CertInfo] {
        &self.certificates
    }

    /// Every file read, in the order read, each once (for a watcher).
    pub fn files(&self) -> Vec<PathBuf> {
        self.files.clone()
    }

    /// A hash of the bytes of every file read (FNV-1a 64, not for security): equal
    /// fingerprints mean the files have not changed.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Whether any file changed on disk since it was loaded (a renewed certificate written in
    /// place): then a reload must load it again even if the config text is unchanged.
    pub fn files_changed(&self) -> bool {
        self.files.iter().zip(&self.file_hashes).any(|(f, h)| file_hash(f) != *h)
    }

    /// A hash of every file's current bytes on disk (changes when any file does).
    pub fn disk_state(&self) -> u64 {
        self.files.iter().fold(0, |acc, f| acc.rotate_left(7) ^ file_hash(f))
    }

    /// Whether this was loaded from the same settings, protocols and file contents as `other`
    /// (then either may be kept, with its session cache and ticket keys).
    pub fn same_as(&self, other: &ServerTls) -> bool {
        self.fingerprint == other.fingerprint && self.settings == other.settings && self.protocols == other.protocols
    }
}

/// FNV-1a 64 of a file's bytes; 0 when it cannot be read.
fn file_hash(path: &std::path::Path) -> u64 {
    let Ok(bytes) = std::fs::read(path) else { return 0 };
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// A client config for connections to a cluster's endpoints: TLS 1.2 and 1.3, server
/// certificates verified against the CAs in `tls.ca` only, ALPN `alpn` in order. The caller
/// sends `tls.sni` as the server name (checked here to be a valid DNS name).
pub fn client_config(tls: &UpstreamTls, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, TlsError> {
    ServerName::try_from(tls.sni.as_str()).map_err(|e| setting("clusters.tls.sni", e))?;
    let mut files = FileSet::default();
    let roots = files.roots("clusters.tls.ca", &tls.ca)?;
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions(TlsVersion::Tls12))
        .map_err(|e| setting("clusters.tls", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// aws-lc-rs with its default cipher suites and key exchange groups.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

static TLS13_ONLY: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

/// TLS 1.3 and, unless `min` is 1.3, TLS 1.2.
fn versions(min: TlsVersion) -> &'static [&'static SupportedProtocolVersion] {
    match min {
        TlsVersion::Tls12 => rustls::ALL_VERSIONS,
        TlsVersion::Tls13 => &TLS13_ONLY,
    }
}

fn setting(key: &str, error: impl std::fmt::Display) -> TlsError {
    TlsError::Setting { key: key.to_owned(), message: error.to_string() }
}
