//! Acknowledging what a connection received at once instead of after the delayed-ACK timer.
//!
//! Linux delays the ACK of data received on an interactive connection (up to 40 ms) hoping to
//! carry it on the next reply. When the peer spoke last and waits for that ACK before it sends
//! more (Nagle's algorithm holds a small write while earlier data is unacknowledged), and this
//! side has nothing to send, both wait for the timer. Setting `TCP_QUICKACK` while an ACK is
//! pending makes the kernel send it during the call (`__tcp_sock_set_quickack` ->
//! `tcp_cleanup_rbuf`), provided the received bytes were read; it also leaves the delayed-ACK
//! ("pingpong") mode, which the kernel re-enters by itself as the exchange goes on.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Sends the ACK the kernel is holding for `socket`, if any, now. One `setsockopt`; an error
/// (not a TCP socket, or closed) changes nothing else.
pub fn ack_now(socket: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: the descriptor belongs to `socket`, which is borrowed (so open) for the duration
    // of this call, and the borrowed descriptor does not outlive it.
    let fd = unsafe { BorrowedFd::borrow_raw(socket.as_raw_fd()) };
    rustix::net::sockopt::set_tcp_quickack(fd, true).map_err(io::Error::from)
}
