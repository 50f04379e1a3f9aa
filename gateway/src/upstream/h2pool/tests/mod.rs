//! Real sockets on 127.0.0.1 against an in-process h2 server (`support`).

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;

use super::{start, H2Endpoint, H2Error, H2Stream};
use crate::codec::h2io::{next_data, send_data};
use support::{eventually, get, is_pattern, pattern, plain, run, serve, settings, tls_pair, within, Behavior};

/// Reads a response body to its end.
async fn body_of(resp: h2::client::ResponseFuture) -> (http::StatusCode, Vec<u8>) {
    let resp = within(resp).await.expect("response");
    let status = resp.status();
    let mut rx = resp.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = within(next_data(&mut rx)).await {
        out.extend_from_slice(&chunk.expect("body"));
    }
    (status, out)
}

async fn exchange(stream: &mut H2Stream) -> (http::StatusCode, Vec<u8>) {
    let (resp, body) = start(stream, get(), true).expect("start");
    assert!(body.is_none());
    body_of(resp).await
}

#[test]
fn streams_fill_the_peer_limit_then_new_connections_then_callers_wait() {
    run(async {
        let server = serve(Behavior::Hold, 2, None);
        let ep = plain(server.addr, 3);
        let mut streams: Vec<H2Stream> =
            within(join_all((0..6).map(|_| ep.acquire()))).await.into_iter().map(|r| r.expect("acquire")).collect();
        assert_eq!((ep.connections(), ep.streams_in_use()), (3, 6));
        assert_eq!(server.stats.accepted.get(), 3);

        // All six are open at the server at once, never more than its limit on one connection.
        let responses: Vec<_> = streams.iter_mut().map(|s| start(s, get(), true).expect("start").0).collect();
        within(server.stats.active.until(|n| n == 6)).await;
        assert_eq!(server.stats.max_active_per_conn.get(), 2);

        // A seventh caller waits: no slot, no connection left.
        let seventh = monoio::spawn({
            let ep = ep.clone();
            async move { ep.acquire().await }
        });
        monoio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(ep.streams_in_use(), 6);

        server.stats.gate.set(1);
        for resp in responses {
            assert_eq!(body_of(resp).await, (http::StatusCode::OK, b"ok".to_vec()));
        }
        drop(streams.pop());
        let mut s7 = within(seventh).await.expect("seventh acquire");
        assert_eq!(exchange(&mut s7).await, (http::StatusCode::OK, b"ok".to_vec()));
        assert_eq!((ep.connections(), ep.streams_in_use(), server.stats.accepted.get()), (3, 6, 3));
        drop(streams);
        drop(s7);
        assert_eq!(ep.streams_in_use(), 0);
    });
}

#[test]
fn a_full_endpoint_answers_busy_after_the_connect_timeout() {
    run(async {
        let server = serve(Behavior::Respond, 2, None);
        let ep = H2Endpoint::new(server.addr, super::Transport::Plain, settings(1, Duration::from_millis(200)));
        let held = (within(ep.acquire()).await.expect("first"), within(ep.acquire()).await.expect("second"));
        let t = Instant::now();
        assert!(matches!(within(ep.acquire()).await, Err(H2Error::Busy)));
        assert!(t.elapsed() >= Duration::from_millis(190));
        drop(held);
        let mut s = within(ep.acquire()).await.expect("after release");
        assert_eq!(exchange(&mut s).await.0, http::StatusCode::OK);
        assert_eq!(server.stats.accepted.get(), 1);
    });
}

#[test]
fn a_connection_that_received_goaway_takes_no_new_streams() {
    run(async {
        let server = serve(Behavior::GoAwayFirst, 2, None);
        let ep = plain(server.addr, 4);
        let mut s1 = within(ep.acquire()).await.expect("first");
        let (resp, _) = start(&mut s1, get(), true).expect("start");
        // The GOAWAY was written before this head, so the client has seen it.
        let resp = within(resp).await.expect("head");
        assert_eq!(ep.connections(), 1, "the draining connection still carries stream 1");

        let mut s2 = within(ep.acquire()).await.expect("second");
        assert_eq!(server.stats.accepted.get(), 2, "a fresh connection, not the free slot on the first");
        assert_eq!(ep.connections(), 2);
        assert_eq!(exchange(&mut s2).await, (http::StatusCode::OK, b"ok".to_vec()));

        // Stream 1 still completes; then its connection ends and leaves the endpoint.
        server.stats.gate.set(1);
        let mut rx = resp.into_body();
        assert_eq!(within(next_data(&mut rx)).await.expect("data").expect("chunk"), Bytes::from_static(b"late"));
        drop((rx, s1));
        within(server.stats.closed.until(|n| n == 1)).await;
        eventually("the first connection is forgotten", || ep.connections() == 1).await;
    });
}

