//! TLS on the completion-based driver: rustls fed from io_uring reads and written through
//! io_uring sends, for HTTP/1.1 connections after their handshake (from clients, and to
//! upstreams).
//!
//! The handshake runs through tokio-rustls over monoio's poll-mode socket, as on the epoll
//! driver. On io_uring that mode costs, per request: a share of an `epoll_wait` (monoio keeps
//! its poll-mode sockets in an epoll instance whose descriptor it polls through the ring), a
//! `recvfrom` that returns the request and a second one that returns `EAGAIN` (tokio-rustls
//! reads until the socket would block, and monoio's readiness is edge-triggered: only `EAGAIN`
//! clears it), then a `writev`. Here the connection goes back to completion mode once the
//! handshake is done: an idle connection waits on a poll of its own socket (no buffer held, as
//! a plain connection does), then the request's bytes come in one `recv` into the caller's
//! buffer, and a response leaves in one `send`; both are submitted to the ring, in batches.
//!
//! A WebSocket tunnel needs reads and writes at once, so [`UringTls::into_poll`] hands the
//! session over to [`PollTls`], a poll-mode stream (tokio's `AsyncRead`/`AsyncWrite`) on the
//! same socket switched back to poll mode. HTTP/2 keeps tokio-rustls (the h2 crate is
//! poll-based); so does everything on the epoll driver, where this would save nothing.

