//! HTTP/2 serving: the h2 crate's server behind a frame guard, one task per stream, requests
//! forwarded with flow control carried end to end.

mod forward;
pub mod guard;

mod prefixed;
mod server;
mod stall;
mod stream;

pub use prefixed::Prefixed;
pub use server::serve;
#[cfg(test)]
pub(crate) use stream::handle as stream_task;
