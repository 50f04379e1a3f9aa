//! A connection's byte stream: plain TCP on the completion-based driver, or TLS.
//!
//! Plain connections keep monoio's owned-buffer I/O (io_uring reads straight into the pooled
//! buffer). TLS runs rustls through tokio-rustls over monoio's poll-mode socket (`poll-io`):
//! h2 over monoio's own TLS stream panicked under concurrent flush and write (field notes),
//! while this combination held up in both directions. An HTTP/1.1 connection on io_uring (from
//! a client or to an upstream) goes back to completion mode after its handshake
//! ([`super::uring_tls`]): ring `recv`s and `send`s instead of poll-mode syscalls. HTTP/1.1 code sees one API
//! for all of them.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use monoio::buf::{IoBuf, SliceMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt, IntoPollIo};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::uring_tls::{PollTls, UringTls};

/// A TLS connection accepted from a client.
pub type TlsServerIo = tokio_rustls::server::TlsStream<TcpStreamPoll>;
/// A TLS connection opened to an upstream.
pub type TlsClientIo = tokio_rustls::client::TlsStream<TcpStreamPoll>;

pub enum Stream {
    Tcp(TcpStream),
    TlsServer(Box<TlsServerIo>),
    TlsClient(Box<TlsClientIo>),
    /// A TLS connection on the completion-based driver (HTTP/1.1, from a client or to an
    /// upstream).
    TlsUring(Box<UringTls>),
    /// The connection was handed to a tunnel ([`Stream::take_poll`]); every operation fails.
    Detached,
}

/// A connection in poll mode (tokio's `AsyncRead`/`AsyncWrite`), for code that must read and
/// write it at the same time, such as a WebSocket tunnel.
pub enum PollStream {
    Tcp(TcpStreamPoll),
    TlsServer(Box<TlsServerIo>),
    TlsClient(Box<TlsClientIo>),
    TlsUring(Box<PollTls>),
}

impl Stream {
    /// Reads into the spare capacity of `buf` (appending). `Ok(0)` is end of stream.
    pub async fn read_append(&mut self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let len = buf.len();
        let cap = buf.capacity();
        if len == cap {
            return (Err(io::Error::other("read buffer full")), buf);
        }
        match self {
            Stream::Tcp(s) => {
                let (res, slice) = s.read(SliceMut::new(buf, len, cap)).await;
                (res, slice.into_inner())
            }
            Stream::TlsServer(s) => poll_read_append(s.as_mut(), buf).await,
            Stream::TlsClient(s) => poll_read_append(s.as_mut(), buf).await,
            // Boxed (one allocation per read of a TLS connection): its state would otherwise
            // size every plain connection's task and every request's future.
            Stream::TlsUring(s) => Box::pin(s.read_append(buf)).await,
            Stream::Detached => (Err(detached()), buf),
        }
    }

