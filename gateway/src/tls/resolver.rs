//! Certificate selection by SNI: exact names and `*.domain` wildcards covering one label,
//! compared case-insensitively with any trailing dot ignored.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use gateway_config::{ListenerTls, UnknownSni};
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{Error as RustlsError, InconsistentKeys};
use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::CertInfo;

use super::pem::{file_error, FileSet};
use super::TlsError;

/// Picks a listener's certificate for each ClientHello.
#[derive(Debug)]
pub(super) struct SniResolver {
    /// Lower-case names without trailing dot.
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com` is stored under `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    /// Served when SNI is missing or unknown; `None` refuses the handshake.
    default: Option<Arc<CertifiedKey>>,
}

impl SniResolver {
    /// Reads every certificate and key of `tls`; the first certificate serving a name wins.
    /// Also returns each certificate's facts, in config order.
    pub(super) fn load(
        tls: &ListenerTls,
        provider: &CryptoProvider,
        files: &mut FileSet,
    ) -> Result<(Self, Vec<CertInfo>), TlsError> {
        let mut resolver = Self { exact: HashMap::new(), wildcard: HashMap::new(), default: None };
        let mut infos = Vec::with_capacity(tls.certificates.len());
        for (i, c) in tls.certificates.iter().enumerate() {
            let cert_key = format!("listeners.tls.certificates[{i}].cert");
            let key_key = format!("listeners.tls.certificates[{i}].key");
            let chain = files.chain(&cert_key, &c.cert)?;
            let private_key = files.private_key(&key_key, &c.key)?;
            let signing_key = provider
                .key_provider
                .load_private_key(private_key)
                .map_err(|e| file_error(&key_key, &c.key, format!("unusable private key: {e}")))?;
            let certified = CertifiedKey::new(chain, signing_key);
            match certified.keys_match() {
                Ok(()) | Err(RustlsError::InconsistentKeys(InconsistentKeys::Unknown)) => {}
                Err(RustlsError::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                    let message = format!("this key does not match the certificate in {}", c.cert.display());
                    return Err(file_error(&key_key, &c.key, message));
                }
                Err(e) => return Err(file_error(&cert_key, &c.cert, format!("invalid certificate: {e}"))),
            }
            let names = if c.names.is_empty() {
                let leaf = certified.cert.first().ok_or_else(|| file_error(&cert_key, &c.cert, "empty chain"))?;
                dns_names(leaf).map_err(|message| file_error(&cert_key, &c.cert, message))?
            } else {
                c.names.clone()
            };
            let is_default = i == 0 && tls.unknown_sni == UnknownSni::Default;
            if names.is_empty() && !is_default {
                let message =
                    "the certificate has no DNS names in its subjectAltName, so no SNI selects it: set `names`";
                return Err(file_error(&cert_key, &c.cert, message));
            }
            if let Some(info) = certified.cert.first().and_then(|l| CertInfo::read(c.cert.clone(), names.clone(), l)) {
                infos.push(info);
            }
            let certified = Arc::new(certified);
            for name in names {
                let name = normalize(&name).into_owned();
                match name.strip_prefix("*.") {
                    Some(domain) => resolver.wildcard.entry(domain.to_owned()),
                    None => resolver.exact.entry(name),
                }
                .or_insert_with(|| Arc::clone(&certified));
            }
            if is_default {
                resolver.default = Some(certified);
            }
        }
        Ok((resolver, infos))
    }

    /// The certificate for `server_name`, if one serves it (not the default).
    pub(super) fn lookup(&self, server_name: &str) -> Option<&Arc<CertifiedKey>> {
        let name = normalize(server_name);
        if let Some(certified) = self.exact.get(name.as_ref()) {
            return Some(certified);
        }
        let (_, parent) = name.split_once('.')?;
        self.wildcard.get(parent)
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        client_hello.server_name().and_then(|name| self.lookup(name)).or(self.default.as_ref()).map(Arc::clone)
    }
}

/// Lower case, without a trailing dot (borrowed when already so).
fn normalize(name: &str) -> Cow<'_, str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

/// The DNS names of a certificate's subjectAltName, in order.
fn dns_names(leaf: &CertificateDer<'_>) -> Result<Vec<String>, String> {
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| format!("cannot parse the leaf certificate: {e}"))?;
    let san = cert.subject_alternative_name().map_err(|e| format!("invalid subjectAltName: {e}"))?;
    Ok(san
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(name) => Some((*name).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}