use std::io::{self, BufRead, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use monoio::buf::SliceMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt, IntoPollIo};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use rustls::Connection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Decrypted bytes rustls may hold before it refuses further ciphertext (its own limit, checked
/// before each `read_tls`, is 16 KiB): ciphertext read beyond that waits in `pending`.
const PLAINTEXT_HELD: usize = 16 * 1024;

/// A TLS connection on the completion-based driver, after its handshake.
pub struct UringTls {
    tcp: TcpStream,
    session: Connection,
    /// Ciphertext read from the socket that rustls did not take yet (it held
    /// [`PLAINTEXT_HELD`] of plaintext): fed to it before the socket is read again.
    pending: Vec<u8>,
}

impl UringTls {
    /// Takes over a connection whose handshake is complete. `tcp` must be in completion mode.
    pub fn new(tcp: TcpStream, session: Connection) -> Self {
        UringTls { tcp, session, pending: Vec::new() }
    }

    /// Whether a read returns without waiting for the socket: plaintext (or the peer's
    /// close_notify) is buffered, or ciphertext not fed yet.
    pub fn buffered(&self) -> bool {
        !self.pending.is_empty() || !self.session.wants_read()
    }

    /// Waits until a read has something to return (buffered bytes, or the socket readable),
    /// without holding a buffer.
    pub async fn readable(&mut self, relaxed: bool) -> io::Result<()> {
        if self.buffered() {
            return Ok(());
        }
        self.tcp.readable(relaxed).await
    }

    /// Reads plaintext into the spare capacity of `buf` (appending). `Ok(0)` is the peer's
    /// close_notify; a TCP end without one is `UnexpectedEof` (as tokio-rustls reports it).
    /// The ciphertext is received into that same spare capacity and copied into rustls.
    pub async fn read_append(&mut self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let len = buf.len();
        let cap = buf.capacity();
        if len == cap {
            return (Err(io::Error::other("read buffer full")), buf);
        }
        loop {
            if let Some(res) = take_plaintext(&mut self.session, &mut buf) {
                return (res, buf);
            }
            if !self.pending.is_empty() {
                let pending = std::mem::take(&mut self.pending);
                let fed = feed(&mut self.session, &pending);
                self.pending = pending;
                match fed {
                    Ok(n) => {
                        self.pending.drain(..n);
                        continue;
                    }
                    Err(e) => return (Err(self.failed(e).await), buf),
                }
            }
            let (res, slice) = self.tcp.read(SliceMut::new(buf, len, cap)).await;
            buf = slice.into_inner();
            let n = match res {
                Ok(n) => n,
                Err(e) => return (Err(e), buf),
            };
            let taken = match buf.get(len..len + n) {
                Some(ciphertext) if n > 0 => self.received(ciphertext).await,
                // The peer's end of stream: rustls then reports a close_notify seen (`Ok(0)`)
                // or a truncation.
                _ => match self.session.read_tls(&mut io::empty()) {
                    Ok(_) => Ok(()),
                    Err(e) => Err(self.failed(e).await),
                },
            };
            buf.truncate(len);
            if let Err(e) = taken {
                return (Err(e), buf);
            }
        }
    }

    /// The socket, for a receive made outside [`UringTls::read_append`] (a connection that waits
    /// for its next request in a receive); what it brings goes to [`UringTls::received`].
    pub fn tcp_mut(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// Takes received ciphertext (by [`UringTls::read_append`], or by a receive made outside it):
    /// rustls decrypts what it may hold, the rest waits in `pending` (after anything already
    /// there), and records rustls answers by itself (a key update's) are sent. A record that
    /// fails is `InvalidData`, its alert sent.
    pub async fn received(&mut self, ciphertext: &[u8]) -> io::Result<()> {
        if self.pending.is_empty() {
            match feed(&mut self.session, ciphertext) {
                Ok(used) => self.pending.extend_from_slice(ciphertext.get(used..).unwrap_or_default()),
                Err(e) => return Err(self.failed(e).await),
            }
        } else {
            self.pending.extend_from_slice(ciphertext);
        }
        if self.session.wants_write() {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends the alert rustls queued for a failure (at most one try), and returns the error.
    async fn failed(&mut self, e: io::Error) -> io::Error {
        let _ = self.flush().await;
        e
    }

    /// Encrypts and sends `data` completely.
    pub async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        loop {
            let n = self.session.writer().write(data)?;
            data = data.get(n..).unwrap_or_default();
            let held = self.session.wants_write();
            self.flush().await?;
            if data.is_empty() {
                return Ok(());
            }
            if n == 0 && !held {
                // Refused with nothing of its own to send: rustls would never take it.
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
    }

    /// Sends every record rustls holds, in one send.
    async fn flush(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            let mut out = Vec::new();
            self.session.write_tls(&mut out)?;
            let (res, _) = self.tcp.write_all(out).await;
            res?;
        }
        Ok(())
    }

    /// Sends close_notify, then half-closes the socket.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.session.send_close_notify();
        self.flush().await?;
        monoio::io::AsyncWriteRent::shutdown(&mut self.tcp).await
    }

    /// Parts the connection into its socket and its session, to park it idle (the socket
    /// waits in the worker's parking set, the session beside it). Refused (the connection
    /// back) when a read would return at once: plaintext or ciphertext is held, or rustls has
    /// records to send.
    pub fn park(self: Box<Self>) -> Result<(TcpStream, ParkedTls), Box<Self>> {
        if self.buffered() || self.session.wants_write() {
            return Err(self);
        }
        // `pending` is empty here (else `buffered`): it is not kept.
        let UringTls { tcp, session, .. } = *self;
        Ok((tcp, ParkedTls { session }))
    }

    /// A parked connection, whole again.
    pub fn unpark(tcp: TcpStream, parked: ParkedTls) -> Self {
        UringTls::new(tcp, parked.session)
    }

    /// The connection in poll mode, for code that reads and writes it at once (a tunnel).
    pub fn into_poll(self) -> io::Result<PollTls> {
        let UringTls { tcp, session, pending } = self;
        let io = tcp.into_poll_io()?;
        Ok(PollTls { io, session, pending, closing: false })
    }
}

/// The session of a parked TLS connection ([`UringTls::park`]), without its socket.
pub struct ParkedTls {
    session: Connection,
}

/// Copies the plaintext rustls holds into the spare capacity of `buf`: `None` when it holds
/// none and the connection goes on (more ciphertext is needed).
fn take_plaintext(session: &mut Connection, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
    let start = buf.len();
    let mut reader = session.reader();
    loop {
        let room = buf.capacity() - buf.len();
        if room == 0 {
            return Some(Ok(buf.len() - start));
        }
        match reader.fill_buf() {
            Ok([]) => return Some(Ok(buf.len() - start)),
            Ok(chunk) => {
                let take = chunk.len().min(room);
                buf.extend_from_slice(chunk.get(..take).unwrap_or_default());
                reader.consume(take);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return (buf.len() > start).then(|| Ok(buf.len() - start));
            }
            // Bytes read before a truncation are returned first; the error comes next time.
            Err(_) if buf.len() > start => return Some(Ok(buf.len() - start)),
            Err(e) => return Some(Err(e)),
        }
    }
}

/// Gives rustls the ciphertext in `data` and decrypts it, until it holds [`PLAINTEXT_HELD`] of
/// plaintext; returns how much of `data` it took. A record that fails is `InvalidData` (rustls
/// then has an alert queued).
fn feed(session: &mut Connection, data: &[u8]) -> io::Result<usize> {
    let mut rest = data;
    let mut held = 0;
    while !rest.is_empty() && held <= PLAINTEXT_HELD {
        // Ok(0): a close_notify was received; what follows it is ignored.
        if session.read_tls(&mut rest)? == 0 {
            return Ok(data.len());
        }
        let state = session.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        held = state.plaintext_bytes_to_read();
    }
    Ok(data.len() - rest.len())
}

/// A TLS connection in poll mode, taken over from [`UringTls`] (a tunnel).
pub struct PollTls {
    io: TcpStreamPoll,
    session: Connection,
    /// As [`UringTls::pending`]: fed before the socket is read.
    pending: Vec<u8>,
    /// close_notify was queued.
    closing: bool,
}

/// The socket as `std::io` for rustls, inside a poll: not ready is `WouldBlock`, and the task
/// is woken when it is.
struct SyncIo<'a, 'b> {
    io: &'a mut TcpStreamPoll,
    cx: &'a mut Context<'b>,
}

impl Read for SyncIo<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for SyncIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PollTls {
    /// Sends what rustls holds; `Pending` until all of it is gone.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut SyncIo { io: &mut self.io, cx }) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// A failed record: one try at sending rustls' alert, then the error.
    fn failed(&mut self, cx: &mut Context<'_>, e: rustls::Error) -> io::Error {
        let _ = self.poll_send(cx);
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

impl AsyncRead for PollTls {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            {
                let mut reader = me.session.reader();
                match reader.fill_buf() {
                    Ok(chunk) => {
                        // Empty: the peer's close_notify (end of stream).
                        let take = chunk.len().min(buf.remaining());
                        buf.put_slice(chunk.get(..take).unwrap_or_default());
                        reader.consume(take);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            if !me.pending.is_empty() {
                match feed(&mut me.session, &me.pending) {
                    Ok(n) => {
                        me.pending.drain(..n);
                        continue;
                    }
                    Err(e) => {
                        let _ = me.poll_send(cx);
                        return Poll::Ready(Err(e));
                    }
                }
            }
            match me.session.read_tls(&mut SyncIo { io: &mut me.io, cx }) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
            if let Err(e) = me.session.process_new_packets() {
                return Poll::Ready(Err(me.failed(cx, e)));
            }
        }
    }
}

impl AsyncWrite for PollTls {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        loop {
            let n = me.session.writer().write(buf)?;
            if n > 0 || buf.is_empty() {
                // Sent as far as the socket takes it now; the rest by the next write or flush.
                if let Poll::Ready(Err(e)) = me.poll_send(cx) {
                    return Poll::Ready(Err(e));
                }
                return Poll::Ready(Ok(n));
            }
            // rustls is full: write again once its records left.
            let held = me.session.wants_write();
            std::task::ready!(me.poll_send(cx))?;
            if !held {
                // Refused with nothing of its own to send: rustls would never take it.
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        std::task::ready!(me.poll_send(cx))?;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.closing {
            me.closing = true;
            me.session.send_close_notify();
        }
        std::task::ready!(me.poll_send(cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use std::sync::Arc;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

    use super::*;

    /// A client and a server connection, handshaken in memory.
    fn pair() -> (ClientConnection, Connection) {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let cert = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()]).unwrap();
        let der = CertificateDer::from(cert.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).unwrap();
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("a.test").unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name).unwrap();
        let mut s = Connection::Server(ServerConnection::new(Arc::new(server)).unwrap());
        while c.is_handshaking() || s.is_handshaking() {
            let sent = to_server(&mut c, &mut s);
            let mut wire = Vec::new();
            s.write_tls(&mut wire).unwrap();
            c.read_tls(&mut wire.as_slice()).unwrap();
            c.process_new_packets().unwrap();
            assert!(sent > 0 || !wire.is_empty() || !(c.is_handshaking() || s.is_handshaking()), "stuck");
        }
        (c, s)
    }

    /// Moves what the client has to send into the server; returns how many bytes.
    fn to_server(c: &mut ClientConnection, s: &mut Connection) -> usize {
        let mut wire = Vec::new();
        c.write_tls(&mut wire).unwrap();
        let n = wire.len();
        assert_eq!(feed(s, &wire).unwrap(), n);
        n
    }

    #[test]
    fn ciphertext_beyond_what_rustls_holds_is_left_for_later_and_nothing_is_lost() {
        let (mut c, mut s) = pair();
        let sent: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        for part in sent.chunks(16 * 1024) {
            c.writer().write_all(part).unwrap();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
        }
        // One read of all of it: rustls takes records until it holds 16 KiB of plaintext.
        let mut pending = wire.clone();
        let mut got = Vec::new();
        let mut feeds = 0;
        loop {
            let used = feed(&mut s, &pending).unwrap();
            assert!(used > 0, "rustls took nothing while holding no plaintext");
            pending.drain(..used);
            feeds += 1;
            let mut buf = Vec::with_capacity(7000);
            while let Some(n) = take_plaintext(&mut s, &mut buf) {
                assert!(n.unwrap() > 0);
                got.extend_from_slice(&buf);
                buf.clear();
            }
            if pending.is_empty() {
                break;
            }
        }
        assert!(feeds > 2, "100 KB is not taken at once ({feeds} feeds)");
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes changed or reordered");
    }

    #[test]
    fn a_close_notify_is_the_end_and_a_bare_end_is_a_truncation() {
        let (mut c, mut s) = pair();
        c.writer().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        c.send_close_notify();
        to_server(&mut c, &mut s);
        let mut buf = Vec::with_capacity(64);
        assert_eq!(take_plaintext(&mut s, &mut buf).unwrap().unwrap(), 18);
        buf.clear();
        assert_eq!(take_plaintext(&mut s, &mut buf).unwrap().unwrap(), 0, "close_notify: end of stream");

        let (mut c, mut s) = pair();
        c.writer().write_all(b"GET").unwrap();
        to_server(&mut c, &mut s);
        s.read_tls(&mut io::empty()).unwrap();
        buf.clear();
        // The bytes before the end first, then the truncation.
        assert_eq!(take_plaintext(&mut s, &mut buf).unwrap().unwrap(), 3);
        buf.clear();
        let err = take_plaintext(&mut s, &mut buf).unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_damaged_record_is_invalid_data_with_an_alert_queued() {
        let (mut c, mut s) = pair();
        c.writer().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut wire = Vec::new();
        c.write_tls(&mut wire).unwrap();
        let last = wire.len() - 1;
        wire[last] ^= 0x55;
        let err = feed(&mut s, &wire).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(s.wants_write(), "an alert to send");
        let mut buf = Vec::with_capacity(64);
        assert!(take_plaintext(&mut s, &mut buf).is_none() || buf.is_empty());
    }
}
