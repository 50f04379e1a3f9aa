//! Handshakes between in-memory rustls connections, with certificates made by rcgen.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gateway_config::{CertificateFiles, ClientAuth, ClientAuthMode, ListenerTls, Protocol, TlsVersion};
use gateway_config::{UnknownSni, UpstreamTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, ServerConfig, ServerConnection, SignatureScheme};
use rustls_pki_types::pem::PemObject;

use super::testpki::{temp_dir, TestPki};
use super::*;

/// A directory with a CA and files written into it.
struct Fixture {
    pki: TestPki,
    dir: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Self {
        Self { pki: TestPki::new(), dir: temp_dir(tag) }
    }

    /// Writes a leaf for `names`; `explicit` names go into the config (else the SANs are used).
    fn cert(&self, stem: &str, names: &[&str], explicit: &[&str]) -> CertificateFiles {
        let (cert, key) = self.pki.write_leaf(&self.dir, stem, names);
        CertificateFiles { cert, key, names: explicit.iter().map(|n| (*n).to_owned()).collect() }
    }

    fn ca_file(&self) -> PathBuf {
        self.pki.write(&self.dir, "ca.pem", &self.pki.ca_pem())
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn listener(certificates: Vec<CertificateFiles>) -> ListenerTls {
    ListenerTls {
        certificates,
        unknown_sni: UnknownSni::Default,
        min_version: TlsVersion::Tls12,
        handshake_timeout: Duration::from_secs(10),
        session_tickets: true,
        session_ticket_keys: Vec::new(),
        session_cache: 16,
        client_auth: None,
        identity_header: "x-client-identity".to_owned(),
    }
}

fn server(tls: &ListenerTls) -> Arc<ServerConfig> {
    ServerTls::load(tls, &[Protocol::H2, Protocol::Http1]).unwrap().config()
}

/// A client that accepts any server certificate (to see which one was served).
fn any_cert_client(sni: bool) -> ClientConfig {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions(TlsVersion::Tls12))
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
        .with_no_client_auth();
    config.enable_sni = sni;
    config
}

/// A client trusting `ca`, offering `alpn`, with an optional client certificate.
fn verifying_client(
    ca: &str,
    versions: &'static [&'static SupportedProtocolVersion],
    cert: Option<(String, String)>,
) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    match cert {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let chain = CertificateDer::pem_slice_iter(chain.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
            let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    }
}

#[derive(Debug)]
enum Failed {
    Server(rustls::Error),
    Client(rustls::Error),
}

/// Runs a handshake between in-memory connections.
fn handshake(
    server: Arc<ServerConfig>,
    client: ClientConfig,
    name: &str,
) -> Result<(ServerConnection, ClientConnection), Failed> {
    let mut s = ServerConnection::new(server).unwrap();
    let mut c = ClientConnection::new(Arc::new(client), ServerName::try_from(name.to_owned()).unwrap()).unwrap();
    for _ in 0..16 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets().map_err(Failed::Server)?;
        }
        buf.clear();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().map_err(Failed::Client)?;
        }
        if !s.is_handshaking() && !c.is_handshaking() && !c.wants_write() {
            return Ok((s, c));
        }
    }
    panic!("handshake did not finish");
}

fn server_failure(result: Result<(ServerConnection, ClientConnection), Failed>) -> &'static str {
    match result {
        Err(Failed::Server(e)) => handshake_failure_reason(&io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(Failed::Client(e)) => panic!("client failed first: {e}"),
        Ok(_) => panic!("handshake succeeded"),
    }
}

/// The leaf DER of a PEM chain.
fn leaf_der(path: &std::path::Path) -> CertificateDer<'static> {
    CertificateDer::pem_file_iter(path).unwrap().next().unwrap().unwrap()
}

fn served(c: &ClientConnection) -> CertificateDer<'static> {
    c.peer_certificates().unwrap()[0].clone().into_owned()
}

