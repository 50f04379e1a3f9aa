//! Reading PEM files: every file read is remembered (for a watcher) and hashed (to tell a
//! changed file from an unchanged one).

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls_pki_types::pem::{Error as PemError, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The files read for one TLS config, and a running hash of their bytes.
pub(super) struct FileSet {
    paths: Vec<PathBuf>,
    hash: u64,
}

impl Default for FileSet {
    fn default() -> Self {
        Self { paths: Vec::new(), hash: FNV_OFFSET }
    }
}

impl FileSet {
    /// A certificate chain, leaf first: at least one certificate.
    pub(super) fn chain(&mut self, key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let bytes = self.read(key, path)?;
        let chain = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_error(key, path, format!("invalid PEM: {e}")))?;
        if chain.is_empty() {
            return Err(file_error(key, path, "no certificate found (expected PEM \"BEGIN CERTIFICATE\" blocks)"));
        }
        Ok(chain)
    }

    /// The first private key in the file (PKCS#8, PKCS#1 or SEC1).
    pub(super) fn private_key(&mut self, key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
        let bytes = self.read(key, path)?;
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
            PemError::NoItemsFound => file_error(key, path, "no private key found"),
            other => file_error(key, path, format!("invalid PEM: {other}")),
        })
    }

    /// Every CA certificate in the file, as trust anchors: at least one.
    pub(super) fn roots(&mut self, key: &str, path: &Path) -> Result<RootCertStore, TlsError> {
        let certs = self.chain(key, path)?;
        let mut roots = RootCertStore::empty();
        for (i, cert) in certs.into_iter().enumerate() {
            roots.add(cert).map_err(|e| file_error(key, path, format!("certificate {i} is not a usable CA: {e}")))?;
        }
        Ok(roots)
    }

    /// The paths read (each once, in first-read order) and the hash of all bytes read.
    /// A file's bytes as they are (a session ticket key).
    pub(super) fn bytes(&mut self, key: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
        self.read(key, path)
    }

    pub(super) fn finish(self) -> (Vec<PathBuf>, u64) {
        (self.paths, self.hash)
    }

    fn read(&mut self, key: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
        let bytes = std::fs::read(path).map_err(|e| file_error(key, path, format!("cannot read: {e}")))?;
        if !self.paths.iter().any(|p| p == path) {
            self.paths.push(path.to_path_buf());
        }
        // The length first, so that moving bytes from one file to the next changes the hash.
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(&bytes) {
            self.hash ^= u64::from(*b);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
        Ok(bytes)
    }
}

pub(super) fn file_error(key: &str, path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::File { key: key.to_owned(), path: path.to_path_buf(), message: message.into() }
}
