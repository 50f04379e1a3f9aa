//! Moving DATA through h2 streams with flow control respected in both directions.

use std::future::poll_fn;
use std::task::Poll;

use bytes::Bytes;

/// Sends `data` on `tx`, waiting for the peer's flow-control window as it goes: a slow reader
/// makes this wait instead of growing a buffer. Errors if the peer reset the stream.
pub async fn send_data(tx: &mut h2::SendStream<Bytes>, mut data: Bytes, end_of_stream: bool) -> Result<(), h2::Error> {
    if data.is_empty() {
        if end_of_stream {
            tx.send_data(data, true)?;
        }
        return Ok(());
    }
    while !data.is_empty() {
        tx.reserve_capacity(data.len());
        let granted = poll_fn(|cx| match tx.poll_capacity(cx) {
            Poll::Ready(Some(Ok(n))) if n > 0 => Poll::Ready(Ok(n)),
            // Zero capacity is a transient report; wait for the next one.
            Poll::Ready(Some(Ok(_))) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Err(e)),
            Poll::Ready(None) => Poll::Ready(Err(h2::Error::from(h2::Reason::CANCEL))),
            Poll::Pending => match tx.poll_reset(cx) {
                Poll::Ready(Ok(reason)) => Poll::Ready(Err(h2::Error::from(reason))),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        })
        .await?;
        let piece = data.split_to(granted.min(data.len()));
        let last = data.is_empty() && end_of_stream;
        tx.send_data(piece, last)?;
    }
    Ok(())
}

/// The next DATA chunk of `rx`. The caller gives the window back with [`release`] once the
/// bytes have been passed on, so a slow destination slows the sender down.
pub async fn next_data(rx: &mut h2::RecvStream) -> Option<Result<Bytes, h2::Error>> {
    rx.data().await
}

/// Returns `n` bytes of flow-control window to the peer.
pub fn release(rx: &mut h2::RecvStream, n: usize) {
    let _ = rx.flow_control().release_capacity(n);
}