#[test]
fn a_connection_closed_by_the_server_disappears() {
    run(async {
        let server = serve(Behavior::CloseOnRequest, 2, None);
        let ep = plain(server.addr, 4);
        let mut s1 = within(ep.acquire()).await.expect("first");
        let (resp, _) = start(&mut s1, get(), true).expect("start");
        assert!(within(resp).await.is_err());
        drop(s1);
        eventually("the closed connection is forgotten", || ep.connections() == 0).await;

        let _s2 = within(ep.acquire()).await.expect("second");
        assert_eq!((server.stats.accepted.get(), ep.connections()), (2, 1));
    });
}

#[test]
fn idle_connections_are_evicted_and_closed() {
    run(async {
        let server = serve(Behavior::Respond, 2, None);
        let ep = plain(server.addr, 4);
        let mut s = within(ep.acquire()).await.expect("acquire");
        assert_eq!(exchange(&mut s).await.0, http::StatusCode::OK);
        let later = Instant::now() + Duration::from_secs(61);

        ep.evict_idle(later);
        assert_eq!(ep.connections(), 1, "a connection with a stream in use stays");
        drop(s);
        ep.evict_idle(Instant::now());
        assert_eq!(ep.connections(), 1, "not idle long enough");
        ep.evict_idle(later);
        assert_eq!(ep.connections(), 0);
        within(server.stats.closed.until(|n| n == 1)).await;

        let mut s = within(ep.acquire()).await.expect("acquire again");
        assert_eq!(exchange(&mut s).await.0, http::StatusCode::OK);
        assert_eq!(server.stats.accepted.get(), 2);
    });
}

#[test]
fn large_bodies_both_ways_stay_within_the_flow_control_windows() {
    const SIZE: usize = 4 << 20;
    // What may be sent but not yet consumed: one stream window, plus one frame of slack.
    const SLACK: usize = support::WINDOW as usize + 16 * 1024;
    run(async {
        let server = serve(Behavior::SlowEcho, 2, None);
        let ep = plain(server.addr, 1);
        let mut s = within(ep.acquire()).await.expect("acquire");
        let req = http::Request::builder().method("POST").uri("http://upstream.test/echo").body(()).expect("req");
        let (resp, tx) = start(&mut s, req, false).expect("start");
        let mut tx = tx.expect("request body stream");

        within(send_data(&mut tx, pattern(SIZE), true)).await.expect("send");
        let consumed = server.stats.consumed.get();
        assert!(consumed + SLACK >= SIZE, "sender ran ahead of the server: {consumed} of {SIZE} consumed");

        let resp = within(resp).await.expect("response");
        let mut rx = resp.into_body();
        let mut read = 0;
        while let Some(chunk) = within(next_data(&mut rx)).await {
            let chunk = chunk.expect("chunk");
            assert!(is_pattern(read, &chunk));
            read += chunk.len();
            server.stats.client_read.set(read);
            monoio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(read, SIZE);
        assert!(server.stats.body_ok.get());
        let at_sent = server.stats.client_read_at_sent.get();
        assert!(at_sent + SLACK >= SIZE, "server ran ahead of the reader: {at_sent} of {SIZE} read");
    });
}

#[test]
fn tls_with_alpn_h2_carries_requests() {
    run(async {
        let (server_config, transport) = tls_pair(&[b"h2"], &[b"h2"]);
        let server = serve(Behavior::Respond, 2, Some(server_config));
        let ep = H2Endpoint::new(server.addr, transport, settings(2, Duration::from_secs(2)));
        let mut streams: Vec<H2Stream> =
            within(join_all((0..3).map(|_| ep.acquire()))).await.into_iter().map(|r| r.expect("acquire")).collect();
        for s in &mut streams {
            assert_eq!(exchange(s).await, (http::StatusCode::OK, b"ok".to_vec()));
        }
        assert_eq!((ep.connections(), server.stats.accepted.get()), (2, 2));
    });
}

#[test]
fn tls_without_alpn_h2_is_refused() {
    run(async {
        let (server_config, transport) = tls_pair(&[b"http/1.1"], &[b"h2", b"http/1.1"]);
        let server = serve(Behavior::Respond, 2, Some(server_config));
        let ep = H2Endpoint::new(server.addr, transport, settings(2, Duration::from_secs(2)));
        assert!(matches!(within(ep.acquire()).await, Err(H2Error::NoH2Alpn)));
        assert_eq!((ep.connections(), ep.streams_in_use()), (0, 0));
        // Nothing is left half-open: the next attempt dials again and fails the same way.
        assert!(matches!(within(ep.acquire()).await, Err(H2Error::NoH2Alpn)));
        assert_eq!(server.stats.accepted.get(), 2);
    });
}
