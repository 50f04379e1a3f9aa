//! The client side of a connection: accepting it (TLS, protocol choice), the HTTP/1.1 and
//! HTTP/2 codecs' glue that turns each request into a [`crate::request::Request`] and hands
//! it to the [`crate::pipeline`], and writing the answer back in the client's protocol.

pub mod accept;
pub mod h1;
pub mod h2;
mod proxied;
pub mod proxy_protocol;

#[cfg(test)]
mod future_sizes;

/// How long a connection closed gracefully (HTTP/1.1 at the drain, HTTP/2 after its GOAWAY)
/// keeps reading, and discarding, what the client still sends once our side is shut: a socket
/// closed with unread data sends a reset, which destroys what the client has not read yet (the
/// last answer, the GOAWAY) and fails its next write, so a request racing the close is lost.
pub(crate) const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
/// The most a lingering close reads before it gives up waiting for the client's end.
pub(crate) const LINGER_BYTES: usize = 256 * 1024;
