//! What happens to an accepted connection before HTTP: the TLS handshake (SNI certificate,
//! ALPN, client certificate) and the choice of protocol, then the HTTP/1.1 or HTTP/2 server.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use gateway_config::{Protocol, ProxyProtocol};
use monoio::io::IntoPollIo;
use monoio::net::TcpStream;

use super::h1 as conn;
use super::proxy_protocol::Accept;
use crate::request::{Client, Edge, TlsFacts};
use crate::runtime::signal::ListenerHandle;
use crate::runtime::stream::{completion_mode, Stream, TlsIo};
use crate::tls::{ClientIdentity, ServerTls};
use crate::worker::Worker;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves one accepted connection; the accept loop has counted it in `connections_active`.
pub async fn serve(worker: Rc<Worker>, listener: Rc<ListenerHandle>, binding: u64, tcp: TcpStream, peer: SocketAddr) {
    let (protocols, tls, proxy, mut edge, trusted) = {
        let local = worker.local();
        let index = local.snap.bindings.iter().position(|b| b.id == binding);
        let config = index.and_then(|i| local.snap.config.listeners.get(i));
        let protocols = config.map_or_else(|| vec![Protocol::Http1], |l| l.protocols.clone());
        let tls = index.and_then(|i| local.snap.tls.get(i)).and_then(Clone::clone);
        let settings = config.and_then(|l| l.tls.as_ref()).map(|t| TlsSettings {
            handshake_timeout: t.handshake_timeout,
            identity_header: t.identity_header.clone(),
        });
        let port = index.and_then(|i| local.snap.bindings.get(i)).map_or(0, |b| b.address.port());
        let edge = Edge { port, trusted: None, forwarded: config.is_some_and(|l| l.forwarded) };
        let proxy = config.and_then(|l| proxy_accept(l.proxy_protocol).map(|a| (a, l.proxy_protocol_timeout)));
        // Empty unless configured: no allocation per connection otherwise.
        let trusted = config.map(|l| l.trusted_proxies.clone()).filter(|t| !t.is_empty());
        (protocols, tls.zip(settings), proxy, edge, trusted)
    };
    let mut peer = peer;
    if let Some((accept, limit)) = proxy {
        match Box::pin(proxy_header(&worker, &tcp, peer, accept, limit, trusted.as_deref())).await {
            Ok(Some((source, destination))) => {
                peer = source;
                edge.port = destination.port();
            }
            Ok(None) => {}
            Err(reason) => {
                worker.stats.count_proxy_protocol_error(reason);
                tracing::debug!(%peer, reason, "PROXY protocol header refused: connection closed");
                worker.stats.connections_active.sub(1);
                worker.connection_closed();
                return;
            }
        }
    }
    if let Some(trusted) = &trusted {
        edge.trusted = Client::trust(peer.ip(), trusted);
    }
    // Each path is boxed: the task then holds only what its own protocol needs, for as long
    // as the connection lives (idle connections are most connections).
    let ended = match tls {
        Some((tls, settings)) => Box::pin(serve_tls(&worker, listener, tcp, peer, tls, settings, edge)).await,
        None => Box::pin(serve_cleartext(&worker, listener, tcp, peer, &protocols, edge)).await,
    };
    if ended == conn::Ended::Parked {
        // Still open, without a task: the parker closes (and uncounts) it.
        return;
    }
    worker.stats.connections_active.sub(1);
    worker.connection_closed();
}

fn proxy_accept(mode: ProxyProtocol) -> Option<Accept> {
    match mode {
        ProxyProtocol::Off => None,
        ProxyProtocol::V1 => Some(Accept::V1),
        ProxyProtocol::V2 => Some(Accept::V2),
        ProxyProtocol::Any => Some(Accept::Any),
        ProxyProtocol::Optional => Some(Accept::Optional),
    }
}

/// The PROXY header of a connection from `peer`. With `trusted_proxies` set, only those peers
/// may send one: another peer is refused (`untrusted_peer`), or with `optional` served as a
/// direct client whose bytes are not looked at.
async fn proxy_header(
    worker: &Worker,
    tcp: &TcpStream,
    peer: SocketAddr,
    accept: Accept,
    limit: Duration,
    trusted: Option<&[gateway_config::Cidr]>,
) -> Result<Option<(SocketAddr, SocketAddr)>, &'static str> {
    if trusted.is_some_and(|t| !t.iter().any(|c| c.contains(peer.ip()))) {
        return if accept == Accept::Optional { Ok(None) } else { Err("untrusted_peer") };
    }
    super::proxied::read_header(worker, tcp, accept, limit).await
}

