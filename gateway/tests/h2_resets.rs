//! End-to-end: the RST_STREAM code an HTTP/2 client gets when the gateway gives up on its
//! stream after the response head was sent: CANCEL (RFC 9113 §7), never INTERNAL_ERROR, whether
//! an HTTP/1.1 upstream closed mid-body or an HTTP/2 upstream reset its stream mid-body. (A
//! client that stops reading gets CANCEL too: abuse.rs `h2_zero_window_stall_is_cut_and_others_are_served`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;

use common::clients::*;
use common::h2origin::H2Origin;
use common::*;

/// An HTTP/1.1 origin that promises 100 bytes, sends 10 and closes.
fn truncating_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789");
                std::thread::sleep(std::time::Duration::from_millis(50));
            });
        }
    });
    addr
}

fn h2c(text: String) -> String {
    text.replace("address = \"127.0.0.1:0\"\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n")
}

/// The reset reason the client's stream ends with (after a 200 head).
fn reset_reason(addr: SocketAddr, path: &str) -> Option<h2::Reason> {
    runtime().block_on(async {
        let mut c = h2_connect(addr, None).await;
        let err = h2_request(&mut c, h2_get("http", "a", path), None).await.expect_err("the stream is reset");
        err.reason()
    })
}

#[test]
fn an_http1_upstream_failing_mid_body_resets_the_stream_with_cancel() {
    each_driver(|d| {
        let gw = TestGateway::start(&h2c(config(d, truncating_origin(), "", "")));
        assert_eq!(reset_reason(gw.addr, "/x"), Some(h2::Reason::CANCEL), "{d}");
    });
}

#[test]
fn an_http2_upstream_resetting_mid_body_resets_the_stream_with_cancel() {
    let origin = H2Origin::start(None);
    let text = h2c(config("io_uring", origin.addr, "", ""))
        .replace("connect_timeout = \"1s\"\n", "connect_timeout = \"1s\"\nprotocol = \"h2\"\n");
    let gw = TestGateway::start(&text);
    assert_eq!(reset_reason(gw.addr, "/reset"), Some(h2::Reason::CANCEL));
    // The connection and other streams are unharmed.
    runtime().block_on(async {
        let mut c = h2_connect(gw.addr, None).await;
        let r = h2_request(&mut c, h2_get("http", "a", "/bytes/5"), None).await.unwrap();
        assert_eq!((r.status, r.body.len()), (200, 5));
    });
}
