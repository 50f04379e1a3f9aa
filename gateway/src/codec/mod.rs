//! The wire formats, knowing nothing of routes or upstreams: HTTP/1.1 heads (strict parsing and
//! framing), chunked coding, body streaming between connections, and the HTTP/1.1 responses
//! the gateway writes itself.

pub mod body;
pub mod chunked;
pub mod h1;
pub mod response;
