//! HTTP/2 serving: the gateway's own codec (`gateway_h2`) behind a frame guard, one task per
//! stream, requests forwarded with flow control carried end to end.

mod forward;
pub mod guard;

mod prefixed;
mod server;
mod stall;
mod stream;

pub use crate::codec::h2shared::{BodyReader, H2Stream};
pub use prefixed::Prefixed;
pub use server::serve;
#[cfg(test)]
pub(crate) use stream::handle as stream_task;
