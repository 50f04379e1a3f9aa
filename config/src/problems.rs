//! The list of problems found while loading one file, each placed at a key path and line.

use toml_edit::Table;

use crate::error::{ConfigError, ConfigErrors};
use crate::locate::{line_at, line_of, path_at, KeyPath};

/// Collects problems; loading goes on after each one so that a single run reports them all.
pub(crate) struct Problems<'a> {
    text: &'a str,
    root: &'a Table,
    errors: Vec<ConfigError>,
}

impl<'a> Problems<'a> {
    pub(crate) fn new(text: &'a str, root: &'a Table) -> Self {
        Self { text, root, errors: Vec::new() }
    }

    /// The parsed document, for reading sections.
    pub(crate) fn root(&self) -> &'a Table {
        self.root
    }

    /// Records a problem with the entry at `path`.
    pub(crate) fn at(&mut self, path: &KeyPath, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path: path.to_string(),
            line: line_of(self.text, self.root, path.segs()),
            message: message.into(),
        });
    }

    /// How many problems were recorded so far.
    pub(crate) fn count(&self) -> usize {
        self.errors.len()
    }

    /// Records a serde error raised while deserializing the element at `element`: placed at
    /// the key its span points to, or at the element itself when it has no span.
    pub(crate) fn serde(&mut self, element: &KeyPath, error: &toml_edit::de::Error) {
        let message = error.message().trim_end().to_owned();
        let Some(offset) = error.span().map(|span| span.start) else {
            self.at(element, message);
            return;
        };
        let path = path_at(self.root, offset).unwrap_or_else(|| element.clone());
        self.errors.push(ConfigError { path: path.to_string(), line: Some(line_at(self.text, offset)), message });
    }

    /// `value` when no problem was recorded, else every problem in line order (problems without
    /// a line last).
    pub(crate) fn finish<T>(self, value: T, source: &str) -> Result<T, ConfigErrors> {
        if self.errors.is_empty() {
            return Ok(value);
        }
        let mut errors = self.errors;
        errors.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
        Err(ConfigErrors { source: source.to_owned(), errors })
    }
}
