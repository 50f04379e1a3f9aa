//! The server side of one HTTP/2 connection, without I/O.