    /// Writes `buf[range]` completely and returns the buffer.
    pub async fn write_all_range(&mut self, buf: Vec<u8>, range: std::ops::Range<usize>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Stream::Tcp(s) => {
                let (res, slice) = s.write_all(buf.slice(range)).await;
                (res.map(|_| ()), slice.into_inner())
            }
            Stream::TlsServer(s) => {
                let res = poll_write_all(s.as_mut(), buf.get(range).unwrap_or_default()).await;
                (res, buf)
            }
            Stream::TlsClient(s) => {
                let res = poll_write_all(s.as_mut(), buf.get(range).unwrap_or_default()).await;
                (res, buf)
            }
            Stream::TlsUring(s) => {
                // Boxed, as the read.
                let res = Box::pin(s.write_all(buf.get(range).unwrap_or_default())).await;
                (res, buf)
            }
            Stream::Detached => (Err(detached()), buf),
        }
    }

    /// Waits until a plain TCP stream has bytes to read (or an error / end of stream to
    /// report), without holding a buffer; a TLS stream in completion mode too (its socket has
    /// bytes, or rustls holds some). Poll-mode TLS streams cannot tell without decrypting: they
    /// report ready at once and the caller reads (see [`Stream::waits_by_reading`]).
    pub async fn readable(&mut self, relaxed: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable(relaxed).await,
            Stream::TlsUring(s) => s.readable(relaxed).await,
            Stream::TlsServer(_) | Stream::TlsClient(_) => Ok(()),
            Stream::Detached => Err(detached()),
        }
    }

    /// Half-closes (TLS: sends close_notify) without waiting long.
    pub async fn shutdown(&mut self) {
        match self {
            Stream::Tcp(s) => {
                let _ = monoio::io::AsyncWriteRent::shutdown(s).await;
            }
            Stream::TlsServer(s) => {
                let _ = poll_fn(|cx| Pin::new(s.as_mut()).poll_shutdown(cx)).await;
            }
            Stream::TlsClient(s) => {
                let _ = poll_fn(|cx| Pin::new(s.as_mut()).poll_shutdown(cx)).await;
            }
            Stream::TlsUring(s) => {
                let _ = s.shutdown().await;
            }
            Stream::Detached => {}
        }
    }

    /// The plain TCP socket, when this is one (no TLS).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            _ => None,
        }
    }

    /// [`Stream::tcp`], mutably.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::TlsServer(_) | Stream::TlsClient(_) | Stream::TlsUring(_))
    }

    /// Whether waiting for bytes takes a read (poll-mode TLS: only decrypting tells whether
    /// a request is there), rather than [`Stream::readable`].
    pub fn waits_by_reading(&self) -> bool {
        matches!(self, Stream::TlsServer(_) | Stream::TlsClient(_))
    }

    /// Whether an idle connection on this stream can be parked (`runtime::park` watches its
    /// socket): plain TCP, and TLS in completion mode (its session is kept beside the socket;
    /// it waits on socket readiness already). Poll-mode TLS waits in a read.
    pub fn parks(&self) -> bool {
        matches!(self, Stream::Tcp(_) | Stream::TlsUring(_))
    }

    /// Takes the connection out, in poll mode, leaving [`Stream::Detached`] behind. Plain TCP
    /// is switched from completion-based to poll-based I/O (TLS already is). On error the
    /// connection is gone too (closed).
    pub fn take_poll(&mut self) -> io::Result<PollStream> {
        match std::mem::replace(self, Stream::Detached) {
            Stream::Tcp(s) => s.into_poll_io().map(PollStream::Tcp),
            Stream::TlsServer(s) => Ok(PollStream::TlsServer(s)),
            Stream::TlsClient(s) => Ok(PollStream::TlsClient(s)),
            Stream::TlsUring(s) => s.into_poll().map(|s| PollStream::TlsUring(Box::new(s))),
            Stream::Detached => Err(detached()),
        }
    }
}

impl AsyncRead for PollStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PollStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            PollStream::TlsServer(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            PollStream::TlsClient(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            PollStream::TlsUring(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PollStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PollStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            PollStream::TlsServer(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            PollStream::TlsClient(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            PollStream::TlsUring(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PollStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            PollStream::TlsServer(s) => Pin::new(s.as_mut()).poll_flush(cx),
            PollStream::TlsClient(s) => Pin::new(s.as_mut()).poll_flush(cx),
            PollStream::TlsUring(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PollStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            PollStream::TlsServer(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            PollStream::TlsClient(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            PollStream::TlsUring(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A TLS connection whose handshake tokio-rustls completed, back in completion mode on io_uring
/// ([`super::uring_tls`]); on epoll as it is. An error: the socket could not be switched (the
/// connection is gone).
pub fn completion_mode(tls: TlsIo) -> io::Result<Stream> {
    if monoio::utils::is_legacy() {
        return Ok(match tls {
            TlsIo::Server(s) => Stream::TlsServer(s),
            TlsIo::Client(s) => Stream::TlsClient(s),
        });
    }
    let (io, session) = match tls {
        TlsIo::Server(s) => {
            let (io, session) = s.into_inner();
            (io, rustls::Connection::Server(session))
        }
        TlsIo::Client(s) => {
            let (io, session) = s.into_inner();
            (io, rustls::Connection::Client(session))
        }
    };
    let tcp = io.try_into_comp_io().map_err(|(e, _)| e)?;
    Ok(Stream::TlsUring(Box::new(UringTls::new(tcp, session))))
}

/// A connection tokio-rustls completed the handshake of, either side.
pub enum TlsIo {
    Server(Box<TlsServerIo>),
    Client(Box<TlsClientIo>),
}

fn detached() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "connection handed to a tunnel")
}

async fn poll_read_append<T: AsyncRead + Unpin>(io: &mut T, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
    let res = poll_fn(|cx| {
        let mut rb = ReadBuf::uninit(buf.spare_capacity_mut());
        match Pin::new(&mut *io).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    if let Ok(n) = res {
        let len = buf.len() + n;
        // SAFETY: `ReadBuf` reported the first `n` bytes of the spare capacity as filled
        // (initialised) by the reader.
        unsafe { buf.set_len(len) };
    }
    (res, buf)
}

async fn poll_write_all<T: AsyncWrite + Unpin>(io: &mut T, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = data.get(n..).unwrap_or_default();
    }
    poll_fn(|cx| Pin::new(&mut *io).poll_flush(cx)).await
}
