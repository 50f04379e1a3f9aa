//! Who a verified client certificate names: a principal for policy and logs, and a header
//! value in the style of Envoy's `x-forwarded-client-cert`.

use std::fmt::Write as _;

use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::objects::{oid2abbrev, oid_registry};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::X509Name;

/// The identity of a client, from the leaf of its verified certificate chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The first URI SAN (e.g. a SPIFFE id), else the first DNS SAN, else the subject's common
    /// name: exactly as in the certificate.
    pub principal: String,
    /// `Subject="CN=client,O=x";URI=spiffe://...;DNS=a.example`, with only the parts present:
    /// visible ASCII and spaces only (never CR, LF or other control bytes), safe to send as a
    /// header field value.
    pub header_value: String,
}

impl ClientIdentity {
    /// The identity in `certs[0]` (the leaf). `None` without certificates, when the leaf does
    /// not parse, or when it names no URI, DNS name or common name.
    pub fn from_peer(certs: &[CertificateDer<'_>]) -> Option<ClientIdentity> {
        let (_, cert) = X509Certificate::from_der(certs.first()?).ok()?;
        let mut uris = Vec::new();
        let mut dns = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::URI(uri) => uris.push(*uri),
                    GeneralName::DNSName(name) => dns.push(*name),
                    _ => {}
                }
            }
        }
        let subject = cert.subject();
        let common_name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok());
        let principal = uris.first().or(dns.first()).copied().or(common_name)?.to_owned();
        let mut header_value = String::new();
        let subject_text = rfc4514(subject);
        if !subject_text.is_empty() {
            header_value.push_str("Subject=\"");
            for c in subject_text.chars() {
                if matches!(c, '"' | '\\') {
                    header_value.push('\\');
                }
                header_value.push(c);
            }
            header_value.push('"');
        }
        for (key, values) in [("URI", &uris), ("DNS", &dns)] {
            for value in values {
                if !header_value.is_empty() {
                    header_value.push(';');
                }
                header_value.push_str(key);
                header_value.push('=');
                percent_encode_into(&mut header_value, value);
            }
        }
        Some(ClientIdentity { principal, header_value })
    }
}

/// The subject as RFC 4514 text, most specific RDN first (`CN=client,O=x`); special and
/// non-printable characters are escaped, so the result is visible ASCII and spaces.
fn rfc4514(name: &X509Name<'_>) -> String {
    let registry = oid_registry();
    let mut out = String::new();
    let rdns: Vec<_> = name.iter_rdn().collect();
    for rdn in rdns.iter().rev() {
        for (j, attr) in rdn.iter().enumerate() {
            if !out.is_empty() {
                out.push(if j == 0 { ',' } else { '+' });
            }
            match oid2abbrev(attr.attr_type(), registry) {
                Ok(abbrev) => out.push_str(abbrev),
                Err(_) => out.push_str(&attr.attr_type().to_id_string()),
            }
            out.push('=');
            match attr.as_str() {
                Ok(value) => escape_value_into(&mut out, value),
                // Not a string type: the value's bytes in hex, as RFC 4514 allows (`#...`).
                Err(_) => {
                    out.push('#');
                    for b in attr.attr_value().data.iter() {
                        let _ = write!(out, "{b:02x}");
                    }
                }
            }
        }
    }
    out
}

/// An attribute value with RFC 4514 escapes; bytes that are not visible ASCII become `\XX`.
fn escape_value_into(out: &mut String, value: &str) {
    let last = value.len().saturating_sub(1);
    for (i, c) in value.char_indices() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
            out.push(c);
        } else if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\{b:02X}");
            }
        }
    }
}

/// `value` with `%`, `;`, `,`, `"`, spaces and every non-visible byte percent-encoded.
fn percent_encode_into(out: &mut String, value: &str) {
    for b in value.bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'%' | b';' | b',' | b'"') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let mut out = String::new();
        escape_value_into(&mut out, " a,b\"c\\d\r\né ");
        assert_eq!(out, "\\ a\\,b\\\"c\\\\d\\0D\\0A\\C3\\A9\\ ");
        let mut out = String::new();
        percent_encode_into(&mut out, "spiffe://x/a b;c\r\n%");
        assert_eq!(out, "spiffe://x/a%20b%3Bc%0D%0A%25");
    }
}
