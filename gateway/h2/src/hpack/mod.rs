//! HPACK (RFC 7541): the decoder of request header blocks and the encoder of response heads.
//!
//! - [`Decoder`] is strict (every malformed block is a `Compression` error, never a panic) and
//!   bounded (a block never makes `buf` grow past the caller's list size limit; the dynamic
//!   table never past the size we advertise). Huffman strings are decoded a nibble at a time
//!   through a table built at compile time.
//! - [`Encoder`] spends as little CPU as it can: raw literals (no Huffman coding), static name
//!   indices, and dynamic table entries only for the few response fields that repeat.

mod decoder;
mod encoder;
mod huffman;
mod table;
#[cfg(test)]
mod tests;

pub use decoder::{DecodeError, Decoder, Field};
pub use encoder::Encoder;
