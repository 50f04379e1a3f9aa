//! Raw epoll (level-triggered) with a nanosecond timeout: `epoll_pwait2` where the kernel has
//! it (Linux 5.11+), else `epoll_wait` with the timeout rounded up to whole milliseconds.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// An epoll instance and its event buffer.
#[derive(Debug)]
pub struct Poller {
    epfd: OwnedFd,
    events: Vec<libc::epoll_event>,
    pwait2: bool,
}

/// A ready file descriptor: the token it was registered with and what it is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Error or hang-up: a read or `SO_ERROR` tells which.
    pub failed: bool,
}

impl Poller {
    /// At most `capacity` events are returned per wait.
    pub fn new(capacity: usize) -> io::Result<Poller> {
        // SAFETY: plain syscall without pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let events = vec![libc::epoll_event { events: 0, u64: 0 }; capacity.clamp(1, 4096)];
        Ok(Poller { epfd, events, pwait2: true })
    }

    /// Watches `fd` for reading, and for writing too if `write`.
    pub fn add(&self, fd: RawFd, token: u64, write: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, write)
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, token: u64, write: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, write)
    }

    /// Waits until something is ready or `timeout` (None: forever) has passed, and returns the
    /// events (none on timeout or a signal).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<impl Iterator<Item = Event> + '_> {
        let max = self.events.len() as libc::c_int;
        let ptr = self.events.as_mut_ptr();
        let mut n = -1;
        if self.pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: `ptr` points to `max` writable events; `ts_ptr` is null or points to a
            // timespec that outlives the call; no signal mask.
            n = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.epfd.as_raw_fd(),
                    ptr,
                    max,
                    ts_ptr,
                    std::ptr::null::<u8>(),
                    0 as libc::size_t,
                )
            } as libc::c_int;
            if n < 0 {
                let e = io::Error::last_os_error();
                // ENOSYS: an older kernel; EPERM: a seccomp filter that does not know it.
                if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                    self.pwait2 = false;
                } else if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        if !self.pwait2 {
            let ms = timeout.map_or(-1, |t| t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int);
            // SAFETY: `ptr` points to `max` writable events.
            n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), ptr, max, ms) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        let ready = usize::try_from(n).unwrap_or(0);
        Ok(self.events.iter().take(ready).map(|e| {
            let (bits, token) = (e.events, e.u64);
            Event {
                token,
                readable: bits & (libc::EPOLLIN as u32) != 0,
                writable: bits & (libc::EPOLLOUT as u32) != 0,
                failed: bits & ((libc::EPOLLERR | libc::EPOLLHUP) as u32) != 0,
            }
        }))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, write: bool) -> io::Result<()> {
        let mut bits = libc::EPOLLIN | libc::EPOLLRDHUP;
        if write {
            bits |= libc::EPOLLOUT;
        }
        let mut ev = libc::epoll_event { events: bits as u32, u64: token };
        // SAFETY: `ev` is a valid event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Makes this thread's timers (the epoll timeout) expire within 1 ns of their deadline instead
/// of the default 50 µs slack. Best effort.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only this thread.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn times_out_then_reports_readiness() {
        let mut poller = Poller::new(8).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        poller.add(a.as_raw_fd(), 7, false).unwrap();
        let t = Instant::now();
        assert_eq!(poller.wait(Some(Duration::from_micros(1500))).unwrap().count(), 0);
        assert!(t.elapsed() >= Duration::from_micros(1500));
        b.write_all(b"x").unwrap();
        let events: Vec<Event> = poller.wait(Some(Duration::from_secs(5))).unwrap().collect();
        assert_eq!(events, [Event { token: 7, readable: true, writable: false, failed: false }]);
        poller.modify(a.as_raw_fd(), 7, true).unwrap();
        let events: Vec<Event> = poller.wait(Some(Duration::ZERO)).unwrap().collect();
        assert_eq!(events, [Event { token: 7, readable: true, writable: true, failed: false }]);
    }
}