/// The listener's TLS settings a connection needs after the handshake config.
pub(crate) struct TlsSettings {
    handshake_timeout: Duration,
    identity_header: String,
}

/// Serves a cleartext connection; `Parked`: its idle HTTP/1.1 connection was parked (open).
pub(crate) async fn serve_cleartext(
    worker: &Rc<Worker>,
    listener: Rc<ListenerHandle>,
    tcp: TcpStream,
    peer: SocketAddr,
    protocols: &[Protocol],
    edge: Edge,
) -> conn::Ended {
    // Built before the wait for the first bytes: the task then holds one pointer, not the facts.
    let client = Rc::new(Client::new(peer, listener, None).with_edge(&edge));
    drop(edge);
    let h1 = protocols.contains(&Protocol::Http1);
    let h2 = protocols.contains(&Protocol::H2);
    if !h2 {
        return conn::serve(worker, Stream::Tcp(tcp), client, Vec::new()).await;
    }
    // h2c with prior knowledge: read until the bytes either are the preface or cannot be.
    let limit = worker.local().snap.config.server.timeouts.header_read;
    let Some((is_h2, initial, tcp)) = sniff_preface(worker, tcp, limit).await else { return conn::Ended::Closed };
    if is_h2 {
        let Ok(io) = tcp.into_poll_io() else { return conn::Ended::Closed };
        let io = super::h2::Prefixed::new(initial, io);
        Box::pin(super::h2::serve(worker, io, client)).await;
    } else if h1 {
        return conn::serve(worker, Stream::Tcp(tcp), client, initial).await;
    } else {
        // An HTTP/2-only cleartext listener and a client that does not speak it.
        worker.buffers.give(initial);
        worker.stats.requests_rejected.inc();
    }
    conn::Ended::Closed
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
    edge: Edge,
) -> conn::Ended {
    let Some(stream) = Box::pin(handshake(worker, &listener, tcp, peer, &tls, settings.handshake_timeout)).await else {
        return conn::Ended::Closed;
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
    let client = Rc::new(Client::new(peer, listener, Some(facts)).with_edge(&edge));
    if alpn_h2 {
        Box::pin(super::h2::serve(worker, stream, client)).await;
        conn::Ended::Closed
    } else {
        let stream = match completion_mode(TlsIo::Server(stream)) {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "switching a TLS connection to completion mode failed");
                return conn::Ended::Closed;
            }
        };
        // Parked when idle on io_uring (`h1::park`): then still open, without a task.
        Box::pin(conn::serve(worker, stream, client, Vec::new())).await
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
    let accepted = crate::runtime::timeout(limit, acceptor.accept(io)).await;
    match accepted {
        Ok(Ok(s)) => {
            let (tcp, session) = s.get_ref();
            // The client's last flight waits for its ACK, which nothing the server sends would
            // carry now; a Nagle client holds its request until it comes (issue 17). When the
            // request came with that flight (rustls holds its plaintext: `wants_read` is false)
            // the response carries the ACK, and no extra packet is sent.
            if client_spoke_last(session, tls) && session.wants_read() {
                if let Err(e) = crate::runtime::quickack::ack_now(tcp) {
                    tracing::debug!(%peer, error = %e, "TCP_QUICKACK after the TLS handshake failed");
                }
            }
            Some(Box::new(s))
        }
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

/// Whether the handshake ended with the client's flight and the server wrote nothing after
/// reading it: TLS 1.3 on a listener that issues no session tickets (with tickets, the
/// NewSessionTicket flight written right after the client's Finished carries the ACK), or an
/// abbreviated (resumed) TLS 1.2 handshake, where the client's Finished comes last. Then the
/// kernel holds the ACK of that flight for the delayed-ACK timer.
fn client_spoke_last(session: &rustls::ServerConnection, tls: &ServerTls) -> bool {
    match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => !tls.tickets_after_tls13(),
        Some(_) => session_resumed(session),
        None => false,
    }
}

fn session_resumed(session: &rustls::ServerConnection) -> bool {
    matches!(session.handshake_kind(), Some(rustls::HandshakeKind::Resumed))
}

/// Counts and logs a connection task's panic (the connection is gone, the worker serves on).
pub(crate) fn connection_panicked(worker: &Worker, peer: SocketAddr, panic: &crate::runtime::catch::Panic) {
    worker.stats.panics_connection.inc();
    tracing::error!(
        worker = worker.id,
        peer = %peer,
        panic = crate::runtime::catch::message(panic),
        "a connection task panicked: connection closed, the worker serves on"
    );
}
