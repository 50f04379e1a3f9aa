//! Moving body bytes over one HTTP/2 stream within its flow-control windows, so the request path
//! never buffers more than the peer allowed. Works on either side: `h2::SendStream` and
//! `h2::RecvStream` are the same types for client and server.

use std::cell::Cell;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream};
use std::future::poll_fn;

/// Sends `data` on `tx` in pieces no larger than the send capacity h2 assigned to the stream, so
/// h2 holds at most one window of it at a time; returns once every piece is queued on the
/// connection. `end_of_stream` closes the sending side with the last piece (or with an empty DATA
/// frame when `data` is empty).
///
/// Errors when the peer resets the stream or the connection fails. Waits as long as the peer keeps
/// its window closed: callers bound it with their own timeout.
pub async fn send_data(tx: &mut SendStream<Bytes>, data: Bytes, end_of_stream: bool) -> Result<(), h2::Error> {
    send_data_watched(tx, data, end_of_stream, None).await
}

/// [`send_data`], reporting to `watch` (the downstream connection's) while the stream waits for
/// send capacity and when it gets some.
pub async fn send_data_watched(
    tx: &mut SendStream<Bytes>,
    mut data: Bytes,
    end_of_stream: bool,
    watch: Option<&FlowWatch>,
) -> Result<(), h2::Error> {
    if data.is_empty() {
        return if end_of_stream { tx.send_data(data, true) } else { Ok(()) };
    }
    while !data.is_empty() {
        // The requested capacity is the total still wanted; h2 lowers it as data is sent.
        tx.reserve_capacity(data.len());
        let granted = capacity(tx, watch).await?;
        let piece = data.split_to(granted.min(data.len()));
        tx.send_data(piece, end_of_stream && data.is_empty())?;
    }
    Ok(())
}

/// The next DATA chunk of `rx`, or `None` at the end of the stream.
///
/// The chunk's flow-control capacity is released as it is handed over: the caller owns the bytes
/// from here, and asks for the next chunk only after it has dealt with this one, so what sits in
/// memory per stream is bounded by the stream window plus the one chunk the caller holds.
pub async fn next_data(rx: &mut RecvStream) -> Option<Result<Bytes, h2::Error>> {
    let chunk = match rx.data().await? {
        Ok(chunk) => chunk,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = rx.flow_control().release_capacity(chunk.len()) {
        return Some(Err(e));
    }
    Some(Ok(chunk))
}

/// What the streams of one HTTP/2 connection report about their waits for send capacity: how
/// many wait now, and how often a waiting stream got some (flow-control progress: the peer
/// opened a window, or the connection drained what h2 had buffered). Plain cells: a connection
/// and its streams live on one worker thread.
#[derive(Debug, Default)]
pub struct FlowWatch {
    waiting: Cell<u32>,
    granted: Cell<u32>,
}

impl FlowWatch {
    /// Streams waiting for send capacity now.
    pub fn waiting(&self) -> u32 {
        self.waiting.get()
    }

    /// A counter (wrapping) of the times a waiting stream was granted capacity.
    pub fn granted(&self) -> u32 {
        self.granted.get()
    }

    /// A waiting stream was granted capacity.
    pub(crate) fn grant(&self) {
        self.granted.set(self.granted.get().wrapping_add(1));
    }

    /// Counts one waiting stream until the guard is dropped.
    pub(crate) fn wait(&self) -> Waiting<'_> {
        self.waiting.set(self.waiting.get().saturating_add(1));
        Waiting(self)
    }
}

/// One stream's wait, counted in [`FlowWatch::waiting`] until dropped.
pub(crate) struct Waiting<'a>(&'a FlowWatch);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.set(self.0.waiting.get().saturating_sub(1));
    }
}

/// Waits until h2 assigned the stream some send capacity and returns it.
async fn capacity(tx: &mut SendStream<Bytes>, watch: Option<&FlowWatch>) -> Result<usize, h2::Error> {
    let mut waiting = None;
    loop {
        let now = tx.capacity();
        if now > 0 {
            if let Some(w) = waiting.take() {
                let Waiting(watch) = &w;
                watch.granted.set(watch.granted.get().wrapping_add(1));
            }
            return Ok(now);
        }
        if waiting.is_none() {
            waiting = watch.map(FlowWatch::wait);
        }
        // `poll_capacity` reports each increase once; the loop re-reads the current value.
        match poll_fn(|cx| tx.poll_capacity(cx)).await {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => return Err(closed_reason(tx)),
        }
    }
}

/// Why the sending side can no longer send: the peer's reset reason when it sent one.
fn closed_reason(tx: &mut SendStream<Bytes>) -> h2::Error {
    let mut cx = Context::from_waker(Waker::noop());
    match tx.poll_reset(&mut cx) {
        Poll::Ready(Ok(reason)) => reason.into(),
        Poll::Ready(Err(e)) => e,
        Poll::Pending => Reason::STREAM_CLOSED.into(),
    }
}
