//! `gateway drain`: asks a running gateway to drain through its admin port (`POST /drain` with
//! the admin token), and optionally waits until it has exited. For hooks that run in the
//! gateway's own container image (Kubernetes `preStop`), which holds no shell or HTTP client.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long connecting, sending and reading the answer may each take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the wait looks whether the gateway still answers.
const POLL: Duration = Duration::from_millis(200);
/// Added to `drain_timeout` for the wait: the process exits shortly after its drain ends.
const EXIT_MARGIN: Duration = Duration::from_secs(5);

/// Where and how to ask.
pub struct DrainRequest<'a> {
    /// The admin address; a wildcard address (`0.0.0.0`, `::`) is reached on loopback.
    pub admin: SocketAddr,
    pub token: Option<&'a str>,
    /// Wait until the gateway stops answering on its admin port, at most this long.
    pub wait: Option<Duration>,
}

/// The admin address and token of `config`, and its drain timeout plus a margin for the wait.
/// `admin` overrides the configured address (needed when it is configured with port 0).
pub fn request_for(
    config: &gateway_config::Config,
    admin: Option<SocketAddr>,
    wait: bool,
) -> Result<DrainRequest<'_>, String> {
    let configured = config.server.admin.as_ref();
    let address = admin
        .or(configured.map(|a| a.address))
        .ok_or("the configuration has no admin port (server.admin): nothing to send the drain to")?;
    if address.port() == 0 {
        return Err(format!("admin address {address} has port 0: pass the bound address with --admin"));
    }
    Ok(DrainRequest {
        admin: address,
        token: configured.and_then(|a| a.token.as_deref()),
        wait: wait.then(|| config.server.drain_timeout + EXIT_MARGIN),
    })
}

/// Sends the drain; with `wait`, returns once the admin port stops accepting connections (the
/// process exited). The error says what failed.
pub fn drain(request: &DrainRequest<'_>) -> Result<String, String> {
    let target = reachable(request.admin);
    let status = post_drain(target, request.token).map_err(|e| format!("POST http://{target}/drain: {e}"))?;
    if status != 202 && status != 200 {
        let why = if status == 401 { " (wrong or missing admin token)" } else { "" };
        return Err(format!("POST http://{target}/drain answered {status}{why}"));
    }
    let Some(limit) = request.wait else { return Ok(format!("{target}: draining")) };
    let started = Instant::now();
    while started.elapsed() < limit {
        if TcpStream::connect_timeout(&target, IO_TIMEOUT).is_err() {
            return Ok(format!("{target}: drained and exited after {:.1} s", started.elapsed().as_secs_f64()));
        }
        std::thread::sleep(POLL);
    }
    Err(format!("{target}: still running {} s after the drain was requested", limit.as_secs()))
}

/// A wildcard address is reached on the loopback address of its family.
fn reachable(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), address.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), address.port()),
        _ => address,
    }
}

/// `POST /drain` with the token; the answer's status code.
fn post_drain(target: SocketAddr, token: Option<&str>) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&target, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let authorization = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /drain HTTP/1.1\r\nhost: {target}\r\n{authorization}content-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < 12 {
        let n = stream.read(head.get_mut(len..).unwrap_or_default())?;
        if n == 0 {
            break;
        }
        len += n;
    }
    status_of(head.get(..len).unwrap_or_default())
        .ok_or_else(|| std::io::Error::other("the admin port did not answer with an HTTP status line"))
}

/// The status code of an HTTP/1.x status line at the start of `bytes`.
fn status_of(bytes: &[u8]) -> Option<u16> {
    let rest = bytes.strip_prefix(b"HTTP/1.")?;
    let code = rest.get(2..5)?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(status_of(b"HTTP/1.1 202 Accepted\r\n"), Some(202));
        assert_eq!(status_of(b"HTTP/1.0 401 Unauthorized\r\n"), Some(401));
        assert_eq!(status_of(b"SSH-2.0-OpenSSH"), None);
        assert_eq!(status_of(b"HTTP/1.1 2"), None);
    }

    #[test]
    fn wildcard_admin_addresses_are_reached_on_loopback() {
        assert_eq!(reachable("0.0.0.0:9901".parse().unwrap()), "127.0.0.1:9901".parse().unwrap());
        assert_eq!(reachable("[::]:9901".parse().unwrap()), "[::1]:9901".parse().unwrap());
        assert_eq!(reachable("10.0.0.1:9901".parse().unwrap()), "10.0.0.1:9901".parse().unwrap());
    }
}
