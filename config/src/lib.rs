//! Configuration of the edge gateway: one TOML file, parsed into raw serde structs, then
//! converted once into the validated [`model::Config`].
//!
//! ```no_run
//! let config = gateway_config::load(std::path::Path::new("/etc/gateway/gateway.toml"))
//!     .unwrap_or_else(|errors| {
//!         eprintln!("{errors}");
//!         std::process::exit(2)
//!     });
//! println!("{}", config.summary());
//! ```
//!
//! Loading reports every problem of the file at once, each with its key path and line
//! ([`ConfigErrors`]). The keys and their defaults are documented in
//! `packaging/examples/full.toml` and in [`defaults`].

pub mod defaults;
mod error;
mod locate;
pub mod model;
mod problems;
mod raw;
pub mod resolve;
mod sections;
pub mod timeouts;
mod units;
mod validate;
pub mod watch;

pub use error::{ConfigError, ConfigErrors};
pub use model::*;
pub use units::show_duration;

use std::path::Path;

use toml_edit::ImDocument;

use crate::locate::line_at;
use crate::problems::Problems;

/// Parses and validates configuration text. `source` names it in errors (a file path, or
/// `"<string>"`). File paths in it (TLS certificates and keys) are kept as written.
pub fn parse(text: &str, source: &str) -> Result<Config, ConfigErrors> {
    parse_in(text, source, None)
}

/// Parses and validates `text`, read from the file at `path`: errors name `path`, and relative
/// file paths in it are resolved against the file's directory.
pub fn parse_file(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    parse_in(text, &path.display().to_string(), Some(path.parent().unwrap_or(Path::new(""))))
}

/// Reads and validates the configuration file at `path` (see [`parse_file`]). An unreadable
/// file is a single error.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigErrors::whole_file(&source, None, format!("cannot read file: {e}")))?;
    parse_file(&text, path)
}

fn parse_in(text: &str, source: &str, base: Option<&Path>) -> Result<Config, ConfigErrors> {
    let doc = ImDocument::parse(text).map_err(|e| {
        let line = e.span().map(|span| line_at(text, span.start));
        let message = format!("invalid TOML: {}", e.message().trim_end());
        ConfigErrors::whole_file(source, line, message)
    })?;
    let mut problems = Problems::new(text, doc.as_table());
    let raw = sections::split(&mut problems);
    let config = validate::convert(&raw, base, &mut problems);
    problems.finish(config, source)
}

impl Config {
    /// One line for the startup log, e.g.
    /// `2 listeners, 5 routes, 2 clusters (4 endpoints), workers auto, io_driver auto`.
    pub fn summary(&self) -> String {
        let endpoints: usize = self.clusters.iter().map(|c| c.endpoints.len()).sum();
        let workers = match self.server.workers {
            Workers::Auto => "auto".to_owned(),
            Workers::Fixed(n) => n.to_string(),
        };
        let io_driver = match self.server.io_driver {
            IoDriver::Auto => "auto",
            IoDriver::IoUring => "io_uring",
            IoDriver::Epoll => "epoll",
        };
        format!(
            "{}, {}, {} ({}), workers {workers}, io_driver {io_driver}",
            count(self.listeners.len(), "listener"),
            count(self.routes.len(), "route"),
            count(self.clusters.len(), "cluster"),
            count(endpoints, "endpoint"),
        )
    }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests;
