//! Moving a large body between two plain TCP sockets without passing it through user space:
//! `splice(2)` from the source socket into a pipe, and from the pipe into the destination
//! socket. The kernel hands the pages over by reference, so neither the copy into the
//! gateway's buffer nor the copy out of it is made.
//!
//! Measured on loopback (`loadtests/bench/ring-probe.sh` with `ORIGIN_BODY_SIZE`, and the
//! `splice-probe` micro-benchmark; `loadtests/results/splice-20261203.md`): a splice costs a
//! fixed amount more than a receive and a send, so for 16 KiB it is no cheaper, and from about
//! 64 KiB on it is 20-30% cheaper per body byte. So only the part of a `Content-Length` body
//! still to come after the first read, and only when that is at least [`SPLICE_MIN`], goes
//! this way.
//!
//! The calls are made directly, not through io_uring: io_uring runs every splice in a kernel
//! worker thread (its `io_splice` refuses the non-blocking attempt), a thread switch per call.
//! Each call is non-blocking (the sockets are made `O_NONBLOCK` for the transfer and put back
//! as they were after it: monoio's io_uring sockets are blocking, its epoll sockets already
//! non-blocking), and a socket that has nothing to give or no room is waited on through the
//! worker's driver (a poll on the ring, or epoll readiness), under the transfer's timeouts.
//!
//! Pipes are kept per worker thread (a few, empty): a pipe that still holds bytes when a
//! transfer fails is closed, never reused.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use monoio::net::TcpStream;

/// The least body still to come for which splicing pays (see the module's measurements).
pub const SPLICE_MIN: u64 = 32 * 1024;

/// Empty pipes kept per worker thread.
const KEEP: usize = 4;

thread_local! {
    static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

/// A non-blocking pipe: its read end and its write end.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

#[cfg(feature = "fault-injection")]
thread_local! {
    /// Set by the `splice-pipe-unavailable` fault: the next pipe cannot be made.
    static FAIL_NEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The fault `splice-pipe-unavailable` (tests only): the next transfer on this worker finds
/// no pipe, as at the descriptor limit.
#[cfg(feature = "fault-injection")]
pub fn fail_next_pipe() {
    FAIL_NEXT.set(true);
}

impl Pipe {
    fn take() -> io::Result<Pipe> {
        #[cfg(feature = "fault-injection")]
        if FAIL_NEXT.replace(false) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        if let Some(p) = PIPES.with(|p| p.borrow_mut().pop()) {
            return Ok(p);
        }
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let [r, w] = fds;
        // SAFETY: both descriptors were just created and are owned from here on.
        Ok(unsafe { Pipe { read: OwnedFd::from_raw_fd(r), write: OwnedFd::from_raw_fd(w) } })
    }

    /// Keeps an empty pipe for the next transfer (one that may hold bytes is dropped instead).
    fn give(self) {
        PIPES.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < KEEP {
                p.push(self);
            }
        });
    }
}

/// Why a spliced transfer stopped.
#[derive(Debug)]
pub enum SpliceError {
    /// Splicing could not start (no pipe: the descriptor limit, say); nothing was moved, and
    /// the caller moves the body by copying instead.
    Unavailable(io::Error),
    /// The source ended before `len` bytes.
    Truncated,
    ReadTimeout,
    Read(io::Error),
    /// The destination failed or timed out; nothing more can be sent to it.
    Write(io::Error),
}

/// A socket made non-blocking for a transfer; put back as it was when dropped.
struct NonBlocking {
    fd: RawFd,
    flags: libc::c_int,
}

impl NonBlocking {
    fn set(fd: RawFd) -> io::Result<NonBlocking> {
        // SAFETY: fcntl on a descriptor the caller's stream owns for the transfer's length.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        if flags & libc::O_NONBLOCK == 0 && unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NonBlocking { fd, flags })
    }
}

impl Drop for NonBlocking {
    fn drop(&mut self) {
        if self.flags & libc::O_NONBLOCK == 0 {
            // SAFETY: the descriptor is still open (the stream outlives this guard).
            unsafe { libc::fcntl(self.fd, libc::F_SETFL, self.flags) };
        }
    }
}

