//! ring-probe: what owning the io_uring ring would buy a proxy, measured without the gateway.
//!
//! A one-thread HTTP/1.1 keep-alive relay on a ring of its own (`io-uring` directly, with the
//! gateway's ring flags: `SINGLE_ISSUER | DEFER_TASKRUN`): each accepted client connection gets
//! its own upstream connection; a request head (no body) read from the client is sent upstream
//! as it came, and the upstream's answer (a head with `Content-Length`) goes back as it came. It
//! does none of the gateway's work (no routing, no admission, no rewriting): it is the floor of
//! the ring's part of a proxied request, and the levers that monoio 0.2.4 keeps out of the
//! gateway's reach can be switched on one at a time:
//!
//! - `--poll-first`: receives that cannot find data yet (the answer right after the request
//!   went up, the next request right after an answer went down) arm the socket's poll at once
//!   (`IORING_RECVSEND_POLL_FIRST`) instead of trying a receive that fails first;
//! - `--fixed-files`: every socket in the ring's file table, so that no operation looks its
//!   file up and takes a reference to it (`IOSQE_FIXED_FILE`);
//! - `--multishot`: one receive per socket for its life, into buffers the kernel picks from a
//!   ring of provided buffers (`IORING_OP_RECV` multishot), and whatever arrived whole is sent
//!   on from that buffer;
//! - `--skip-send-cqe`: a send that succeeds posts no completion (`IOSQE_CQE_SKIP_SUCCESS`),
//!   and the receive that follows it goes in with it (not with `--multishot`, whose buffers go
//!   back when their send completes);
//! - `--wait N --wait-us T`: each wait returns after N completions or T microseconds, whichever
//!   comes first, instead of after one;
//! - `--head-read N`: an answer's first receive asks for at most N bytes (its head and the
//!   start of its body), the rest comes in further receives;
//! - `--splice` (with `--head-read`): the rest of a `Content-Length` body that the first
//!   receive left in the upstream socket goes to the client without passing through user
//!   space: the part already read is written into a pipe of the connection's, the rest is
//!   spliced from the upstream socket into the pipe and the pipe into the client socket
//!   (`splice(2)`, non-blocking, called directly: io_uring's splice always runs in a worker
//!   thread of the kernel's, `io_splice` refusing the non-blocking attempt), a pipeful at a
//!   time.
//!
//! Run by `loadtests/bench/ring-probe.sh`, which compares the variants' CPU per request with the
//! gateway's on the same origin and load. Not a proxy to deploy: it trusts its origin and its
//! clients (bodies, chunked answers and pipelined requests are not relayed).

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use clap::Parser;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

#[derive(Parser, Debug, Clone)]
#[command(about = "A one-thread io_uring relay for measuring ring levers (see the source)")]
struct Opts {
    /// Address to accept clients on.
    #[arg(long)]
    listen: SocketAddr,
    /// The origin every client connection is relayed to.
    #[arg(long)]
    upstream: SocketAddr,
    /// Receives that will find no data yet arm the socket's poll first.
    #[arg(long)]
    poll_first: bool,
    /// Sockets in the ring's file table.
    #[arg(long)]
    fixed_files: bool,
    /// One multishot receive per socket, into provided buffers.
    #[arg(long)]
    multishot: bool,
    /// Successful sends post no completion; the receive after a send goes in with it.
    #[arg(long)]
    skip_send_cqe: bool,
    /// Completions each wait waits for (with --wait-us as its limit).
    #[arg(long, default_value_t = 1)]
    wait: u32,
    /// The longest a wait for more than one completion waits, in microseconds.
    #[arg(long, default_value_t = 50)]
    wait_us: u64,
    /// An answer's first receive asks for at most this many bytes (0: the whole buffer).
    #[arg(long, default_value_t = 0)]
    head_read: usize,
    /// The rest of a body the first receive left in the socket is spliced through a pipe.
    #[arg(long, requires = "head_read")]
    splice: bool,
}