#[test]
fn sni_selects_exact_then_wildcard_then_default() {
    let f = Fixture::new("sni");
    let default = f.cert("default", &["default.test"], &[]);
    let wild = f.cert("wild", &["a.example", "*.example.com"], &[]);
    let exact = f.cert("exact", &["exact.example.com"], &["Exact.Example.com"]);
    let tls = listener(vec![default.clone(), wild.clone(), exact.clone()]);
    let config = server(&tls);
    let cases = [
        ("a.example", &wild),
        ("A.EXAMPLE", &wild),
        ("x.example.com", &wild),
        ("exact.example.com", &exact),
        ("a.b.example.com", &default),
        ("example.com", &default),
        ("unknown.test", &default),
    ];
    for (name, expected) in cases {
        let (_, c) = handshake(Arc::clone(&config), any_cert_client(true), name).unwrap();
        assert_eq!(served(&c), leaf_der(&expected.cert), "{name}");
    }
    // No SNI at all: the first certificate.
    let (s, c) = handshake(Arc::clone(&config), any_cert_client(false), "a.example").unwrap();
    assert_eq!((s.server_name(), served(&c)), (None, leaf_der(&default.cert)));
    // The resolver ignores case and a trailing dot.
    let mut files = pem::FileSet::default();
    let (resolver, _) = SniResolver::load(&tls, &provider(), &mut files).unwrap();
    assert!(resolver.lookup("X.Example.COM.").is_some());
    assert!(resolver.lookup("a.example.").is_some());
    assert!(resolver.lookup("b.a.example").is_none());
}

#[test]
fn unknown_sni_refused() {
    let f = Fixture::new("refuse");
    let mut tls = listener(vec![f.cert("a", &["a.example"], &[])]);
    tls.unknown_sni = UnknownSni::Refuse;
    let config = server(&tls);
    assert!(handshake(Arc::clone(&config), any_cert_client(true), "a.example").is_ok());
    assert_eq!(server_failure(handshake(Arc::clone(&config), any_cert_client(true), "b.example")), "unknown_sni");
    assert_eq!(server_failure(handshake(config, any_cert_client(false), "a.example")), "unknown_sni");
}

#[test]
fn alpn_follows_the_listener_order_and_full_chain_verifies() {
    let f = Fixture::new("alpn");
    let tls = listener(vec![f.cert("a", &["a.example"], &[])]);
    let both = |order: &[Protocol]| ServerTls::load(&tls, order).unwrap().config();
    let mut client = verifying_client(&f.pki.ca_pem(), versions(TlsVersion::Tls12), None);
    client.alpn_protocols = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
    let (s, _) = handshake(both(&[Protocol::H2, Protocol::Http1]), client.clone(), "a.example").unwrap();
    assert_eq!(s.alpn_protocol(), Some(&b"h2"[..]));
    let (s, _) = handshake(both(&[Protocol::Http1, Protocol::H2]), client.clone(), "a.example").unwrap();
    assert_eq!(s.alpn_protocol(), Some(&b"http/1.1"[..]));
    client.alpn_protocols = vec![b"h3".to_vec()];
    assert_eq!(server_failure(handshake(both(&[Protocol::H2]), client, "a.example")), "no_application_protocol");
    // The upstream client config verifies the same chain against the CA file.
    let upstream = UpstreamTls { sni: "a.example".to_owned(), ca: f.ca_file() };
    let client = client_config(&upstream, &[b"h2"]).unwrap();
    let (s, _) = handshake(both(&[Protocol::H2]), (*client).clone(), "a.example").unwrap();
    assert_eq!(s.alpn_protocol(), Some(&b"h2"[..]));
}

