//! A connection's byte stream: plain TCP on the completion-based driver, or TLS.
//!
//! Plain connections keep monoio's owned-buffer I/O (io_uring reads straight into the pooled
//! buffer). TLS runs rustls through tokio-rustls over monoio's poll-mode socket (`poll-io`):
//! h2 over monoio's own TLS stream panicked under concurrent flush and write (field notes),
//! while this combination held up in both directions. HTTP/1.1 code sees one API for both.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::Poll;

use monoio::buf::{IoBuf, SliceMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A TLS connection accepted from a client.
pub type TlsServerIo = tokio_rustls::server::TlsStream<TcpStreamPoll>;
/// A TLS connection opened to an upstream.
pub type TlsClientIo = tokio_rustls::client::TlsStream<TcpStreamPoll>;

pub enum Stream {
    Tcp(TcpStream),
    TlsServer(Box<TlsServerIo>),
    TlsClient(Box<TlsClientIo>),
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
        }
    }

    /// Waits until a plain TCP stream has bytes to read (or an error / end of stream to
    /// report), without holding a buffer. TLS streams cannot tell without decrypting: they
    /// report ready at once and the caller reads (see `conn::wait_for_request`).
    pub async fn readable(&mut self, relaxed: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable(relaxed).await,
            Stream::TlsServer(_) | Stream::TlsClient(_) => Ok(()),
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
        }
    }

    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Tcp(_))
    }
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
