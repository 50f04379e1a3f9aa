//! The wire formats, knowing nothing of routes or upstreams: HTTP/1.1 heads (strict parsing and
//! framing), chunked coding, body streaming between connections, and the HTTP/1.1 responses
//! the gateway writes itself.

pub mod body;
pub use gateway_h1 as h1;
pub use gateway_h1::chunked;
pub mod h2io;
pub mod h2shared;
pub mod response;

/// `example.com:8080` -> `example.com`; `[::1]:80` -> `[::1]`.
pub fn strip_port(authority: &[u8]) -> &[u8] {
    if authority.first() == Some(&b'[') {
        return match authority.iter().position(|&b| b == b']') {
            Some(end) => authority.get(..=end).unwrap_or(authority),
            None => authority,
        };
    }
    match authority.iter().rposition(|&b| b == b':') {
        Some(colon) => authority.get(..colon).unwrap_or(authority),
        None => authority,
    }
}
