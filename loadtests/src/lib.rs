//! Load-test tooling for the gateway.
//!
//! - [`origin`]: a small, strict, blocking HTTP/1.1 origin server whose behaviour is chosen per
//!   request by its path. The gateway's end-to-end tests and the benchmarks use it as the
//!   upstream; it also misbehaves on request, for the gateway's upstream-strictness tests.
//!
//! The benchmark scripts live in `loadtests/bench/` and write their reports to
//! `loadtests/results/`; see `loadtests/README.md`.

pub mod origin;

pub use origin::{pattern, Origin, OriginConfig, ReceivedRequest};
