//! A worker's parked sockets: idle connections that are not tasks.
//!
//! An idle keep-alive connection kept as a task costs the task and its whole future, as large
//! as the future's largest state, for as long as it waits. Parked here it costs a slot (the
//! socket, its deadline, a small payload) and an entry in a deadline heap, about 150 bytes.
//! Readiness comes from one epoll instance per worker, each parked socket registered one-shot,
//! and the worker waits on that instance through its own driver (an io_uring poll, or the
//! epoll driver's readiness), so both I/O drivers park alike. The registration lives in the
//! kernel, not in the process's memory.
//!
//! Guarantees: a parked socket comes out exactly once, by [`Parking::take_ready`] (it became
//! readable or hung up), [`Parking::take_expired`] (its deadline passed) or
//! [`Parking::take_where`]; a readiness event of a socket that came out another way is ignored.
//! Nothing here knows what the socket carries.

use std::cell::{OnceCell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Instant;

use monoio::net::TcpStream;

/// Events read per `epoll_wait` call.
const BATCH: usize = 64;
/// Slots per chunk of the slab. The slab grows a chunk at a time: no reallocation that copies
/// every slot and leaves the old copy in the allocator (a doubling `Vec` would cost up to three
/// times the slots' size at its peaks).
const CHUNK: usize = 1024;

/// Parked sockets with a payload `T` each. Worker-local.
pub struct Parking<T> {
    slots: RefCell<Slots<T>>,
    /// Created at the first park.
    epoll: OnceCell<Epoll>,
}

/// The epoll instance, as monoio's driver sees it: a descriptor that is only ever waited on
/// for readability (it is readable while a registered socket is ready). monoio exposes
/// readiness waits for its socket types only, so it is held as one; it is never read, written
/// or asked for addresses. Dropping it closes the instance.
struct Epoll {
    waiter: TcpStream,
}

struct Slots<T> {
    /// Every chunk has capacity [`CHUNK`] and only the last is not full.
    chunks: Vec<Vec<Entry<T>>>,
    free: Vec<u32>,
    /// (deadline, key, generation) of every park; entries of sockets that came out another way
    /// stay until their deadline (or a compaction) and are skipped.
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    len: usize,
}

struct Entry<T> {
    /// Bumped whenever the slot is emptied, so stale events and deadlines cannot take its
    /// next occupant.
    generation: u32,
    parked: Option<Parked<T>>,
}

struct Parked<T> {
    stream: TcpStream,
    item: T,
}

impl<T> Parking<T> {
    pub fn new() -> Self {
        Self {
            slots: RefCell::new(Slots { chunks: Vec::new(), free: Vec::new(), deadlines: BinaryHeap::new(), len: 0 }),
            epoll: OnceCell::new(),
        }
    }

    /// Parks `stream` until it is readable (or hangs up) or `deadline` passes. Must be called
    /// on the worker's runtime thread. On error (no epoll instance, registration refused) the
    /// stream and item come back unchanged.
    pub fn park(&self, stream: TcpStream, deadline: Instant, item: T) -> Result<(), (TcpStream, T)> {
        let epoll = match self.epoll() {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(error = %e, "cannot create the parking epoll instance");
                return Err((stream, item));
            }
        };
        release_waker(&stream);
        let mut slots = self.slots.borrow_mut();
        let Some(key) = slots.free.pop().or_else(|| slots.grow()) else { return Err((stream, item)) };
        let Some(generation) = slots.entry(key).map(|e| e.generation) else {
            return Err((stream, item));
        };
        if let Err(e) = register(epoll.fd(), stream.as_raw_fd(), token(key, generation)) {
            tracing::debug!(error = %e, "cannot register a socket for parking");
            slots.free.push(key);
            return Err((stream, item));
        }
        if let Some(entry) = slots.entry_mut(key) {
            entry.parked = Some(Parked { stream, item });
        }
        slots.deadlines.push(Reverse((deadline, key, generation)));
        slots.len += 1;
        Ok(())
    }

    /// Resolves when a parked socket may be ready ([`Parking::take_ready`] tells which); never
    /// before the first park. Errors of the wait itself resolve it too (the caller looks, finds
    /// nothing, and waits again on its next round).
    pub async fn ready(&self) {
        match self.epoll.get() {
            // On the epoll driver, relaxed readiness can be stale; io_uring polls for real.
            Some(e) => {
                let _ = e.waiter.readable(false).await;
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// Takes out every parked socket that is readable or hung up, into `out`.
    pub fn take_ready(&self, out: &mut Vec<(TcpStream, T)>) {
        let Some(epoll) = self.epoll.get() else { return };
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        loop {
            // SAFETY: `events` is a valid buffer of BATCH entries; timeout 0 never blocks.
            let n = unsafe { libc::epoll_wait(epoll.fd(), events.as_mut_ptr(), BATCH as i32, 0) };
            let Ok(n) = usize::try_from(n) else { return };
            let mut slots = self.slots.borrow_mut();
            for event in events.iter().take(n) {
                let data = event.u64;
                if let Some(p) = slots.take((data & 0xffff_ffff) as u32, (data >> 32) as u32) {
                    out.push((p.stream, p.item));
                }
            }
            if n < BATCH {
                return;
            }
        }
    }

    /// Takes out every parked socket whose deadline is at or before `now`, into `out`.
    pub fn take_expired(&self, now: Instant, out: &mut Vec<(TcpStream, T)>) {
        let mut slots = self.slots.borrow_mut();
        while let Some(&Reverse((deadline, key, generation))) = slots.deadlines.peek() {
            if deadline > now {
                break;
            }
            slots.deadlines.pop();
            if let Some(p) = slots.take(key, generation) {
                out.push((p.stream, p.item));
            }
        }
        // Entries of sockets that came out by readiness: drop them once they outnumber the rest.
        if slots.deadlines.len() > 2 * slots.len + 1024 {
            let mut deadlines = std::mem::take(&mut slots.deadlines);
            deadlines
                .retain(|Reverse((_, k, g))| slots.entry(*k).is_some_and(|e| e.generation == *g && e.parked.is_some()));
            slots.deadlines = deadlines;
        }
    }

    /// Takes out every parked socket whose item matches `pred`, into `out`; they are no longer
    /// watched.
    pub fn take_where(&self, mut pred: impl FnMut(&T) -> bool, out: &mut Vec<(TcpStream, T)>) {
        let epoll = self.epoll.get().map(Epoll::fd);
        let mut slots = self.slots.borrow_mut();
        let keys: Vec<(u32, u32)> = slots
            .chunks
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, e)| e.parked.as_ref().is_some_and(|p| pred(&p.item)))
            .filter_map(|(k, e)| u32::try_from(k).ok().map(|k| (k, e.generation)))
            .collect();
        for (key, generation) in keys {
            if let Some(p) = slots.take(key, generation) {
                if let Some(fd) = epoll {
                    deregister(fd, p.stream.as_raw_fd());
                }
                out.push((p.stream, p.item));
            }
        }
    }

    /// Sockets parked now.
    pub fn len(&self) -> usize {
        self.slots.borrow().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn epoll(&self) -> io::Result<&Epoll> {
        if let Some(e) = self.epoll.get() {
            return Ok(e);
        }
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nothing else; the stream owns it now.
        let std = unsafe { std::net::TcpStream::from_raw_fd(fd) };
        let waiter = TcpStream::from_std(std)?;
        Ok(self.epoll.get_or_init(|| Epoll { waiter }))
    }
}

impl<T> Default for Parking<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl Epoll {
    fn fd(&self) -> RawFd {
        self.waiter.as_raw_fd()
    }
}

impl<T> Slots<T> {
    fn entry(&self, key: u32) -> Option<&Entry<T>> {
        let key = key as usize;
        self.chunks.get(key / CHUNK)?.get(key % CHUNK)
    }

    fn entry_mut(&mut self, key: u32) -> Option<&mut Entry<T>> {
        let key = key as usize;
        self.chunks.get_mut(key / CHUNK)?.get_mut(key % CHUNK)
    }

    /// A new empty slot's key; `None` past `u32::MAX` slots.
    fn grow(&mut self) -> Option<u32> {
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let full = (self.chunks.len() - 1) * CHUNK;
        let last = self.chunks.last_mut()?;
        let key = u32::try_from(full + last.len()).ok().filter(|k| *k < u32::MAX)?;
        last.push(Entry { generation: 0, parked: None });
        Some(key)
    }

    fn take(&mut self, key: u32, generation: u32) -> Option<Parked<T>> {
        let entry = self.entry_mut(key)?;
        if entry.generation != generation {
            return None;
        }
        let parked = entry.parked.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(key);
        self.len -= 1;
        Some(parked)
    }
}

/// On the epoll driver, monoio keeps the waker of the last task that waited for the socket's
/// readiness until the next event, even after that wait was dropped; the waker keeps the whole
/// (ended) task allocated for as long as the socket stays parked. A wait polled once with a
/// no-op waker takes its place. On io_uring a dropped wait keeps nothing (and a poll here
/// would submit an operation), so nothing is done.
fn release_waker(stream: &TcpStream) {
    if !monoio::utils::is_legacy() {
        return;
    }
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let wait = std::pin::pin!(stream.readable(true));
    let _ = std::future::Future::poll(wait, &mut cx);
}

fn token(key: u32, generation: u32) -> u64 {
    u64::from(generation) << 32 | u64::from(key)
}

/// Watches `fd` for one readiness event. A socket that was parked before and came out by
/// readiness is still registered (disabled, one-shot): it is re-armed.
fn register(epoll: RawFd, fd: RawFd, token: u64) -> io::Result<()> {
    let interest = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
    let mut event = libc::epoll_event { events: interest, u64: token };
    // SAFETY: valid descriptors and a valid event; the results are checked.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut event) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::EEXIST) {
        return Err(error);
    }
    // SAFETY: as above.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_MOD, fd, &mut event) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn deregister(epoll: RawFd, fd: RawFd) {
    let mut event = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: valid descriptors; a failure leaves a one-shot registration whose event is
    // ignored (its generation is gone).
    unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_DEL, fd, &mut event) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    fn each_driver(f: fn()) {
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        rt.block_on(async { f() });
        if let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer().build() {
            rt.block_on(async { f() });
        }
    }

    /// A connected pair: the client end (std, blocking) and the server end (monoio).
    fn pair(listener: &std::net::TcpListener) -> (std::net::TcpStream, TcpStream) {
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, TcpStream::from_std(server).unwrap())
    }

    #[test]
    fn sockets_come_out_once_by_readiness_deadline_or_choice() {
        each_driver(|| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let parking = Parking::new();
            let now = Instant::now();
            let later = now + Duration::from_secs(60);
            let (mut a, sa) = pair(&listener);
            let (_b, sb) = pair(&listener);
            let (_c, sc) = pair(&listener);
            assert!(parking.park(sa, later, "a").is_ok());
            assert!(parking.park(sb, now, "b").is_ok());
            assert!(parking.park(sc, later, "c").is_ok());
            assert_eq!(parking.len(), 3);
            let mut out = Vec::new();
            parking.take_ready(&mut out);
            assert!(out.is_empty(), "nothing was sent");
            a.write_all(b"x").unwrap();
            take_ready_soon(&parking, &mut out);
            assert_eq!(out.iter().map(|(_, i)| *i).collect::<Vec<_>>(), ["a"]);
            out.clear();
            parking.take_expired(now, &mut out);
            assert_eq!(out.iter().map(|(_, i)| *i).collect::<Vec<_>>(), ["b"]);
            out.clear();
            parking.take_where(|i| *i == "c", &mut out);
            assert_eq!(out.iter().map(|(_, i)| *i).collect::<Vec<_>>(), ["c"]);
            assert!(parking.is_empty());
            // Nothing comes out twice: not at its deadline, not by readiness.
            out.clear();
            parking.take_expired(later + Duration::from_secs(1), &mut out);
            parking.take_ready(&mut out);
            assert!(out.is_empty());
        });
    }

    /// Takes what became ready, looking for up to a second: a byte written on loopback is
    /// there at once, but the stack gets a moment.
    fn take_ready_soon<T>(parking: &Parking<T>, out: &mut Vec<(TcpStream, T)>) {
        for _ in 0..100 {
            parking.take_ready(out);
            if !out.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_socket_parked_again_after_readiness_is_rearmed() {
        each_driver(|| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let parking = Parking::new();
            let later = Instant::now() + Duration::from_secs(60);
            let (mut a, sa) = pair(&listener);
            assert!(parking.park(sa, later, 1).is_ok());
            let mut out = Vec::new();
            for round in 0..3 {
                a.write_all(b"x").unwrap();
                take_ready_soon(&parking, &mut out);
                assert_eq!(out.len(), 1, "round {round}");
                let (s, item) = out.pop().unwrap();
                // Still readable (the byte is unread): parked again, it is reported again.
                assert!(parking.park(s, later, item).is_ok(), "round {round}");
            }
            assert_eq!(parking.len(), 1);
        });
    }
}
