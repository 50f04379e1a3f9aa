//! Binding listener sockets: one SO_REUSEPORT socket per listener per worker, so the kernel
//! spreads connections across workers and no accept lock is shared.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// One configured listener, bound once per worker.
pub struct Bound {
    pub name: String,
    /// The address really bound (port 0 resolved).
    pub address: SocketAddr,
    /// One socket per worker, in worker order.
    pub sockets: Vec<TcpListener>,
}

/// Binds `workers` sockets for the listener. Port 0 is resolved by the first socket and reused
/// by the others so that all workers share one port.
pub fn bind(name: &str, address: SocketAddr, backlog: u32, workers: usize) -> io::Result<Bound> {
    let mut sockets = Vec::with_capacity(workers);
    let mut actual = address;
    for _ in 0..workers.max(1) {
        let socket = bind_one(actual, backlog)?;
        if actual.port() == 0 {
            actual = socket.local_addr()?;
        }
        sockets.push(socket);
    }
    Ok(Bound { name: name.to_string(), address: actual, sockets })
}

/// Serves listener `name` on sockets inherited from a previous process (their accept queues go
/// on); fewer than `workers` are completed with new SO_REUSEPORT sockets, more are all kept
/// (closing one would drop the connections queued on it: workers then accept from several).
pub fn adopt(
    name: &str,
    address: SocketAddr,
    mut sockets: Vec<TcpListener>,
    backlog: u32,
    workers: usize,
) -> io::Result<Bound> {
    for s in &sockets {
        s.set_nonblocking(true)?;
    }
    while sockets.len() < workers.max(1) {
        sockets.push(bind_one(address, backlog)?);
    }
    Ok(Bound { name: name.to_string(), address, sockets })
}

fn bind_one(address: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_is_shared_by_all_workers() -> io::Result<()> {
        let b = bind("t", "127.0.0.1:0".parse().map_err(io::Error::other)?, 128, 3)?;
        assert_ne!(b.address.port(), 0);
        assert_eq!(b.sockets.len(), 3);
        for s in &b.sockets {
            assert_eq!(s.local_addr()?, b.address);
        }
        Ok(())
    }
}
