//! What happens to an accepted connection before HTTP: the TLS handshake (SNI certificate,
//! ALPN, client certificate) and the choice of protocol, then the HTTP/1.1 or HTTP/2 server.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use gateway_config::Protocol;
use monoio::io::IntoPollIo;
use monoio::net::TcpStream;

use super::h1 as conn;
use crate::request::{Client, TlsFacts};
use crate::runtime::signal::ListenerHandle;
use crate::runtime::stream::Stream;
use crate::tls::{ClientIdentity, ServerTls};
use crate::worker::Worker;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves one accepted connection; the accept loop has counted it in `connections_active`.
pub async fn serve(worker: Rc<Worker>, listener: Rc<ListenerHandle>, binding: u64, tcp: TcpStream, peer: SocketAddr) {
    let (protocols, tls) = {
        let local = worker.local();
        let index = local.snap.bindings.iter().position(|b| b.id == binding);
        let config = index.and_then(|i| local.snap.config.listeners.get(i));
        let protocols = config.map_or_else(|| vec![Protocol::Http1], |l| l.protocols.clone());
        let tls = index.and_then(|i| local.snap.tls.get(i)).and_then(Clone::clone);
        let settings = config.and_then(|l| l.tls.as_ref()).map(|t| TlsSettings {
            handshake_timeout: t.handshake_timeout,
            identity_header: t.identity_header.clone(),
        });
        (protocols, tls.zip(settings))
    };
    // Each path is boxed: the task then holds only what its own protocol needs, for as long
    // as the connection lives (idle connections are most connections).
    match tls {
        Some((tls, settings)) => Box::pin(serve_tls(&worker, listener, tcp, peer, tls, settings)).await,
        None => Box::pin(serve_cleartext(&worker, listener, tcp, peer, &protocols)).await,
    }
    worker.stats.connections_active.sub(1);
    worker.connection_closed();
}

/// The listener's TLS settings a connection needs after the handshake config.
pub(crate) struct TlsSettings {
    handshake_timeout: Duration,
    identity_header: String,
}

pub(crate) async fn serve_cleartext(
    worker: &Rc<Worker>,
    listener: Rc<ListenerHandle>,
    tcp: TcpStream,
    peer: SocketAddr,
    protocols: &[Protocol],
) {
    let h1 = protocols.contains(&Protocol::Http1);
    let h2 = protocols.contains(&Protocol::H2);
    if !h2 {
        conn::serve(worker, Stream::Tcp(tcp), Rc::new(Client::new(peer, listener, None)), Vec::new()).await;
        return;
    }
    // h2c with prior knowledge: read until the bytes either are the preface or cannot be.
    let limit = worker.local().snap.config.server.timeouts.header_read;
    let Some((is_h2, initial, tcp)) = sniff_preface(worker, tcp, limit).await else { return };
    if is_h2 {
        let Ok(io) = tcp.into_poll_io() else { return };
        let io = super::h2::Prefixed::new(initial, io);
        Box::pin(super::h2::serve(worker, io, Rc::new(Client::new(peer, listener, None)))).await;
    } else if h1 {
        conn::serve(worker, Stream::Tcp(tcp), Rc::new(Client::new(peer, listener, None)), initial).await;
    } else {
        // An HTTP/2-only cleartext listener and a client that does not speak it.
        worker.buffers.give(initial);
        worker.stats.requests_rejected.inc();
    }
}

/// Reads the start of a cleartext connection until it is known whether it opens with the
/// HTTP/2 preface. `None`: the client left or timed out first. A pooled buffer is taken only
/// once the first byte is there, so a connection that sends nothing (a connection flood, a
/// client that connects early) costs no buffer.
async fn sniff_preface(worker: &Worker, tcp: TcpStream, limit: Duration) -> Option<(bool, Vec<u8>, TcpStream)> {
    // Both waits are on the worker's coarse timer (`runtime::idle_timer`), so a connection that
    // has not sent its first byte holds no timer entry of its own.
    let deadline = std::time::Instant::now() + limit;
    let mut stream = Stream::Tcp(tcp);
    // On epoll, relaxed readiness can be stale; io_uring polls for real either way.
    let relaxed = !monoio::utils::is_legacy();
    let ready = monoio::select! {
        r = stream.readable(relaxed) => r.is_ok(),
        _ = worker.idle_timer.at(deadline) => false,
    };
    if !ready {
        return None;
    }
    let mut buf = worker.buffers.take();
    let result = loop {
        let n = buf.len().min(H2_PREFACE.len());
        if buf.get(..n) != H2_PREFACE.get(..n) {
            break Some(false);
        }
        if n == H2_PREFACE.len() {
            break Some(true);
        }
        let expiry = worker.idle_timer.at(deadline);
        let (res, b) = crate::runtime::io::read_append_expiry(&mut stream, buf, expiry).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => break None,
            Ok(n) => worker.stats.downstream_bytes_in.add(n as u64),
        }
    };
    match (result, stream) {
        (Some(is_h2), Stream::Tcp(tcp)) => Some((is_h2, buf, tcp)),
        _ => {
            worker.buffers.give(buf);
            None
        }
    }
}

pub(crate) async fn serve_tls(
    worker: &Rc<Worker>,
    listener: Rc<ListenerHandle>,
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Arc<ServerTls>,
    settings: TlsSettings,
) {
    let Some(stream) = Box::pin(handshake(worker, &listener, tcp, peer, &tls, settings.handshake_timeout)).await else {
        return;
    };
    let (alpn_h2, identity) = {
        let session = stream.get_ref().1;
        let identity = session.peer_certificates().and_then(ClientIdentity::from_peer);
        (session.alpn_protocol() == Some(b"h2".as_slice()), identity)
    };
    worker.stats.tls_handshakes.inc();
    if session_resumed(stream.get_ref().1) {
        worker.stats.tls_resumptions.inc();
    }
    let facts = TlsFacts { identity_header: settings.identity_header, identity };
    let client = Rc::new(Client::new(peer, listener, Some(facts)));
    if alpn_h2 {
        Box::pin(super::h2::serve(worker, stream, client)).await;
    } else {
        let stream = Stream::TlsServer(stream);
        Box::pin(conn::serve(worker, stream, client, Vec::new())).await;
    }
}

/// Runs the TLS handshake (bounded by `limit`, abandoned when the listener stops); failures
/// are counted by reason. Its state is large and lives only until the handshake ends.
async fn handshake(
    worker: &Worker,
    listener: &ListenerHandle,
    tcp: TcpStream,
    peer: SocketAddr,
    tls: &ServerTls,
    limit: Duration,
) -> Option<Box<crate::runtime::stream::TlsServerIo>> {
    let io = tcp.into_poll_io().ok()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    // Not abandoned when the listener stops: the client connected and gets its first
    // request answered (the handshake timeout bounds it).
    let _ = listener;
    let accepted = monoio::time::timeout(limit, acceptor.accept(io)).await;
    match accepted {
        Ok(Ok(s)) => Some(Box::new(s)),
        Ok(Err(e)) => {
            worker.stats.count_tls_failure(crate::tls::handshake_failure_reason(&e));
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            worker.stats.count_tls_failure("timeout");
            None
        }
    }
}

fn session_resumed(session: &rustls::ServerConnection) -> bool {
    matches!(session.handshake_kind(), Some(rustls::HandshakeKind::Resumed))
}