const ACCEPT: u64 = 1;
const C_RECV: u64 = 2;
const U_SEND: u64 = 3;
const U_RECV: u64 = 4;
const C_SEND: u64 = 5;
/// The upstream socket became readable (the rest of a spliced body).
const U_POLL: u64 = 6;
/// The client socket became writable (a spliced answer's rest).
const C_POLL: u64 = 7;

/// Each plain buffer (a client's request, an upstream's answer).
const BUF: usize = 32 * 1024;
/// Provided buffers (`--multishot`): how many, and each one's size.
const PROVIDED: u16 = 1024;
const PROVIDED_LEN: usize = 16 * 1024;
/// The buffer group of the provided buffers.
const GROUP: u16 = 0;
/// Slots of the ring's file table (`--fixed-files`) at most: a socket's slot is its
/// descriptor, so there are as many as the process may open (raised to its hard limit).
const FILE_SLOTS: u32 = 65_536;

/// Raises the descriptor limit to its hard limit; returns the limit.
fn raise_fd_limit() -> io::Result<u32> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setting the soft limit to the hard one, which an unprivileged process may do.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u32::try_from(lim.rlim_cur).unwrap_or(FILE_SLOTS).min(FILE_SLOTS))
}

fn data(conn: u64, kind: u64, bid: Option<u16>) -> u64 {
    (conn << 24) | (bid.map_or(0, |b| u64::from(b) + 1) << 8) | kind
}

fn split(user_data: u64) -> (u64, u64, Option<u16>) {
    let bid = ((user_data >> 8) & 0xffff) as u16;
    (user_data >> 24, user_data & 0xff, bid.checked_sub(1))
}

/// One client connection and its upstream connection.
struct Conn {
    client: TcpStream,
    upstream: TcpStream,
    /// The request read so far (a head split over several receives).
    req: Vec<u8>,
    /// The answer read so far, and its whole length once its head is parsed.
    resp: Vec<u8>,
    resp_len: Option<usize>,
    /// `--splice`: the connection's pipe (read end, write end), made on first use.
    pipe: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// A spliced answer under way: bytes still in the upstream socket, bytes in the pipe.
    spliced: Option<(usize, usize)>,
}

/// The ring of provided buffers (`--multishot`).
struct Provided {
    entries: *mut types::BufRingEntry,
    pool: Vec<u8>,
    tail: u16,
}

impl Provided {
    fn new(ring: &IoUring) -> io::Result<Self> {
        let bytes = usize::from(PROVIDED) * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping of `bytes` bytes, page aligned as the kernel
        // requires of a buffer ring; it lives as long as the process (the probe never frees it).
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let entries = addr.cast::<types::BufRingEntry>();
        // SAFETY: `entries` is the mapping above, of PROVIDED entries, kept for the ring's life.
        unsafe { ring.submitter().register_buf_ring(addr as u64, PROVIDED, GROUP)? };
        let mut this = Self { entries, pool: vec![0; usize::from(PROVIDED) * PROVIDED_LEN], tail: 0 };
        for bid in 0..PROVIDED {
            this.put(bid);
        }
        this.publish();
        Ok(this)
    }

    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let start = usize::from(bid) * PROVIDED_LEN;
        self.pool.get(start..start + len.min(PROVIDED_LEN)).unwrap_or_default()
    }

    fn ptr(&self, bid: u16) -> *const u8 {
        self.pool.as_ptr().wrapping_add(usize::from(bid) * PROVIDED_LEN)
    }

    /// Hands buffer `bid` back to the kernel (seen once `publish` moves the tail).
    fn put(&mut self, bid: u16) {
        let index = usize::from(self.tail & (PROVIDED - 1));
        // SAFETY: `index` < PROVIDED, inside the mapping; the kernel reads only entries before
        // the published tail, and this one is after it.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(self.ptr(bid) as u64);
        entry.set_len(PROVIDED_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field of the ring's first entry, which the kernel reads.
        let tail = unsafe { types::BufRingEntry::tail(self.entries) } as *const std::sync::atomic::AtomicU16;
        // SAFETY: the tail is a u16 the kernel only reads; a release store publishes the
        // entries written before it.
        unsafe { &*tail }.store(self.tail, std::sync::atomic::Ordering::Release);
    }
}

