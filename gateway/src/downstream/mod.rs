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
