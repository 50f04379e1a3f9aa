//! The abuse-RSS benchmark (`src/bin/abuse_rss.rs`, `bench/abuse-rss.sh`): the gateway's
//! memory while it is abused, one abuse at a time, with a well-behaved client alongside.
//!
//! - [`attacks`]: each abuse as a blocking std-socket client that runs until told to stop.
//! - [`frames`]: the raw HTTP/2 frames the HTTP/2 abuses write (RFC 9113 layout, HPACK
//!   literals), so no HTTP/2 library gets in the way of misbehaving.
//! - [`report`]: `/proc/<pid>/status` and Prometheus text parsing, the per-abuse result and
//!   its Markdown table.

pub mod attacks;
pub mod frames;
pub mod report;
