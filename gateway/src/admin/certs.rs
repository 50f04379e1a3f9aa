//! `GET /certs`: every certificate the listeners serve, with its names, issuer and validity,
//! and the samples of `gateway_tls_certificate_expiry_seconds`.

use std::time::{SystemTime, UNIX_EPOCH};

use gateway_admin::Response;

use crate::snapshot::Snapshot;
use crate::stats::metrics::CertificateSample;

/// The served certificates of `snap`, per listener, with days left until they expire.
pub fn certs(snap: &Snapshot) -> Response {
    let now = unix_now();
    let listeners: Vec<serde_json::Value> = served(snap)
        .map(|(listener, certs)| {
            let certs: Vec<serde_json::Value> = certs
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "file": c.file.display().to_string(),
                        "names": c.names,
                        "subject": c.subject,
                        "issuer": c.issuer,
                        "serial": c.serial,
                        "not_before": c.not_before,
                        "not_after": c.not_after,
                        "days_left": c.days_left(now),
                        "expired": c.not_after <= now,
                    })
                })
                .collect();
            serde_json::json!({ "listener": listener, "certificates": certs })
        })
        .collect();
    Response::json(200, &serde_json::json!({ "version": snap.version, "listeners": listeners }))
}

/// One sample per served certificate.
pub fn samples(snap: &Snapshot) -> Vec<CertificateSample> {
    served(snap)
        .flat_map(|(listener, certs)| {
            certs.iter().map(move |c| CertificateSample {
                listener: listener.to_owned(),
                name: c.label().to_owned(),
                serial: c.serial.clone(),
                not_after: c.not_after,
            })
        })
        .collect()
}

/// Each TLS listener's name and certificates.
fn served(snap: &Snapshot) -> impl Iterator<Item = (&str, &[crate::tls::CertInfo])> {
    snap.config
        .listeners
        .iter()
        .zip(&snap.tls)
        .filter_map(|(l, tls)| tls.as_ref().map(|t| (l.name.as_str(), t.certificates())))
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