struct Probe {
    opts: Opts,
    ring: IoUring,
    listener: TcpListener,
    conns: HashMap<u64, Conn>,
    next_id: u64,
    provided: Option<Provided>,
    /// Buffers to hand back once this round's completions are handled.
    returned: Vec<u16>,
}

/// `IORING_RECVSEND_POLL_FIRST` (in the entry's `ioprio`, bytes 2-3 of the SQE).
fn poll_first(entry: squeue::Entry) -> squeue::Entry {
    let mut raw: [u8; 64] = entry_bytes(entry);
    if let Some(ioprio) = raw.get_mut(2..4) {
        ioprio.copy_from_slice(&1u16.to_ne_bytes());
    }
    // SAFETY: the same 64 bytes, an SQE with one more flag in its ioprio field.
    unsafe { std::mem::transmute::<[u8; 64], squeue::Entry>(raw) }
}

fn entry_bytes(entry: squeue::Entry) -> [u8; 64] {
    // SAFETY: `squeue::Entry` is `repr(C)` around the kernel's 64-byte SQE.
    unsafe { std::mem::transmute::<squeue::Entry, [u8; 64]>(entry) }
}

impl Probe {
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer an entry points at lives in a `Conn` (or the provided pool)
            // that is kept until the operation's completion, or the probe's end.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn fd(&self, fd: RawFd) -> Fd {
        if self.opts.fixed_files {
            Fd::Fixed(types::Fixed(fd as u32))
        } else {
            Fd::Plain(types::Fd(fd))
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        let entry =
            opcode::Accept::new(types::Fd(self.listener.as_raw_fd()), std::ptr::null_mut(), std::ptr::null_mut())
                .build()
                .user_data(data(0, ACCEPT, None));
        self.push(entry)
    }

