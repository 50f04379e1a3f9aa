//! Reading the first bytes of a TCP connection without taking more than wanted: a look at what
//! waited (`MSG_PEEK`), then taking exactly the bytes that were needed. Both calls never block
//! (`MSG_DONTWAIT`); wait for readiness first (`TcpStream::readable`, not relaxed on epoll: these
//! calls bypass the driver's readiness cache).

use std::io;
use std::os::fd::AsRawFd;

use monoio::net::TcpStream;

/// Copies up to `buf.len()` waiting bytes into `buf` without taking them; `Ok(0)` at the end of
/// the stream, `WouldBlock` when none waits.
pub fn peek(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    recv(tcp, buf, libc::MSG_PEEK)
}

/// Takes up to `buf.len()` waiting bytes into `buf`; `Ok(0)` at the end of the stream,
/// `WouldBlock` when none waits.
pub fn take(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    recv(tcp, buf, 0)
}

/// Takes (and drops) `n` bytes that [`peek`] showed are waiting.
pub fn discard(tcp: &TcpStream, mut n: usize) -> io::Result<()> {
    let mut sink = [0u8; 512];
    while n > 0 {
        let want = n.min(sink.len());
        let got = recv(tcp, sink.get_mut(..want).unwrap_or_default(), 0)?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        n -= got;
    }
    Ok(())
}

fn recv(tcp: &TcpStream, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call,
        // and the descriptor stays open as long as `tcp` is borrowed.
        let n = unsafe { libc::recv(tcp.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags | libc::MSG_DONTWAIT) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}
