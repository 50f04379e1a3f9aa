//! Opening one HTTP/2 connection for an endpoint: TCP (TCP_NODELAY), optional TLS that must
//! negotiate ALPN h2, the h2 handshake, and the two tasks that run beside it on this worker: the
//! connection driver and the PING that tells when the peer's SETTINGS are known.

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{Ping, PingPong};
use monoio::io::IntoPollIo;
use monoio::net::TcpStream;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

use super::{Conn, H2Endpoint, H2Error, H2Stream, Slot, Transport};

/// The largest flow-control window HTTP/2 allows (RFC 9113, 6.9.1); larger settings are clamped.
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Opens a connection and takes its first stream slot for the caller. Only one runs at a time
/// per endpoint (`warming`), until the new connection's SETTINGS are known.
pub(super) async fn open(endpoint: &Rc<H2Endpoint>, deadline: Instant) -> Result<H2Stream, H2Error> {
    let warm = Warming::start(endpoint);
    let id = endpoint.new_id();
    let left = deadline.saturating_duration_since(Instant::now());
    let (sender, ping) = crate::runtime::timeout(left, dial(endpoint, id)).await.map_err(|_| H2Error::Timeout)??;
    let conn = Rc::new(Conn::new(id, sender));
    endpoint.adopt(Rc::clone(&conn));
    match ping {
        Some(ping) => {
            monoio::spawn(settle(Rc::downgrade(&conn), ping, endpoint.settings.connect_timeout, warm));
        }
        None => {
            conn.settled.set(true);
            drop(warm);
        }
    }
    let slot = Slot::take(endpoint, conn);
    match slot.conn.sender.clone().ready().await {
        Ok(sender) => Ok(H2Stream { sender, _slot: slot }),
        Err(e) => {
            slot.conn.draining.set(true);
            Err(H2Error::Handshake(e))
        }
    }
}

async fn dial(endpoint: &Rc<H2Endpoint>, id: u64) -> Result<(SendRequest<Bytes>, Option<PingPong>), H2Error> {
    let tcp = TcpStream::connect_addr(endpoint.address).await.map_err(H2Error::Connect)?;
    tcp.set_nodelay(true).map_err(H2Error::Connect)?;
    let io = tcp.into_poll_io().map_err(H2Error::Connect)?;
    match &endpoint.transport {
        Transport::Plain => handshake(endpoint, id, io).await,
        Transport::Tls { config, server_name } => {
            let tls =
                TlsConnector::from(Arc::clone(config)).connect(server_name.clone(), io).await.map_err(H2Error::Tls)?;
            if tls.get_ref().1.alpn_protocol() != Some(b"h2".as_slice()) {
                return Err(H2Error::NoH2Alpn);
            }
            handshake(endpoint, id, tls).await
        }
    }
}

/// The h2 handshake; spawns the connection's driver, which removes the connection from the
/// endpoint when it ends.
async fn handshake<T>(
    endpoint: &Rc<H2Endpoint>,
    id: u64,
    io: T,
) -> Result<(SendRequest<Bytes>, Option<PingPong>), H2Error>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let s = &endpoint.settings;
    let (sender, mut connection) = h2::client::Builder::new()
        .initial_window_size(s.initial_stream_window.min(MAX_WINDOW))
        .initial_connection_window_size(s.initial_connection_window.min(MAX_WINDOW))
        .max_header_list_size(s.max_header_list_bytes)
        .enable_push(false)
        .handshake::<T, Bytes>(io)
        .await
        .map_err(H2Error::Handshake)?;
    let ping = connection.ping_pong();
    let owner = Rc::downgrade(endpoint);
    let address = endpoint.address;
    monoio::spawn(async move {
        match connection.await {
            Ok(()) => tracing::debug!(upstream = %address, "h2 connection closed"),
            Err(e) => tracing::debug!(upstream = %address, error = %e, "h2 connection ended"),
        }
        if let Some(endpoint) = owner.upgrade() {
            endpoint.forget(id);
        }
    });
    Ok((sender, ping))
}

/// Waits for the PONG to the first PING: the peer sends its SETTINGS before anything else, so
/// h2 has applied them by then. A peer that does not answer in time gets no further streams.
async fn settle(conn: Weak<Conn>, mut ping: PingPong, limit: Duration, warm: Warming) {
    let pong = crate::runtime::timeout(limit, ping.ping(Ping::opaque())).await;
    if let Some(conn) = conn.upgrade() {
        match pong {
            Ok(Ok(_)) => conn.settled.set(true),
            _ => conn.draining.set(true),
        }
    }
    drop(warm);
}

/// Marks the endpoint as opening a connection until dropped, also when `acquire` is cancelled.
struct Warming(Rc<H2Endpoint>);

impl Warming {
    fn start(endpoint: &Rc<H2Endpoint>) -> Self {
        endpoint.warming.set(true);
        Self(Rc::clone(endpoint))
    }
}

impl Drop for Warming {
    fn drop(&mut self) {
        self.0.warming.set(false);
        self.0.waiters.notify_all();
    }
}
