//! Listener and upstream TLS, and the protocols spoken over it.

use std::path::PathBuf;
use std::time::Duration;

use super::ser;

/// An HTTP version a listener serves, named as in ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Protocol {
    #[serde(rename = "http/1.1")]
    Http1,
    #[serde(rename = "h2")]
    H2,
}

impl Protocol {
    /// The ALPN protocol identifier (RFC 7301).
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::Http1 => b"http/1.1",
            Protocol::H2 => b"h2",
        }
    }
}

/// `listeners[].tls`: the shape of a TLS listener. Files are named, not read: the gateway reads
/// and checks them when it applies the configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListenerTls {
    /// At least one. The first is served when SNI is missing or matches no name (unless
    /// `unknown_sni` is `Refuse`).
    pub certificates: Vec<CertificateFiles>,
    pub unknown_sni: UnknownSni,
    pub min_version: TlsVersion,
    /// Longest time from accept to a completed handshake; finite and positive.
    #[serde(serialize_with = "ser::duration")]
    pub handshake_timeout: Duration,
    /// Stateless session tickets (resumption without server state).
    pub session_tickets: bool,
    /// Files of session ticket keys (48 or 80 random bytes each): the first encrypts new
    /// tickets, every one decrypts, so processes reading the same files (a successor after an
    /// upgrade, other hosts behind one address) resume each other's sessions. Empty: keys made
    /// at start, rotated every 6 hours, known to this process only.
    pub session_ticket_keys: Vec<PathBuf>,
    /// Entries of the server-side session cache; 0 disables it.
    pub session_cache: usize,
    /// `None`: clients are not asked for a certificate.
    pub client_auth: Option<ClientAuth>,
    /// Lower-case header name: always removed from client requests on this listener, and set
    /// from the verified client certificate when there is one.
    pub identity_header: String,
}

/// One certificate chain and its private key, as PEM files. Relative paths in a file loaded
/// with [`crate::load`] are already resolved against the config file's directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertificateFiles {
    /// The leaf certificate first, then its intermediates.
    pub cert: PathBuf,
    pub key: PathBuf,
    /// SNI names served with this certificate: lower-case DNS names, or `*.domain` wildcards
    /// covering exactly one leftmost label; no trailing dot. Empty: the DNS names of the leaf
    /// certificate's subjectAltName are used.
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownSni {
    /// Serve the first certificate.
    Default,
    /// Fail the handshake.
    Refuse,
}

/// The lowest TLS version accepted (never below 1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

/// Client certificates, verified against `ca`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClientAuth {
    /// PEM file of the CA certificates trusted to issue client certificates.
    pub ca: PathBuf,
    pub mode: ClientAuthMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuthMode {
    /// A client without a valid certificate fails the handshake.
    Required,
    /// A client may send no certificate; one it sends must be valid.
    Optional,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum UpstreamProtocol {
    #[serde(rename = "http/1.1")]
    Http1,
    /// HTTP/2: negotiated by ALPN over TLS, with prior knowledge over plain TCP.
    #[serde(rename = "h2")]
    H2,
    /// Offer `h2` and `http/1.1` by ALPN and speak what the upstream chooses (TLS only).
    #[serde(rename = "auto")]
    Auto,
}

/// TLS to a cluster's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamTls {
    /// The name sent as SNI and verified against the upstream certificate: a lower-case DNS name.
    pub sni: String,
    /// PEM file of the only CA certificates trusted for the upstream.
    pub ca: PathBuf,
}
