//! Mirroring (shadow traffic): a copy of a request is sent, fire and forget, to the route's
//! shadow cluster, and the answer is read and thrown away.
//!
//! The primary never waits for, or fails because of, the shadow: [`start`] only copies the
//! request head the forwarder already built and spawns a task. Bounds: only requests without a
//! body (so nothing has to be buffered or teed), only the configured methods, a sampled share
//! (`percent`, with the worker's rng), at most `max_in_flight` copies per route per worker
//! (further copies are dropped and counted), and each copy ends by the route timeout. The copy
//! carries the primary's head unchanged (Host included, so the shadow routes it like the
//! primary would) plus `x-gateway-mirror: 1`. The shadow's response body is read and dropped
//! as it arrives; its connection is pooled only after a clean exchange.
//!
//! Callers: the HTTP/1.1 forwarder right after it built the upstream head (whether the
//! primary's endpoint then speaks HTTP/1.1 or HTTP/2), and the HTTP/2 forwarder once an
//! endpoint was picked, with its HTTP/1.1 head writer (again whatever the primary speaks). A
//! shadow cluster always speaks HTTP/1.1 (validated). A client's own `x-gateway-mirror` field is
//! never forwarded (to the primary or in the copy): only the gateway's copies carry it.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use gateway_config::Action;
use monoio::time::Instant;

use super::connect::{acquire, retry_if_stale};
use super::interim::Interim;
use super::response_head::read_response_head_pooled;
use crate::codec::body::{self, Side, Source};
use crate::codec::h1::{ResponseFraming, ResponseHead};
use crate::runtime::io::write_from_by;
use crate::stats::metrics::{MirrorResult, RouteMetrics};
use crate::upstream::balancer::XorShift;
use crate::upstream::{EndpointState, Outcome, UpConn};
use crate::worker::{Local, Worker};

/// The field line added to every copy, so the shadow (and its logs) can tell copies apart.
pub const MARKER: &[u8] = b"x-gateway-mirror: 1\r\n";

/// The marker's field name: never taken from a client (stripped when forwarding), so that only
/// the gateway's copies carry it.
pub const MARKER_NAME: &str = "x-gateway-mirror";

/// Mirrors the request on route `route` if the route has a mirror that takes it: `method` as
/// sent, `write_head` writes the HTTP/1.1 request head as sent upstream (ending with the empty
/// line). Only for requests without a body (the caller checks). Never waits; `write_head` runs
/// only for a request that will really be copied.
pub fn start(
    worker: &Rc<Worker>,
    local: &Rc<Local>,
    route: Option<usize>,
    method: &[u8],
    write_head: impl FnOnce(&mut Vec<u8>),
) {
    let Some(index) = route else { return };
    let Some(r) = local.snap.config.routes.get(index) else { return };
    let (Some(mirror), Action::Proxy(proxy)) = (&r.mirror, &r.action) else { return };
    if !mirror.methods.iter().any(|m| m.as_bytes() == method) || !sampled(mirror.percent, &worker.rng) {
        return;
    }
    let Some(state) = local.route(index) else { return };
    let metrics = &state.metrics;
    if state.mirror_in_flight.get() >= mirror.max_in_flight {
        metrics.mirror(MirrorResult::Dropped);
        return;
    }
    let mut head = worker.buffers.take();
    write_head(&mut head);
    if !mark(&mut head) {
        worker.buffers.give(head);
        metrics.mirror(MirrorResult::Failed);
        return;
    }
    let copy = Copy {
        cluster: mirror.cluster,
        timeout: proxy.timeout,
        is_head: method == b"HEAD",
        _slot: Slot::take(&state.mirror_in_flight),
    };
    monoio::spawn(run(Rc::clone(worker), Rc::clone(local), copy, head, Arc::clone(metrics)));
}

/// One copy on its way; holds its in-flight slot until dropped.
struct Copy {
    cluster: usize,
    timeout: Duration,
    is_head: bool,
    _slot: Slot,
}

/// One of the route's in-flight copies on this worker, given back on drop.
struct Slot(Rc<Cell<usize>>);

