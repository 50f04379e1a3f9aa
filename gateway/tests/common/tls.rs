//! A throwaway PKI for TLS tests: one CA, server leaves and client certificates made with
//! rcgen, as PEM text or files. Also compiled into the gateway's unit tests (`src/tls`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rcgen::{KeyUsagePurpose, SanType};

/// A certificate authority that issues leaves (never self-signed leaves: rustls refuses them).
pub struct TestPki {
    ca: Certificate,
    ca_key: KeyPair,
}

impl TestPki {
    /// A fresh CA (ECDSA P-256) named "Test CA".
    pub fn new() -> Self {
        Self::named("Test CA")
    }

    /// A fresh CA with the given common name.
    pub fn named(cn: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        Self { ca, ca_key }
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A server certificate for `names` (DNS SANs, wildcards allowed), CA:FALSE, signed by
    /// this CA: (certificate chain PEM, leaf then CA; private key PEM).
    pub fn leaf(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.is_ca = IsCa::ExplicitNoCa;
        params.distinguished_name.push(DnType::CommonName, "test server");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with common name `cn` and, optionally, a URI SAN (a SPIFFE id):
    /// (certificate chain PEM, private key PEM).
    pub fn client(&self, cn: &str, uri_san: Option<&str>) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::ExplicitNoCa;
        // rcgen encodes CN before O, so RFC 4514 text (last RDN first) reads `O=Test Org,CN=<cn>`.
        params.distinguished_name.push(DnType::CommonName, cn);
        params.distinguished_name.push(DnType::OrganizationName, "Test Org");
        if let Some(uri) = uri_san {
            params.subject_alt_names.push(SanType::URI(uri.try_into().unwrap()));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    /// Writes `contents` to `dir/name` and returns the path.
    pub fn write(&self, dir: &Path, name: &str, contents: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// Writes a leaf for `names` as `dir/<stem>.pem` and `dir/<stem>.key`; returns both paths.
    pub fn write_leaf(&self, dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
        let (chain, key) = self.leaf(names);
        (self.write(dir, &format!("{stem}.pem"), &chain), self.write(dir, &format!("{stem}.key"), &key))
    }

    fn issue(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (format!("{}{}", cert.pem(), self.ca.pem()), key.serialize_pem())
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh empty directory under the system temp dir, unique to this process and `tag`.
pub fn temp_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("gw-tls-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
