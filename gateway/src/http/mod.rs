//! HTTP: connection setup (TLS, protocol choice), the HTTP/1.1 codec, body streaming and
//! connection loop, HTTP/2 serving, and generated responses.

pub mod accept;
pub mod body;
pub mod chunked;
pub mod conn;
pub mod deadline;
pub mod decor;
pub mod exchange;
pub mod h1;
pub mod h2;
pub mod response;
