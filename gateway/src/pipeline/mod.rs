//! The request pipeline, the same for every client protocol: the codec at the edge
//! (`downstream/`) builds a [`crate::request::Request`], then
//! [`dispatch`] (route -> admission -> action) decides, the forwarding loop ([`forward`]) or
//! an [`answer`] serves it, [`decor`] adds the gateway's own response fields, and
//! [`exchange::Exchange`] reports it to the access log and the stats.

pub mod answer;
pub mod connect;
pub mod deadline;
pub mod decor;
pub mod dispatch;
pub mod edits;
pub mod exchange;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod forward;
pub mod h2up;
pub mod interim;
pub mod mirror;
pub mod outbound;
pub mod replay;
pub mod response_head;
pub mod retry;
pub mod websocket;
