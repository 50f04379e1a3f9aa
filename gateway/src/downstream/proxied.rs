//! A listener's PROXY protocol header (`listeners[].proxy_protocol`): read before anything
//! else, TLS included, taking exactly the header's bytes out of the socket (looked at first,
//! then taken) so the client's own bytes stay where the TLS handshake or the HTTP codec reads
//! them. Bounded by `proxy_protocol_timeout` on the worker's coarse timer.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use monoio::net::TcpStream;

use super::proxy_protocol::{self, Accept, Parsed};
use crate::runtime::peek;
use crate::worker::Worker;

/// The header's (source, destination) addresses, `None` when the connection's own stand
/// (`optional` without a header, v1 `UNKNOWN`, v2 `LOCAL`); `Err`: why the connection is
/// refused, as the `reason` of `gateway_proxy_protocol_errors_total`.
pub(crate) async fn read_header(
    worker: &Worker,
    tcp: &TcpStream,
    accept: Accept,
    limit: Duration,
) -> Result<Option<(SocketAddr, SocketAddr)>, &'static str> {
    let deadline = Instant::now() + limit;
    // The header bytes taken so far; never more than the header.
    let mut got = worker.buffers.take();
    let mut window = [0u8; 512];
    let result = loop {
        let ready = monoio::select! {
            // Not relaxed: on epoll the driver's readiness cache does not see the peeks.
            r = tcp.readable(false) => r.is_ok(),
            _ = worker.idle_timer.at(deadline) => false,
        };
        if !ready {
            break Err("timeout");
        }
        let room = proxy_protocol::MAX_HEADER.saturating_sub(got.len()).clamp(1, window.len());
        let n = match peek::peek(tcp, window.get_mut(..room).unwrap_or_default()) {
            Ok(0) => break Err("closed"),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => break Err("closed"),
        };
        let before = got.len();
        got.extend_from_slice(window.get(..n).unwrap_or_default());
        match proxy_protocol::parse(&got, accept) {
            Ok(Parsed::Header { len, source }) => {
                break peek::discard(tcp, len.saturating_sub(before)).map(|()| source).map_err(|_| "closed");
            }
            Ok(Parsed::Absent) => break Ok(None),
            Err(e) => break Err(e.label()),
            Ok(Parsed::Incomplete) if accept == Accept::Optional && got.len() < proxy_protocol::V2_SIGNATURE.len() => {
                // Not yet known to be a header: take nothing (it may be the client's own
                // bytes) and look again shortly.
                got.truncate(before);
                monoio::select! {
                    _ = monoio::time::sleep(Duration::from_millis(5)) => {}
                    _ = worker.idle_timer.at(deadline) => break Err("timeout"),
                }
            }
            Ok(Parsed::Incomplete) => {
                // Every byte seen belongs to the header: take them and wait for the rest.
                if peek::discard(tcp, n).is_err() {
                    break Err("closed");
                }
            }
        }
    };
    got.clear();
    worker.buffers.give(got);
    result
}
