//! Upstream HTTP/1.1 connections for a try: a pooled one or a new one (TCP, TLS), and the one
//! resend of a request that met a pooled connection the upstream had closed while idle.

use std::io;
use std::time::Duration;

use monoio::net::TcpStream;
use monoio::time::Instant;

use crate::runtime::stream::Stream;
use crate::upstream::{EndpointState, UpConn, UpstreamError};
use crate::worker::{Local, Worker};

/// An upstream connection to `endpoint`: a pooled one (`true`: reused) or a new one. `now`:
/// the caller's clock reading (for the pool's idle timeout).
#[allow(clippy::too_many_arguments)]
pub async fn acquire(
    worker: &Worker,
    local: &Local,
    cluster: usize,
    endpoint: &EndpointState,
    connect_timeout: Duration,
    deadline: Instant,
    now: Instant,
) -> Result<(UpConn, bool), UpstreamError> {
    Ok(match endpoint.pool.take(&worker.stats.upstream_idle_discards, now.into_std()) {
        Some(s) => {
            worker.stats.upstream_reuses.inc();
            if let Some(m) = local.clusters.get(cluster).map(|c| c.metrics()) {
                m.reuse();
            }
            (s, true)
        }
        None => {
            if !endpoint.may_connect() {
                return Err(UpstreamError::Overflow);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let tls = local.clusters.get(cluster).and_then(|c| c.tls.as_ref());
            let up = connect(endpoint, tls, connect_timeout.min(left)).await.map_err(|e| {
                worker.stats.upstream_connect_errors.inc();
                if Instant::now() >= deadline {
                    UpstreamError::Timeout
                } else {
                    UpstreamError::Connect(e)
                }
            })?;
            let up = endpoint.adopt(up);
            worker.stats.upstream_connects.inc();
            if let Some(m) = local.clusters.get(cluster).map(|c| c.metrics()) {
                m.connect();
            }
            (up, false)
        }
    })
}

/// Opens a connection to `endpoint` (TCP_NODELAY; TLS when the cluster has it) within `limit`.
async fn connect(
    endpoint: &EndpointState,
    tls: Option<&crate::upstream::UpstreamTlsConfig>,
    limit: Duration,
) -> io::Result<Stream> {
    let start = Instant::now();
    let stream = crate::runtime::timeout(limit, TcpStream::connect_addr(endpoint.address))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    stream.set_nodelay(true)?;
    let Some(tls) = tls else { return Ok(Stream::Tcp(stream)) };
    use monoio::io::IntoPollIo;
    let io = stream.into_poll_io()?;
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(&tls.config));
    let left = limit.saturating_sub(start.elapsed());
    // Boxed: the handshake state is large and would grow every request's future.
    let tls_stream = crate::runtime::timeout(left, Box::pin(connector.connect(tls.server_name.clone(), io)))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    // HTTP/1.1 to the upstream: on io_uring in completion mode from here (`runtime::uring_tls`).
    crate::runtime::stream::completion_mode(crate::runtime::stream::TlsIo::Client(Box::new(tls_stream)))
}

/// `Ok` when a request that failed on a reused pooled connection before any response byte may
/// be sent once more on a fresh one (`replayable`: reused, idempotent, no body); else the error.
pub fn retry_if_stale(
    worker: &Worker,
    err: UpstreamError,
    replayable: bool,
    retried: &mut bool,
) -> Result<(), UpstreamError> {
    match err {
        UpstreamError::ClosedEarly | UpstreamError::Send(_) if replayable && !*retried => {
            worker.stats.upstream_stale_retries.inc();
            *retried = true;
            Ok(())
        }
        e => Err(e),
    }
}
