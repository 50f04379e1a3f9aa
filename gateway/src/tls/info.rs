//! What an operator needs to know about each served certificate: its names, issuer and
//! validity (the admin's `GET /certs` and `gateway_tls_certificate_expiry_seconds`).

use std::path::PathBuf;

use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// One configured certificate's leaf, as loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertInfo {
    /// The certificate file it was read from.
    pub file: PathBuf,
    /// The names that select it: `names` from the config, else the leaf's DNS subjectAltNames.
    pub names: Vec<String>,
    pub subject: String,
    pub issuer: String,
    /// The serial number, hexadecimal.
    pub serial: String,
    /// Unix seconds.
    pub not_before: i64,
    /// Unix seconds.
    pub not_after: i64,
}

impl CertInfo {
    /// Reads the facts of `leaf`; `None` when it does not parse (it was checked when loaded).
    pub fn read(file: PathBuf, names: Vec<String>, leaf: &CertificateDer<'_>) -> Option<Self> {
        let (_, cert) = X509Certificate::from_der(leaf).ok()?;
        let names = if names.is_empty() {
            cert.subject_alternative_name()
                .ok()
                .flatten()
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
                .unwrap_or_default()
        } else {
            names
        };
        Some(Self {
            file,
            names,
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            serial: cert.raw_serial_as_string().replace(':', ""),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
        })
    }

    /// The name to show it by: its first name, else its subject.
    pub fn label(&self) -> &str {
        self.names.first().map_or(self.subject.as_str(), String::as_str)
    }

    /// Whole days from `now` (unix seconds) until it expires; negative once expired.
    pub fn days_left(&self, now: i64) -> i64 {
        (self.not_after - now).div_euclid(86_400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_issuer_and_validity() {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".to_owned(), "b.test".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2027, 1, 1);
        params.distinguished_name.push(rcgen::DnType::CommonName, "a.test");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let info = CertInfo::read(PathBuf::from("/x.pem"), Vec::new(), cert.der()).unwrap();
        assert_eq!(info.names, ["a.test", "b.test"]);
        assert_eq!(info.label(), "a.test");
        assert!(info.subject.contains("CN=a.test"), "{}", info.subject);
        assert_eq!(info.issuer, info.subject);
        assert_eq!(info.not_after, 1_798_761_600);
        assert_eq!(info.days_left(1_798_761_600 - 86_400 * 10 - 5), 10);
        assert_eq!(info.days_left(1_798_761_600 + 1), -1);
        let named = CertInfo::read(PathBuf::from("/x.pem"), vec!["c.test".into()], cert.der()).unwrap();
        assert_eq!(named.names, ["c.test"]);
    }
}
