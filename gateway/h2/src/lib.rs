//! The gateway's HTTP/2 server codec, without I/O (RFC 9113, RFC 7541): frames are parsed in
//! place from the connection's read buffer, header blocks decoded straight into a stream's
//! field list and response heads encoded straight into the connection's write buffer. The
//! caller owns the socket; [`server::Conn`] only turns bytes into events and calls into bytes.

#![forbid(unsafe_code)]

pub mod frame;
pub mod hpack;
pub mod server;