/// One non-blocking splice of at most `len` bytes; `Ok(None)`: it would block.
fn splice_once(from: RawFd, to: RawFd, len: usize) -> io::Result<Option<usize>> {
    // SAFETY: splicing between two open descriptors, with no offsets (sockets and pipes have
    // none).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        // Non-blocking calls are not interrupted in practice; if one is, the caller's loop
        // waits for readiness and tries again.
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}

/// The most one splice call is asked to move. A pipe holds 16 buffers, each a page or a
/// fragment of the socket's (up to 32 KiB), so how much fits is known only by filling it: a
/// full pipe answers `EAGAIN`.
const MAX_CALL: usize = 1 << 20;

/// Moves exactly `len` bytes from `src` to `dst` by splice, each wait for the source bounded by
/// `read_timeout` and each wait for the destination by `write_timeout`. Returns the bytes moved
/// (`len`) or why it stopped; [`SpliceError::Unavailable`] means nothing was moved.
pub async fn splice_exact(
    src: &TcpStream,
    dst: &TcpStream,
    len: u64,
    read_timeout: Duration,
    write_timeout: Duration,
) -> Result<u64, SpliceError> {
    let pipe = Pipe::take().map_err(SpliceError::Unavailable)?;
    let (from, to) = (src.as_raw_fd(), dst.as_raw_fd());
    let _src_mode = NonBlocking::set(from).map_err(SpliceError::Unavailable)?;
    let _dst_mode = NonBlocking::set(to).map_err(SpliceError::Unavailable)?;
    let mut left = len;
    let mut in_pipe = 0usize;
    while left > 0 || in_pipe > 0 {
        // Fill the pipe from the source while it has room and the body has bytes to come.
        let mut stalled_in = false;
        if left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(MAX_CALL);
            match splice_once(from, pipe.write.as_raw_fd(), want).map_err(SpliceError::Read)? {
                Some(0) => return Err(SpliceError::Truncated),
                Some(n) => {
                    left -= n as u64;
                    in_pipe += n;
                }
                None => stalled_in = true,
            }
        }
        // Empty the pipe into the destination.
        let mut stalled_out = false;
        if in_pipe > 0 {
            match splice_once(pipe.read.as_raw_fd(), to, in_pipe).map_err(SpliceError::Write)? {
                Some(0) => return Err(SpliceError::Write(io::ErrorKind::WriteZero.into())),
                Some(n) => in_pipe -= n,
                None => stalled_out = true,
            }
        }
        // Wait where the transfer is stuck: for room at the destination when the pipe cannot
        // be emptied (and is full, or the source has nothing or is done), else for bytes from
        // the source when the pipe is empty. A pipe that can still be filled loops: it fills
        // up (`EAGAIN`) or the source runs dry within a few calls.
        if stalled_out && (stalled_in || left == 0) {
            match crate::runtime::timeout(write_timeout, dst.writable(false)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(SpliceError::Write(e)),
                Err(_) => return Err(SpliceError::Write(io::ErrorKind::TimedOut.into())),
            }
        } else if stalled_in && in_pipe == 0 {
            match crate::runtime::timeout(read_timeout, src.readable(false)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(SpliceError::Read(e)),
                Err(_) => return Err(SpliceError::ReadTimeout),
            }
        }
    }
    pipe.give();
    Ok(len)
}

/// After a spliced body: takes into `buf` what already waits on `src` beyond it (at most 4 KiB,
/// without waiting), as the copying path's last read would have. From an upstream that is an
/// answer nobody asked for (the caller then sees unconsumed bytes and keeps the connection out
/// of the pool); from a client, the start of its next request. Returns the bytes taken.
pub fn take_waiting(src: &TcpStream, buf: &mut Vec<u8>) -> usize {
    let mut chunk = [0u8; 4096];
    // Nothing waiting, the end of the stream or an error: the next use of the connection finds
    // out as it would have.
    let n = super::peek::take(src, &mut chunk).unwrap_or(0);
    buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    n
}
