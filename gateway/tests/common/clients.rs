//! Real TLS and HTTP/2 clients for the end-to-end tests: rustls over std sockets for
//! HTTP/1.1, and the h2 crate over tokio-rustls (or plain TCP) on a tokio runtime.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;

use super::{read_response, Resp};

/// Options of a test TLS client.
#[derive(Clone, Default)]
pub struct ClientOpts {
    pub alpn: Vec<Vec<u8>>,
    /// PEM chain and key of a client certificate (mTLS).
    pub cert: Option<(String, String)>,
    /// Offer only TLS 1.2.
    pub tls12_only: bool,
}

pub fn client_config(ca_pem: &str, opts: &ClientOpts) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] =
        if opts.tls12_only { &[&rustls::version::TLS12] } else { &[&rustls::version::TLS13, &rustls::version::TLS12] };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match &opts.cert {
        Some((chain, key)) => {
            let certs: Vec<_> = CertificateDer::pem_slice_iter(chain.as_bytes()).map(Result::unwrap).collect();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = opts.alpn.clone();
    Arc::new(config)
}

/// A blocking TLS connection to the gateway.
pub type TlsConn = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Connects and completes the handshake (errors are returned, not panicked on).
pub fn tls_connect(addr: SocketAddr, sni: &str, config: Arc<rustls::ClientConfig>) -> std::io::Result<TlsConn> {
    tls_connect_after(addr, b"", sni, config)
}

/// Connects, sends `prefix` (a PROXY protocol header), then completes the handshake.
pub fn tls_connect_after(
    addr: SocketAddr,
    prefix: &[u8],
    sni: &str,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsConn> {
    let mut tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    tcp.set_nodelay(true)?;
    if !prefix.is_empty() {
        tcp.write_all(prefix)?;
    }
    let name = ServerName::try_from(sni.to_owned()).map_err(std::io::Error::other)?;
    let conn = rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// The DNS names of the certificate the server presented.
pub fn server_names(s: &TlsConn) -> Vec<String> {
    let certs = s.conn.peer_certificates().unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&certs[0]).unwrap();
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push((*d).to_owned());
            }
        }
    }
    names
}

/// One HTTP/1.1 request over TLS on a new connection.
pub fn tls_exchange(addr: SocketAddr, sni: &str, config: Arc<rustls::ClientConfig>, raw: &[u8]) -> Resp {
    let mut s = tls_connect(addr, sni, config).expect("TLS handshake");
    s.write_all(raw).unwrap();
    s.flush().unwrap();
    let mut r = BufReader::new(s);
    read_response(&mut r, raw.starts_with(b"HEAD ")).expect("response")
}

/// A current-thread tokio runtime for the h2 client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An HTTP/2 client connection: over TLS with ALPN h2 when `tls` is given, else h2c.
pub async fn h2_connect(
    addr: SocketAddr,
    tls: Option<(&str, Arc<rustls::ClientConfig>)>,
) -> h2::client::SendRequest<Bytes> {
    h2_connect_after(addr, b"", tls).await
}

/// [`h2_connect`] after sending `prefix` (a PROXY protocol header) on the new connection.
pub async fn h2_connect_after(
    addr: SocketAddr,
    prefix: &[u8],
    tls: Option<(&str, Arc<rustls::ClientConfig>)>,
) -> h2::client::SendRequest<Bytes> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    if !prefix.is_empty() {
        tokio::io::AsyncWriteExt::write_all(&mut tcp, prefix).await.unwrap();
    }
    match tls {
        Some((sni, config)) => {
            let connector = tokio_rustls::TlsConnector::from(config);
            let name = ServerName::try_from(sni.to_owned()).unwrap();
            let stream = connector.connect(name, tcp).await.unwrap();
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "ALPN chose h2");
            let (send, conn) = h2::client::handshake(stream).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
        None => {
            let (send, conn) = h2::client::handshake(tcp).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
    }
}

/// A complete HTTP/2 response.
#[derive(Debug)]
pub struct H2Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
    pub trailers: Option<http::HeaderMap>,
}

/// Sends one request with `body` (sent in one DATA frame unless empty) and reads the whole
/// response.
pub async fn h2_request(
    send: &mut h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    body: Option<Bytes>,
) -> Result<H2Resp, h2::Error> {
    let mut ready = send.clone().ready().await?;
    let (resp, mut tx) = ready.send_request(req, body.is_none())?;
    if let Some(b) = body {
        tx.reserve_capacity(b.len());
        tx.send_data(b, true)?;
    }
    let resp = resp.await?;
    let (parts, mut rx) = resp.into_parts();
    let mut out = Vec::new();
    while let Some(chunk) = rx.data().await {
        let chunk = chunk?;
        let _ = rx.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    let trailers = rx.trailers().await?;
    Ok(H2Resp { status: parts.status.as_u16(), headers: parts.headers, body: out, trailers })
}

/// A GET request for `path` with authority `host`.
pub fn h2_get(scheme: &str, host: &str, path: &str) -> http::Request<()> {
    http::Request::builder().method("GET").uri(format!("{scheme}://{host}{path}")).body(()).unwrap()
}

/// A POST request for `path` with authority `host` (its body is given to [`h2_request`]).
pub fn h2_post(scheme: &str, host: &str, path: &str) -> http::Request<()> {
    http::Request::builder().method("POST").uri(format!("{scheme}://{host}{path}")).body(()).unwrap()
}
