//! The reporting half of the benchmark suite: parsers for the load tools' text output, and the
//! summary of one suite run (one directory of per-scenario JSON files) as `summary.json`,
//! `summary.md` and SVG plots. The `bench-report` binary is the command-line face of it.
//!
//! - [`parse`]: `wrk --latency` (with our lua `RESULT` line), `h2load` and `openssl s_time`
//!   output, parsed into typed values; unparsable input is an error message, never a panic.
//! - [`load`]: reads a suite directory and normalises every scenario file it finds into a
//!   [`Summary`]; a missing file or proxy is a note in the summary, never a failure.
//! - [`targets`]: the gateway's targets (CPU per request against nginx and HAProxy, added latency,
//!   idle memory, ...) checked against the summary.
//! - [`markdown`] and [`plots`] (drawn with [`svg`]): the human-readable report.

pub mod load;
pub mod markdown;
pub mod model;
pub mod paired;
pub mod parse;
pub mod plots;
pub mod svg;
pub mod targets;

mod h2load;
mod markdown_tables;
mod norm_http;
mod norm_more;
mod norm_tls;
mod stime;
mod wrk;

pub use load::{load_dir, summarize_dir, Written};
pub use model::Summary;
pub use parse::{parse_h2load, parse_stime, parse_wrk, ParseError};
