//! Errors of loading a configuration file: every problem found, each with where it is.

use std::fmt;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Key path of the offending entry, e.g. `routes[2].match.path_prefix`; empty for problems
    /// with the file as a whole (unreadable, not valid TOML).
    pub path: String,
    /// 1-based line of the offending key or value, when it is written in the file.
    pub line: Option<usize>,
    /// What is wrong, and when it helps, what would be right.
    pub message: String,
}

/// Every problem found in one configuration file, in file order. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// File path, or `<string>` for text that did not come from a file.
    pub source: String,
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// A single error with the file as a whole (unreadable, invalid TOML).
    pub(crate) fn whole_file(source: &str, line: Option<usize>, message: String) -> Self {
        Self { source: source.to_owned(), errors: vec![ConfigError { path: String::new(), line, message }] }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One error per line: `gateway.toml:23: routes[2].cluster: unknown cluster "apii"`.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&self.source)?;
            if let Some(line) = error.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
            if !error.path.is_empty() {
                write!(f, "{}: ", error.path)?;
            }
            f.write_str(&error.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn error(path: &str, line: Option<usize>, message: &str) -> ConfigError {
        ConfigError { path: path.to_owned(), line, message: message.to_owned() }
    }

    #[test]
    fn display_is_one_error_per_line() {
        let errors = ConfigErrors {
            source: "gateway.toml".to_owned(),
            errors: vec![
                error("routes[2].cluster", Some(23), "unknown cluster \"apii\" (known: api, web)"),
                error("listeners", None, "no listeners"),
                error("", Some(4), "invalid TOML"),
            ],
        };
        assert_eq!(
            errors.to_string(),
            "gateway.toml:23: routes[2].cluster: unknown cluster \"apii\" (known: api, web)\n\
             gateway.toml: listeners: no listeners\n\
             gateway.toml:4: invalid TOML"
        );
    }

    #[test]
    fn single_error_display() {
        assert_eq!(error("server.via", Some(3), "bad").to_string(), "line 3: server.via: bad");
        assert_eq!(error("", None, "bad").to_string(), "bad");
    }
}
