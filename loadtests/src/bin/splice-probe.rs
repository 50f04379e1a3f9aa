//! splice-probe: what moving a body between two loopback TCP sockets costs the thread that
//! moves it, copying (`recv` into a buffer, `send` from it) against splicing (socket -> pipe ->
//! socket), by body size. One thread plays all three parties in turn: the origin writes a body
//! into socket A, the measured part moves it from A's peer to socket B (timed with the thread's
//! CPU clock, which counts only this thread's time on the CPU), and the client drains B's peer.
//! No wake-ups are in it (nobody sleeps), so it isolates the per-call and per-byte costs that
//! `runtime/splice.rs` weighs when it chooses to splice.
//!
//!   splice-probe [--sizes 16384,65536,262144,1048576] [--iterations 20000] [--rounds 3]
//!
//! Prints, per size and round, the µs per body of each way.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Copy against splice between loopback sockets, CPU time per body (see the source)")]
struct Opts {
    /// Body sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16384,32768,65536,262144,1048576")]
    sizes: Vec<usize>,
    /// Bodies moved per size and way (after 500 unmeasured ones).
    #[arg(long, default_value_t = 20_000)]
    iterations: usize,
    /// Rounds, each measuring every size both ways in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// A connected loopback pair with 4 MiB socket buffers (so that one thread can write a whole
/// body before anyone reads it).
fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let a = TcpStream::connect(l.local_addr()?)?;
    let (b, _) = l.accept()?;
    for s in [&a, &b] {
        s.set_nodelay(true)?;
        let sock = socket2::SockRef::from(s);
        sock.set_recv_buffer_size(4 << 20)?;
        sock.set_send_buffer_size(4 << 20)?;
    }
    Ok((a, b))
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn check(n: isize, what: &str) -> io::Result<usize> {
    if n <= 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::other(format!("{what}: returned {n} ({e})")));
    }
    Ok(n as usize)
}

/// Moves `size` bytes from `from` to `to` through `buf` (receive, then send what came).
fn copy(from: RawFd, to: RawFd, buf: &mut [u8], size: usize) -> io::Result<()> {
    let mut left = size;
    while left > 0 {
        let want = buf.len().min(left);
        // SAFETY: receiving into the live buffer `buf`, at most its length.
        let n = check(unsafe { libc::recv(from, buf.as_mut_ptr().cast(), want, 0) }, "recv")?;
        let mut sent = 0;
        while sent < n {
            let part = buf.get(sent..n).unwrap_or_default();
            // SAFETY: sending from the live slice `part`.
            sent += check(unsafe { libc::send(to, part.as_ptr().cast(), part.len(), 0) }, "send")?;
        }
        left -= n;
    }
    Ok(())
}

/// Moves `size` bytes from `from` to `to` through the pipe (`pipe_r`, `pipe_w`).
fn splice(from: RawFd, to: RawFd, pipe_r: RawFd, pipe_w: RawFd, size: usize) -> io::Result<()> {
    let null = std::ptr::null_mut();
    let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
    let mut left = size;
    while left > 0 {
        // SAFETY: splicing between open descriptors without offsets.
        let n = check(unsafe { libc::splice(from, null, pipe_w, null, left, flags) }, "splice in")?;
        let mut out = n;
        while out > 0 {
            // SAFETY: as above.
            out -= check(unsafe { libc::splice(pipe_r, null, to, null, out, flags) }, "splice out")?;
        }
        left -= n;
    }
    Ok(())
}

fn measure(size: usize, spliced: bool, iterations: usize) -> io::Result<f64> {
    let (mut origin, up) = pair()?;
    let (down, mut client) = pair()?;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [pipe_r, pipe_w] = fds;
    let body = vec![b'x'; size];
    let mut buf = vec![0u8; 64 * 1024];
    let mut sink = vec![0u8; 1 << 20];
    let warmup = 500;
    let mut total = 0u64;
    for i in 0..warmup + iterations {
        origin.write_all(&body)?;
        let t0 = thread_cpu_ns();
        if spliced {
            splice(up.as_raw_fd(), down.as_raw_fd(), pipe_r, pipe_w, size)?;
        } else {
            copy(up.as_raw_fd(), down.as_raw_fd(), &mut buf, size)?;
        }
        let t1 = thread_cpu_ns();
        if i >= warmup {
            total += t1 - t0;
        }
        let mut got = 0;
        while got < size {
            got += client.read(&mut sink)?;
        }
    }
    // SAFETY: closing the pipe's two descriptors, made above and used no more.
    unsafe {
        libc::close(pipe_r);
        libc::close(pipe_w);
    }
    Ok(total as f64 / iterations as f64 / 1000.0)
}

fn main() {
    let opts = Opts::parse();
    println!("| round | body bytes | copy µs | splice µs | splice / copy |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for round in 1..=opts.rounds {
        for &size in &opts.sizes {
            let run = || -> io::Result<(f64, f64)> {
                Ok((measure(size, false, opts.iterations)?, measure(size, true, opts.iterations)?))
            };
            match run() {
                Ok((c, s)) => println!("| {round} | {size} | {c:.2} | {s:.2} | {:.2} |", s / c),
                Err(e) => {
                    eprintln!("splice-probe: {size} bytes: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}
