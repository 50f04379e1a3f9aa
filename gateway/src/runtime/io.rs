//! Small helpers over monoio's owned-buffer I/O.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::AsyncReadRent;
use monoio::net::TcpStream;

use super::idle_timer::Expiry;
use super::stream::Stream;

/// Reads into the spare capacity of `buf`, appending to its contents. `buf` must have spare
/// capacity (the caller compacts or grows it first). `Ok(0)` means end of stream.
pub async fn read_append(stream: &mut Stream, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
    stream.read_append(buf).await
}

/// [`read_append`] bounded by `limit`; a timeout is reported as `ErrorKind::TimedOut`.
pub async fn read_append_timeout(stream: &mut Stream, buf: Vec<u8>, limit: Duration) -> (io::Result<usize>, Vec<u8>) {
    // The buffer is owned by the operation; on timeout it is lost with the cancelled read,
    // so hand back a fresh empty one (the caller closes the connection anyway).
    match crate::runtime::timeout(limit, read_append(stream, buf)).await {
        Ok(r) => r,
        Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`read_append`] bounded by a deadline of the worker's coarse timer (`expiry`); a timeout is
/// reported as `ErrorKind::TimedOut`. The wait holds three words instead of a timer entry.
pub async fn read_append_expiry(stream: &mut Stream, buf: Vec<u8>, expiry: Expiry<'_>) -> (io::Result<usize>, Vec<u8>) {
    // As above: on timeout the buffer goes with the cancelled read.
    monoio::select! {
        // The I/O first: the deadline is only looked at while it waits.
        biased;
        r = read_append(stream, buf) => r,
        _ = expiry => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// Writes `buf[from..]` completely, bounded by `limit`; returns the buffer.
pub async fn write_from(stream: &mut Stream, buf: Vec<u8>, from: usize, limit: Duration) -> (io::Result<()>, Vec<u8>) {
    if from >= buf.len() {
        return (Ok(()), buf);
    }
    let len = buf.len();
    let fut = stream.write_all_range(buf, from..len);
    match crate::runtime::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// Writes `buf[range]` completely, bounded by a deadline of the worker's coarse timer (`expiry`:
/// never early, up to about 0.2 s late), for writes to a client bounded by `body_io`: the wait
/// holds three words and costs no timer entry. Returns the buffer.
pub async fn write_range_expiry(
    stream: &mut Stream,
    buf: Vec<u8>,
    range: std::ops::Range<usize>,
    expiry: Expiry<'_>,
) -> (io::Result<()>, Vec<u8>) {
    if range.is_empty() {
        return (Ok(()), buf);
    }
    monoio::select! {
        // The I/O first: the deadline is only looked at while it waits.
        biased;
        r = stream.write_all_range(buf, range) => r,
        _ = expiry => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`read_append`] bounded by `timer`, which the caller holds across several operations of one
/// exchange (one timer entry for all of them, instead of one per operation); a timeout is
/// `ErrorKind::TimedOut`.
pub async fn read_append_by(
    stream: &mut Stream,
    buf: Vec<u8>,
    timer: Pin<&mut Expiry<'_>>,
) -> (io::Result<usize>, Vec<u8>) {
    // As above: on timeout the buffer goes with the cancelled read.
    monoio::select! {
        // The I/O first: the deadline is only looked at while it waits.
        biased;
        r = read_append(stream, buf) => r,
        _ = timer => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// [`write_from`] bounded by `timer`, as [`read_append_by`].
pub async fn write_from_by(
    stream: &mut Stream,
    buf: Vec<u8>,
    from: usize,
    timer: Pin<&mut Expiry<'_>>,
) -> (io::Result<()>, Vec<u8>) {
    if from >= buf.len() {
        return (Ok(()), buf);
    }
    let len = buf.len();
    monoio::select! {
        // The I/O first: the deadline is only looked at while it waits.
        biased;
        r = stream.write_all_range(buf, from..len) => r,
        _ = timer => (Err(io::ErrorKind::TimedOut.into()), Vec::new()),
    }
}

/// On the epoll driver: one receive into `dst`, now, through the driver. `None`: nothing to
/// read yet, and the driver now knows the socket is drained, so a relaxed wait
/// (`readable(true)`) sleeps until bytes arrive, with no system call.
///
/// Why: the epoll driver keeps a socket's readiness until a read finds it drained, and a read
/// that took everything there was (a whole request, a whole response) does not. A wait after it
/// must then ask the kernel (`readable(false)`: a `poll` now, and a second one once the bytes
/// come), and a read must fail once first. Trying the read instead costs one receive when the
/// bytes are not there yet, and is the read itself when they are.
///
/// Always `None` on io_uring, where a receive cannot be tried without waiting for its
/// completion: callers check [`monoio::utils::is_legacy`] first.
pub fn try_read_now(tcp: &mut TcpStream, dst: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
    if !monoio::utils::is_legacy() || dst.is_empty() {
        return None;
    }
    let read = tcp.read(Borrowed { ptr: dst.as_mut_ptr().cast(), len: dst.len() });
    let mut read = std::pin::pin!(read);
    // The no-op waker stays with the socket's readiness until the next wait replaces it (an
    // ended task's waker would keep the task allocated; see `park::release_waker`).
    let mut cx = Context::from_waker(Waker::noop());
    match read.as_mut().poll(&mut cx) {
        Poll::Ready((result, _)) => Some(result.map(|n| n.min(dst.len()))),
        Poll::Pending => None,
    }
}

/// `dst` of [`try_read_now`], lent to one receive of the epoll driver. Sound only there: the
/// driver makes the system call inside the poll, and a dropped operation leaves nothing
/// behind, so the memory is written only while the caller's borrow lasts. (io_uring hands the
/// pointer to the kernel until the operation completes: never used there.)
struct Borrowed {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `ptr` is valid for writes of `len` bytes while the borrow in `try_read_now` lasts,
// and the epoll driver writes only within the poll made there (see above).
unsafe impl IoBufMut for Borrowed {
    fn write_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    fn bytes_total(&mut self) -> usize {
        self.len
    }

    unsafe fn set_init(&mut self, _pos: usize) {}
}

/// [`try_read_now`] into the spare capacity of `buf`, appending what it read.
pub fn try_read_append_now(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
    let result = try_read_now(tcp, buf.spare_capacity_mut());
    if let Some(Ok(n)) = result {
        // SAFETY: the receive initialised the first `n` bytes of the spare capacity (`n` is
        // capped at its length).
        unsafe { buf.set_len(buf.len() + n) };
    }
    result
}

/// Makes room to read at least `min_spare` more bytes: drops the consumed prefix
/// `buf[..*pos]` first, then grows the buffer only if that was not enough and the result
/// stays within `max_len`. Returns false when the buffer cannot take more bytes.
pub fn make_room(buf: &mut Vec<u8>, pos: &mut usize, min_spare: usize, max_len: usize) -> bool {
    if *pos > 0 && buf.capacity() - buf.len() < min_spare {
        buf.drain(..*pos);
        *pos = 0;
    }
    if buf.capacity() - buf.len() >= min_spare {
        return true;
    }
    if buf.len() >= max_len {
        return false;
    }
    let want = (buf.len() + min_spare).min(max_len.max(buf.len() + 1));
    buf.reserve_exact(want - buf.len());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A connected pair: the client end (std, blocking) and the server end (monoio).
    fn pair() -> (std::net::TcpStream, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // As the driver's own accepted sockets are (on epoll a receive must not block).
        server.set_nonblocking(true).unwrap();
        (client, TcpStream::from_std(server).unwrap())
    }

    /// Whether a relaxed readiness wait completes within `limit`.
    async fn ready_within(tcp: &mut TcpStream, limit: Duration) -> bool {
        monoio::select! {
            r = tcp.readable(true) => r.is_ok(),
            _ = monoio::time::sleep(limit) => false,
        }
    }

    fn legacy(f: impl std::future::Future<Output = ()>) {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(f);
    }

    /// The reason for `try_read_now`: on epoll a read that takes everything leaves the readiness
    /// set, and a relaxed wait returns at once with nothing to read.
    #[test]
    fn on_epoll_a_draining_read_leaves_stale_readiness_that_try_read_now_clears() {
        legacy(async {
            let (mut client, mut server) = pair();
            client.write_all(b"abc").unwrap();
            assert!(ready_within(&mut server, Duration::from_secs(5)).await);
            let (n, _) = server.read(Vec::with_capacity(64)).await;
            assert_eq!(n.unwrap(), 3);
            assert!(ready_within(&mut server, Duration::from_millis(50)).await, "stale: ready with nothing to read");
            let mut dst = [MaybeUninit::uninit(); 16];
            assert!(try_read_now(&mut server, &mut dst).is_none(), "nothing to read");
            assert!(!ready_within(&mut server, Duration::from_millis(50)).await, "drained: the wait sleeps");
            client.write_all(b"de").unwrap();
            assert!(ready_within(&mut server, Duration::from_secs(5)).await, "woken by new bytes");
            let mut buf = Vec::with_capacity(16);
            assert_eq!(try_read_append_now(&mut server, &mut buf).unwrap().unwrap(), 2);
            assert_eq!(buf, b"de");
        });
    }

    #[test]
    fn on_epoll_try_read_now_takes_what_waits_and_reports_the_end() {
        legacy(async {
            let (mut client, mut server) = pair();
            client.write_all(b"hello").unwrap();
            assert!(ready_within(&mut server, Duration::from_secs(5)).await);
            // Appends after what the buffer holds, at most its spare capacity.
            let mut buf = Vec::with_capacity(8);
            buf.extend_from_slice(b"xy");
            assert_eq!(try_read_append_now(&mut server, &mut buf).unwrap().unwrap(), 5);
            assert_eq!(buf, b"xyhello");
            // A buffer without spare capacity reads nothing.
            let mut full = Vec::new();
            assert!(try_read_append_now(&mut server, &mut full).is_none());
            drop(client);
            assert!(ready_within(&mut server, Duration::from_secs(5)).await);
            let mut dst = [MaybeUninit::uninit(); 4];
            assert_eq!(try_read_now(&mut server, &mut dst).unwrap().unwrap(), 0, "end of stream");
        });
    }

    #[test]
    fn on_io_uring_try_read_now_never_reads() {
        let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer().build() else {
            eprintln!("skipped: io_uring is not available here");
            return;
        };
        rt.block_on(async {
            let (mut client, mut server) = pair();
            client.write_all(b"abc").unwrap();
            assert!(ready_within(&mut server, Duration::from_secs(5)).await);
            let mut dst = [MaybeUninit::uninit(); 16];
            assert!(try_read_now(&mut server, &mut dst).is_none());
            let (n, _) = server.read(Vec::with_capacity(64)).await;
            assert_eq!(n.unwrap(), 3, "the bytes are still there");
        });
    }

    /// What `downstream::h1::armed_wait` relies on when a waiting connection parks: a receive
    /// cancelled after its bytes arrived (before the worker looked at its completions) either
    /// returns them or leaves them in the socket, with every ring setup the workers use.
    #[test]
    fn on_io_uring_a_receive_cancelled_as_its_bytes_arrive_loses_none_of_them() {
        use monoio::io::{CancelableAsyncReadRent, Canceller};
        for flags in [
            super::super::UringFlags::DeferTaskrun,
            super::super::UringFlags::CoopTaskrun,
            super::super::UringFlags::Plain,
        ] {
            let Ok(mut rt) = super::super::uring_runtime(flags) else {
                eprintln!("skipped: this io_uring setup is not available here");
                continue;
            };
            rt.block_on(async {
                let (mut client, mut server) = pair();
                let (res, buf) = {
                    let canceller = Canceller::new();
                    let read = server.cancelable_read(Vec::with_capacity(64), canceller.handle());
                    let mut read = std::pin::pin!(read);
                    // The receive is submitted and waits (nothing has come yet).
                    monoio::select! {
                        biased;
                        _ = &mut read => panic!("nothing was sent yet"),
                        _ = monoio::time::sleep(Duration::from_millis(20)) => {}
                    };
                    client.write_all(b"abc").unwrap();
                    // The bytes arrive while the worker is busy elsewhere, then the cancel comes.
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = canceller.cancel();
                    read.await
                };
                let got = match res {
                    Ok(n) => buf.get(..n).unwrap_or_default().to_vec(),
                    Err(e) => {
                        assert_eq!(e.raw_os_error(), Some(libc::ECANCELED), "{e}");
                        // Cancelled before it took anything: the bytes wait in the socket.
                        let (n, buf) = server.read(Vec::with_capacity(64)).await;
                        buf.get(..n.unwrap()).unwrap_or_default().to_vec()
                    }
                };
                assert_eq!(got, b"abc");
            });
        }
    }

    #[test]
    fn make_room_compacts_before_growing() {
        let mut buf = Vec::with_capacity(8);
        buf.extend_from_slice(b"abcdefgh");
        let mut pos = 6;
        assert!(make_room(&mut buf, &mut pos, 4, 16));
        assert_eq!(buf, b"gh");
        assert_eq!(pos, 0);
        assert_eq!(buf.capacity(), 8);
    }

    #[test]
    fn make_room_grows_up_to_the_limit_only() {
        let mut buf = Vec::with_capacity(4);
        buf.extend_from_slice(b"abcd");
        let mut pos = 0;
        assert!(make_room(&mut buf, &mut pos, 4, 6));
        assert!(buf.capacity() >= 5);
        buf.resize(6, b'x');
        assert!(!make_room(&mut buf, &mut pos, 4, 6));
    }
}
