//! HTTP/1.1: the wire codec, body streaming, generated responses and the connection loop;
//! HTTP/2 protections.

pub mod body;
pub mod chunked;
pub mod conn;
pub mod exchange;
pub mod h1;
pub mod h2;
pub mod response;