    /// A receive into the connection's own buffer (`client`: the request, else the answer).
    fn recv(&mut self, id: u64, client: bool, first: bool) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(&id) else { return Ok(()) };
        let (sock, buf, kind) = if client {
            (c.client.as_raw_fd(), &mut c.req, C_RECV)
        } else {
            (c.upstream.as_raw_fd(), &mut c.resp, U_RECV)
        };
        let filled = buf.len();
        // Room for a whole buffer, and for more when an answer is larger than one.
        buf.reserve(BUF.saturating_sub(filled).max(BUF / 2));
        let mut spare = buf.capacity() - filled;
        if !client && filled == 0 && self.opts.head_read > 0 {
            spare = spare.min(self.opts.head_read);
        }
        let ptr = buf.as_mut_ptr().wrapping_add(filled);
        let entry = match self.fd(sock) {
            Fd::Fixed(f) => opcode::Recv::new(f, ptr, spare as u32).build(),
            Fd::Plain(f) => opcode::Recv::new(f, ptr, spare as u32).build(),
        }
        .user_data(data(id, kind, None));
        let entry = if self.opts.poll_first && !first && filled == 0 { poll_first(entry) } else { entry };
        self.push(entry)
    }

    /// The multishot receive of one socket.
    fn recv_multi(&mut self, id: u64, client: bool) -> io::Result<()> {
        let Some(c) = self.conns.get(&id) else { return Ok(()) };
        let (sock, kind) = if client { (c.client.as_raw_fd(), C_RECV) } else { (c.upstream.as_raw_fd(), U_RECV) };
        let entry = match self.fd(sock) {
            Fd::Fixed(f) => opcode::RecvMulti::new(f, GROUP).build(),
            Fd::Plain(f) => opcode::RecvMulti::new(f, GROUP).build(),
        }
        .flags(squeue::Flags::BUFFER_SELECT)
        .user_data(data(id, kind, None));
        self.push(entry)
    }

    /// Sends `len` bytes at `ptr` to the upstream (`up`) or the client; `bid`: the provided
    /// buffer they are in, handed back on completion.
    fn send(&mut self, id: u64, up: bool, ptr: *const u8, len: usize, bid: Option<u16>) -> io::Result<()> {
        let Some(c) = self.conns.get(&id) else { return Ok(()) };
        let sock = if up { c.upstream.as_raw_fd() } else { c.client.as_raw_fd() };
        let kind = if up { U_SEND } else { C_SEND };
        let entry = match self.fd(sock) {
            Fd::Fixed(f) => opcode::Send::new(f, ptr, len as u32).build(),
            Fd::Plain(f) => opcode::Send::new(f, ptr, len as u32).build(),
        }
        .user_data(data(id, kind, bid));
        let skip = self.opts.skip_send_cqe && !self.opts.multishot;
        let entry = if skip { entry.flags(squeue::Flags::SKIP_SUCCESS) } else { entry };
        self.push(entry)?;
        if skip {
            // The receive that the completion would have started goes in now.
            self.recv(id, !up, false)?;
        }
        Ok(())
    }

    fn close(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            for s in [&c.client, &c.upstream] {
                // SAFETY: shutting down a socket this connection owns; pending receives on it
                // complete (and are ignored, the connection being gone).
                unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR) };
            }
        }
    }

    fn accepted(&mut self, fd: i32) -> io::Result<()> {
        self.accept()?;
        if fd < 0 {
            return Ok(());
        }
        // SAFETY: `fd` is the descriptor the accept completed with, owned from here on.
        let client = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let upstream = TcpStream::connect(self.opts.upstream)?;
        for s in [&client, &upstream] {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            if self.opts.fixed_files {
                self.ring.submitter().register_files_update(s.as_raw_fd() as u32, &[s.as_raw_fd()])?;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.conns.insert(
            id,
            Conn {
                client,
                upstream,
                req: Vec::with_capacity(BUF),
                resp: Vec::with_capacity(BUF),
                resp_len: None,
                pipe: None,
                spliced: None,
            },
        );
        if self.opts.multishot {
            self.recv_multi(id, true)?;
            self.recv_multi(id, false)
        } else {
            self.recv(id, true, true)
        }
    }

    /// Bytes received on a connection: from the client (`client`) or its upstream, in the
    /// connection's own buffer (already appended) or in provided buffer `bid`. Relays what is
    /// whole.
    fn received(&mut self, id: u64, client: bool, n: usize, bid: Option<u16>) -> io::Result<()> {
        let Some(provided) = bid else {
            return self.relay_own(id, client);
        };
        let Some(c) = self.conns.get_mut(&id) else {
            self.returned.push(provided);
            return Ok(());
        };
        let Some(pool) = self.provided.as_ref() else { return Ok(()) };
        let bytes = pool.buf(provided, n);
        let pending = if client { &mut c.req } else { &mut c.resp };
        if pending.is_empty() && whole(bytes, client) == Some(n) {
            // Whole in one buffer: sent on from it, and the buffer goes back when sent.
            let ptr = pool.ptr(provided);
            return self.send(id, client, ptr, n, Some(provided));
        }
        pending.extend_from_slice(bytes);
        self.returned.push(provided);
        self.relay_own(id, client)
    }

    /// Relays the request (`client`) or the answer kept in the connection, if it is whole.
    fn relay_own(&mut self, id: u64, client: bool) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(&id) else { return Ok(()) };
        let pending = if client { &mut c.req } else { &mut c.resp };
        match whole(pending, client) {
            Some(len) => {
                // The buffer is emptied for the next message only when this send completes
                // (`sent`); with `--skip-send-cqe` the next receive starts at its start, which is
                // safe because the next message comes only after this one was answered.
                let ptr = pending.as_ptr();
                if !client {
                    c.resp_len = None;
                }
                if self.opts.skip_send_cqe && !self.opts.multishot {
                    pending.clear();
                }
                self.send(id, client, ptr, len, None)
            }
            None if self.opts.multishot => Ok(()),
            None if !client && self.opts.splice => match missing(pending) {
                Some(rest) if rest > 0 => self.splice_start(id, rest),
                _ => self.recv(id, client, false),
            },
            None => self.recv(id, client, false),
        }
    }

    /// `--splice`: the answer read so far goes into the connection's pipe, and the `rest` of
    /// its body (still in the upstream socket) after it; then the pipe goes to the client.
    fn splice_start(&mut self, id: u64, rest: usize) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(&id) else { return Ok(()) };
        if c.pipe.is_none() {
            c.pipe = Some(pipe()?);
        }
        let Some((_, w)) = c.pipe.as_ref() else { return Ok(()) };
        let mut off = 0;
        while off < c.resp.len() {
            let part = c.resp.get(off..).unwrap_or_default();
            // SAFETY: writing from a live slice to a pipe this connection owns.
            let n = unsafe { libc::write(w.as_raw_fd(), part.as_ptr().cast(), part.len()) };
            if n <= 0 {
                self.close(id);
                return Ok(());
            }
            off += n as usize;
        }
        c.spliced = Some((rest, c.resp.len()));
        c.resp.clear();
        self.splice_more(id)
    }

    /// Moves what it can: upstream socket -> pipe, pipe -> client socket; waits (a poll on the
    /// ring) where a socket has nothing to give or no room.
    fn splice_more(&mut self, id: u64) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(&id) else { return Ok(()) };
        let (Some((r, w)), Some((mut rest, mut in_pipe))) = (c.pipe.as_ref(), c.spliced) else { return Ok(()) };
        while rest > 0 {
            match splice_step(c.upstream.as_raw_fd(), w.as_raw_fd(), rest) {
                Some(Ok(n)) => {
                    rest -= n;
                    in_pipe += n;
                }
                Some(Err(())) => {
                    self.close(id);
                    return Ok(());
                }
                None => break,
            }
        }
        while in_pipe > 0 {
            match splice_step(r.as_raw_fd(), c.client.as_raw_fd(), in_pipe) {
                Some(Ok(n)) => in_pipe -= n,
                Some(Err(())) => {
                    self.close(id);
                    return Ok(());
                }
                None => break,
            }
        }
        c.spliced = Some((rest, in_pipe));
        let wait = if in_pipe > 0 {
            Some((c.client.as_raw_fd(), libc::POLLOUT, C_POLL))
        } else if rest > 0 {
            Some((c.upstream.as_raw_fd(), libc::POLLIN, U_POLL))
        } else {
            None
        };
        match wait {
            Some((fd, events, kind)) => {
                let entry = opcode::PollAdd::new(types::Fd(fd), events as u32).build().user_data(data(id, kind, None));
                self.push(entry)
            }
            None => {
                c.spliced = None;
                self.recv(id, true, false)
            }
        }
    }

    fn sent(&mut self, id: u64, up: bool, res: i32, bid: Option<u16>) -> io::Result<()> {
        if let Some(b) = bid {
            self.returned.push(b);
        }
        if res < 0 {
            self.close(id);
            return Ok(());
        }
        if let Some(c) = self.conns.get_mut(&id) {
            if up {
                c.req.clear()
            } else {
                c.resp.clear()
            }
        }
        if self.opts.multishot {
            Ok(())
        } else {
            self.recv(id, !up, false)
        }
    }

    fn complete(&mut self, cqe: &cqueue::Entry) -> io::Result<()> {
        let (id, kind, bid) = split(cqe.user_data());
        let res = cqe.result();
        match kind {
            ACCEPT => self.accepted(res),
            C_RECV | U_RECV => {
                let client = kind == C_RECV;
                let provided = cqueue::buffer_select(cqe.flags());
                if res <= 0 {
                    if let Some(b) = provided {
                        self.returned.push(b);
                    }
                    if res == -libc::ENOBUFS && self.conns.contains_key(&id) {
                        return self.recv_multi(id, client);
                    }
                    self.close(id);
                    return Ok(());
                }
                if self.opts.multishot && !cqueue::more(cqe.flags()) {
                    self.recv_multi(id, client)?;
                }
                if provided.is_none() {
                    if let Some(c) = self.conns.get_mut(&id) {
                        let buf = if client { &mut c.req } else { &mut c.resp };
                        // SAFETY: the kernel wrote `res` bytes after the buffer's length.
                        unsafe { buf.set_len(buf.len() + res as usize) };
                    }
                }
                self.received(id, client, res as usize, provided)
            }
            U_SEND | C_SEND => self.sent(id, kind == U_SEND, res, bid),
            U_POLL | C_POLL => self.splice_more(id),
            _ => Ok(()),
        }
    }

    fn run(&mut self) -> io::Result<()> {
        self.accept()?;
        let timeout = types::Timespec::from(Duration::from_micros(self.opts.wait_us));
        let mut batch = Vec::with_capacity(256);
        loop {
            if self.opts.wait > 1 {
                let args = types::SubmitArgs::new().timespec(&timeout);
                match self.ring.submitter().submit_with_args(self.opts.wait as usize, &args) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) || e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                }
            } else {
                match self.ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
            batch.clear();
            batch.extend(self.ring.completion());
            for cqe in &batch {
                self.complete(cqe)?;
            }
            if !self.returned.is_empty() {
                if let Some(p) = self.provided.as_mut() {
                    for b in self.returned.drain(..) {
                        p.put(b);
                    }
                    p.publish();
                }
            }
        }
    }
}