#[test]
fn tls12_client_refused_by_min_version_13() {
    let f = Fixture::new("version");
    let mut tls = listener(vec![f.cert("a", &["a.example"], &[])]);
    static TLS12_ONLY: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
    let client = verifying_client(&f.pki.ca_pem(), &TLS12_ONLY, None);
    let (s, _) = handshake(server(&tls), client.clone(), "a.example").unwrap();
    assert_eq!(s.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    tls.min_version = TlsVersion::Tls13;
    assert_eq!(server_failure(handshake(server(&tls), client, "a.example")), "protocol_version");
}

#[test]
fn client_certificates_required_and_optional() {
    let f = Fixture::new("mtls");
    let mut tls = listener(vec![f.cert("a", &["a.example"], &[])]);
    tls.client_auth = Some(ClientAuth { ca: f.ca_file(), mode: ClientAuthMode::Required });
    let ca = f.pki.ca_pem();
    let anonymous = verifying_client(&ca, versions(TlsVersion::Tls12), None);
    let spiffe = "spiffe://trust.domain/ns/x";
    let with_cert = verifying_client(&ca, versions(TlsVersion::Tls12), Some(f.pki.client("client", Some(spiffe))));
    assert_eq!(server_failure(handshake(server(&tls), anonymous.clone(), "a.example")), "client_certificate_required");
    let (s, _) = handshake(server(&tls), with_cert.clone(), "a.example").unwrap();
    let identity = ClientIdentity::from_peer(s.peer_certificates().unwrap()).unwrap();
    assert_eq!(identity.principal, spiffe);
    assert_eq!(identity.header_value, format!("Subject=\"O=Test Org,CN=client\";URI={spiffe}"));
    // A certificate from another CA is refused.
    let stranger = TestPki::named("Other CA").client("client", None);
    let other = verifying_client(&ca, versions(TlsVersion::Tls12), Some(stranger));
    assert_eq!(server_failure(handshake(server(&tls), other, "a.example")), "bad_client_certificate");
    tls.client_auth = Some(ClientAuth { ca: f.ca_file(), mode: ClientAuthMode::Optional });
    let (s, _) = handshake(server(&tls), anonymous, "a.example").unwrap();
    assert!(s.peer_certificates().is_none());
    let (s, _) = handshake(server(&tls), with_cert, "a.example").unwrap();
    assert!(s.peer_certificates().is_some());
}

#[test]
fn identity_falls_back_to_the_common_name() {
    let pki = TestPki::new();
    let (chain, _) = pki.client("plain \"client\"", None);
    let leaf = CertificateDer::pem_slice_iter(chain.as_bytes()).next().unwrap().unwrap();
    let identity = ClientIdentity::from_peer(&[leaf]).unwrap();
    assert_eq!(identity.principal, "plain \"client\"");
    assert_eq!(identity.header_value, r#"Subject="O=Test Org,CN=plain \\\"client\\\"""#);
    assert_eq!(ClientIdentity::from_peer(&[]), None);
    assert_eq!(ClientIdentity::from_peer(&[CertificateDer::from(vec![1, 2, 3])]), None);
}

#[test]
fn file_problems_name_the_key_and_the_file() {
    let f = Fixture::new("files");
    let a = f.cert("a", &["a.example"], &[]);
    let b = f.cert("b", &["b.example"], &[]);
    let error = |certificates: Vec<CertificateFiles>| {
        ServerTls::load(&listener(certificates), &[Protocol::Http1]).unwrap_err().to_string()
    };
    let mismatched = CertificateFiles { key: a.key.clone(), ..b.clone() };
    let message = error(vec![a.clone(), mismatched]);
    assert!(message.starts_with(&format!("listeners.tls.certificates[1].key: {}: ", a.key.display())), "{message}");
    assert!(message.contains("does not match the certificate"), "{message}");
    let missing = CertificateFiles { cert: f.dir.join("nope.pem"), ..a.clone() };
    let message = error(vec![missing]);
    assert!(message.starts_with("listeners.tls.certificates[0].cert: ") && message.contains("nope.pem: cannot read"));
    let no_key = CertificateFiles { key: a.cert.clone(), ..a.clone() };
    assert!(error(vec![no_key]).ends_with("no private key found"));
    let not_pem = f.pki.write(&f.dir, "empty.pem", "hello\n");
    let no_cert = CertificateFiles { cert: not_pem, ..a.clone() };
    assert!(error(vec![no_cert]).ends_with("no certificate found (expected PEM \"BEGIN CERTIFICATE\" blocks)"));
    let mut tls = listener(vec![a.clone()]);
    tls.client_auth = Some(ClientAuth { ca: f.dir.join("no-ca.pem"), mode: ClientAuthMode::Required });
    let message = ServerTls::load(&tls, &[Protocol::Http1]).unwrap_err().to_string();
    assert!(message.starts_with("listeners.tls.client_auth.ca: "), "{message}");
    let upstream = UpstreamTls { sni: "a.example".to_owned(), ca: a.key.clone() };
    let message = client_config(&upstream, &[]).unwrap_err().to_string();
    assert!(
        message.starts_with("clusters.tls.ca: ")
            && message.ends_with("no certificate found (expected PEM \"BEGIN CERTIFICATE\" blocks)"),
        "{message}"
    );
}

#[test]
fn files_and_fingerprint() {
    let f = Fixture::new("fingerprint");
    let a = f.cert("a", &["a.example"], &[]);
    let mut tls = listener(vec![a.clone()]);
    tls.client_auth = Some(ClientAuth { ca: f.ca_file(), mode: ClientAuthMode::Optional });
    let first = ServerTls::load(&tls, &[Protocol::Http1]).unwrap();
    assert_eq!(first.files(), [a.cert.clone(), a.key.clone(), f.dir.join("ca.pem")]);
    let again = ServerTls::load(&tls, &[Protocol::Http1]).unwrap();
    assert_eq!(first.fingerprint(), again.fingerprint());
    assert!(first.same_as(&again));
    f.cert("a", &["a.example"], &[]);
    let renewed = ServerTls::load(&tls, &[Protocol::Http1]).unwrap();
    assert_ne!(first.fingerprint(), renewed.fingerprint());
    assert!(!first.same_as(&renewed));
}

#[test]
fn plain_io_errors() {
    let reason = |kind| handshake_failure_reason(&io::Error::from(kind));
    assert_eq!(reason(io::ErrorKind::TimedOut), "timeout");
    assert_eq!(reason(io::ErrorKind::UnexpectedEof), "eof");
    assert_eq!(reason(io::ErrorKind::PermissionDenied), "io");
    let not_tls = io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
    );
    assert_eq!(handshake_failure_reason(&not_tls), "decode_error");
    for label in HANDSHAKE_FAILURE_REASONS {
        assert!(label.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{label}");
    }
}

/// Accepts every server certificate (signatures are still checked).
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[test]
fn load_config_places_errors_and_keeps_unchanged_listeners() {
    let f = Fixture::new("config");
    let a = f.cert("a", &["a.example"], &[]);
    let text = format!(
        "[[listeners]]\nname = \"plain\"\naddress = \"127.0.0.1:0\"\n\
         [[listeners]]\nname = \"tls\"\naddress = \"127.0.0.1:0\"\n\
         [listeners.tls]\ncertificates = [{{ cert = {:?}, key = {:?} }}]\n",
        a.cert, a.key
    );
    let config = gateway_config::parse(&text, "<test>").unwrap();
    let first = load_config(&config, None).unwrap();
    assert!(first[0].is_none() && first[1].is_some());
    let second = load_config(&config, Some((&config, &first))).unwrap();
    assert!(Arc::ptr_eq(first[1].as_ref().unwrap(), second[1].as_ref().unwrap()));
    f.cert("a", &["a.example"], &[]);
    let renewed = load_config(&config, Some((&config, &first))).unwrap();
    assert!(!Arc::ptr_eq(first[1].as_ref().unwrap(), renewed[1].as_ref().unwrap()));
    let broken = text.replace(&format!("{:?}", a.key), &format!("{:?}", a.cert))
        + "[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\ntls = { sni = \"a.example\", ca = \"/no/such/ca.pem\" }\n";
    let config = gateway_config::parse(&broken, "<test>").unwrap();
    let errors: Vec<String> = load_config(&config, None).unwrap_err().iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("listeners[1].tls.certificates[0].key: ") && errors[0].ends_with("no private key found")
    );
    assert!(errors[1].starts_with("clusters[0].tls.ca: /no/such/ca.pem: cannot read"), "{}", errors[1]);
}
