//! HTTP/2 serving: the h2 crate's server behind a frame guard, one task per stream, requests
//! forwarded with flow control carried end to end.

mod forward;
pub mod guard;
pub mod penalty;
mod prefixed;
mod server;
mod stall;
mod stream;

pub use prefixed::Prefixed;
pub use server::serve;

#[cfg(test)]
mod future_sizes {
    //! Every byte of a connection's task stays allocated while the connection lives, and every
    //! HTTP/2 stream's task is allocated and moved per request: keep them small by boxing the
    //! large, rarer states (TLS handshake, HTTP/2 upstreams).
    #![allow(unreachable_code, clippy::diverging_sub_expression, unused_variables)]

    /// The size of what `f` would return, without calling it.
    fn ret_size<F: FnOnce() -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    #[test]
    fn connection_and_stream_tasks_stay_small() {
        let conn = ret_size(&|| crate::downstream::accept::serve(todo!(), todo!(), todo!(), todo!(), todo!()));
        let tls =
            ret_size(&|| crate::downstream::accept::serve_tls(todo!(), todo!(), todo!(), todo!(), todo!(), todo!()));
        let stream = ret_size(&|| super::stream::handle(todo!(), todo!(), todo!(), todo!()));
        let h1 = ret_size(&|| crate::downstream::h1::handle(todo!(), todo!(), todo!(), todo!()));
        let fwd = ret_size(&|| {
            let down: &mut crate::downstream::h1::H1Forward<'_> = todo!();
            crate::pipeline::forward::forward(todo!(), todo!(), down, todo!(), todo!())
        });
        assert!(conn <= 512, "connection task: {conn} bytes");
        assert!(tls <= 1024, "TLS connection state after the handshake: {tls} bytes");
        assert!(stream <= 8192, "HTTP/2 stream task: {stream} bytes");
        // Boxed once per HTTP/1.1 request: 2.8 KiB before TLS and HTTP/2 upstreams existed,
        // 3.3 KiB with retries and deadlines, 3.9 KiB with one forwarding loop for both client
        // protocols (memory per request in flight, not per connection; a streamed body's
        // transfer is boxed apart).
        assert!(h1 <= 4096, "HTTP/1.1 request future: {h1} bytes");
        assert!(fwd <= 3584, "HTTP/1.1 forward future: {fwd} bytes");
    }
}