enum Fd {
    Plain(types::Fd),
    Fixed(types::Fixed),
}

/// The length of the message at the start of `buf` if it is all there: a request head (no
/// body), or an answer whose head gives its `Content-Length`.
fn whole(buf: &[u8], request: bool) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if request {
        return Some(end);
    }
    let len = content_length(buf)?;
    (buf.len() >= end + len).then_some(end + len)
}

/// One non-blocking splice of at most `len` bytes: `Some(Ok(n))` moved n bytes, `None` would
/// block, `Some(Err(()))` the end of the source or an error (the connection is closed).
fn splice_step(from: RawFd, to: RawFd, len: usize) -> Option<Result<usize, ()>> {
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
    // SAFETY: splicing between descriptors a connection owns; null offsets (sockets and pipes
    // have none).
    let n = unsafe { libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, flags) };
    if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        return None;
    }
    Some(if n > 0 { Ok(n as usize) } else { Err(()) })
}

/// Bytes of the body still to come after what `buf` holds of an answer, once its head is whole.
fn missing(buf: &[u8]) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let len = content_length(buf)?;
    (end + len).checked_sub(buf.len())
}

/// The `Content-Length` of the answer head at the start of `buf`.
fn content_length(buf: &[u8]) -> Option<usize> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut fields);
    resp.parse(buf).ok()?;
    resp.headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
}

/// A non-blocking pipe: (read end, write end).
fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned from here on.
    Ok(unsafe {
        (
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[0]),
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]),
        )
    })
}

fn main() {
    let opts = Opts::parse();
    if let Err(e) = start(opts) {
        eprintln!("ring-probe: {e}");
        std::process::exit(1);
    }
}

fn start(opts: Opts) -> io::Result<()> {
    let ring = IoUring::builder().setup_single_issuer().setup_defer_taskrun().build(4096)?;
    let slots = raise_fd_limit()?;
    if opts.fixed_files {
        ring.submitter().register_files_sparse(slots)?;
    }
    let provided = if opts.multishot { Some(Provided::new(&ring)?) } else { None };
    let listener = TcpListener::bind(opts.listen)?;
    // The first line tells where it listens (a port of 0 picks one): tests read it.
    eprintln!("ring-probe: listening on {} ({opts:?})", listener.local_addr()?);
    let mut probe = Probe { opts, ring, listener, conns: HashMap::new(), next_id: 1, provided, returned: Vec::new() };
    probe.run()
}