impl Slot {
    fn take(count: &Rc<Cell<usize>>) -> Self {
        count.set(count.get() + 1);
        Self(Rc::clone(count))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Whether this request is in the sampled `percent` (0 to 100).
fn sampled(percent: f64, rng: &XorShift) -> bool {
    if percent >= 100.0 {
        return true;
    }
    // 53 random bits as a fraction in [0, 1).
    let fraction = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    fraction * 100.0 < percent
}

/// Adds [`MARKER`] before the empty line ending `head`; false if `head` is not a complete head.
fn mark(head: &mut Vec<u8>) -> bool {
    if !head.ends_with(b"\r\n\r\n") {
        return false;
    }
    head.truncate(head.len() - 2);
    head.extend_from_slice(MARKER);
    head.extend_from_slice(b"\r\n");
    true
}

/// Sends the copy and reads the answer, all within the route timeout, and counts the result.
async fn run(worker: Rc<Worker>, local: Rc<Local>, copy: Copy, mut head: Vec<u8>, metrics: Arc<RouteMetrics>) {
    let done = crate::runtime::timeout(copy.timeout, exchange(&worker, &local, &copy, &mut head)).await;
    metrics.mirror(if matches!(done, Ok(true)) { MirrorResult::Mirrored } else { MirrorResult::Failed });
    worker.buffers.give(head);
    tracing::trace!(cluster = copy.cluster, ok = matches!(done, Ok(true)), "mirror copy done");
}

/// One exchange with an endpoint of the shadow cluster (retried once on a fresh connection
/// when a pooled one turns out stale); true when the whole response was read.
async fn exchange(worker: &Rc<Worker>, local: &Local, copy: &Copy, head: &mut Vec<u8>) -> bool {
    let deadline = Instant::now() + copy.timeout;
    let Some(cluster) = local.clusters.get(copy.cluster) else { return false };
    let Some(inflight) = cluster.pick(&worker.rng) else { return false };
    let Some(endpoint) = inflight.endpoint() else { return false };
    let server = &local.snap.config.server;
    let connect_timeout = cluster.settings.connect_timeout;
    let mut retried = false;
    loop {
        let (mut up, reused) =
            match acquire(worker, local, copy.cluster, endpoint, connect_timeout, deadline, Instant::now()).await {
                Ok(x) => x,
                Err(e) => {
                    if let Some(o) = e.outcome() {
                        inflight.record(o);
                    }
                    return false;
                }
            };
        let mut timer = worker.deadlines.at(deadline.into_std());
        let mut timer = std::pin::Pin::new(&mut timer);
        let (res, b) = write_from_by(&mut up.stream, std::mem::take(head), 0, timer.as_mut()).await;
        *head = b;
        let err = match res {
            Ok(()) => match read_response_head_pooled(
                worker,
                &mut up,
                server,
                copy.is_head,
                // Not a WebSocket handshake; no head room (the answer is read and dropped).
                false,
                false,
                &mut Interim::Drop,
                timer.as_mut(),
            )
            .await
            {
                Ok(h) => {
                    inflight.record(Outcome::Response(h.head.status));
                    worker.give_scratch(h.scratch);
                    return discard_response(worker, endpoint, up, h.ubuf, h.upos, &h.head, deadline).await;
                }
                Err(e) => e,
            },
            Err(e) => crate::upstream::UpstreamError::Send(e),
        };
        if let Err(e) = retry_if_stale(worker, err, reused, &mut retried) {
            if let Some(o) = e.outcome() {
                inflight.record(o);
            }
            return false;
        }
    }
}

/// Reads and drops the response body; pools the connection only after a clean exchange.
async fn discard_response(
    worker: &Worker,
    endpoint: &EndpointState,
    mut up: UpConn,
    mut ubuf: Vec<u8>,
    mut upos: usize,
    resp: &ResponseHead,
    deadline: Instant,
) -> bool {
    upos += resp.head_len;
    let source = match resp.framing {
        ResponseFraming::None => None,
        ResponseFraming::Length(n) => Some(Source::Length(n)),
        ResponseFraming::Chunked => Some(Source::Chunked),
        ResponseFraming::UntilClose => Some(Source::UntilClose),
    };
    let ok = match source {
        None => true,
        Some(source) => {
            let read_timeout = deadline.saturating_duration_since(Instant::now());
            let limits = body::Limits { max_bytes: u64::MAX, read_timeout, write_timeout: Duration::ZERO };
            let mut scratch = worker.buffers.take();
            let side = Side { stream: &mut up.stream, buf: &mut ubuf, pos: &mut upos };
            let result = body::discard(side, source, &limits, &mut scratch).await;
            worker.buffers.give(scratch);
            result.is_ok()
        }
    };
    let reusable = ok && resp.keep_alive && upos == ubuf.len() && source != Some(Source::UntilClose);
    worker.buffers.give_response(ubuf);
    if reusable {
        endpoint.pool.put(up, &worker.buffers, &worker.armed);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_goes_before_the_empty_line() {
        let mut head = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec();
        assert!(mark(&mut head));
        assert_eq!(head, b"GET / HTTP/1.1\r\nhost: a\r\nx-gateway-mirror: 1\r\n\r\n");
        let mut partial = b"GET / HTTP/1.1\r\nhost: a\r\n".to_vec();
        assert!(!mark(&mut partial), "not a complete head");
    }

    #[test]
    fn sampling_follows_the_percent() {
        let rng = XorShift::new(42);
        assert!((0..1000).all(|_| sampled(100.0, &rng)));
        assert!((0..1000).all(|_| !sampled(0.0, &rng)));
        let hits = (0..100_000).filter(|_| sampled(25.0, &rng)).count();
        // Binomial(100 000, 0.25): sd ~ 137, +-1500 is over 10 sd.
        assert!((23_500..=26_500).contains(&hits), "{hits}");
    }

    #[test]
    fn slots_count_copies_in_flight() {
        let count = Rc::new(Cell::new(0));
        let a = Slot::take(&count);
        let b = Slot::take(&count);
        assert_eq!(count.get(), 2);
        drop(a);
        drop(b);
        assert_eq!(count.get(), 0);
    }
}
