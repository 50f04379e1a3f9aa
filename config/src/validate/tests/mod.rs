//! Validation rules, one bad input at a time: each test checks the exact key path, the line
//! and the message of the problem it provokes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod clusters;
mod concurrency;
mod dns;
mod edge;
mod headers;
mod health;
mod overload;
mod ratelimit;
mod retry;
mod routes;
mod server;
mod tls;
mod traffic;

use crate::{parse, Config};

/// A valid listener on lines 1-3; the text appended to it starts on line 4.
const LISTENER: &str = "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n";

/// `LISTENER` followed by `rest` (whose first line is line 4).
fn with_listener(rest: &str) -> String {
    format!("{LISTENER}{rest}")
}

/// Every problem of `text` as (path, line, message); panics if it is valid.
fn errors(text: &str) -> Vec<(String, Option<usize>, String)> {
    match parse(text, "<string>") {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(errors) => errors.errors.into_iter().map(|e| (e.path, e.line, e.message)).collect(),
    }
}

/// Asserts that `text` has exactly one problem, at `path` on `line`, whose message contains
/// `needle`.
#[track_caller]
fn assert_one(text: &str, path: &str, line: Option<usize>, needle: &str) {
    let errors = errors(text);
    assert_eq!(errors.len(), 1, "expected one error, got {errors:#?}");
    let (got_path, got_line, message) = &errors[0];
    assert_eq!((got_path.as_str(), *got_line), (path, line), "message: {message}");
    assert!(message.contains(needle), "message {message:?} lacks {needle:?}");
}

/// Parses a text that must be valid.
#[track_caller]
fn valid(text: &str) -> Config {
    parse(text, "<string>").unwrap_or_else(|e| panic!("unexpected errors:\n{e}"))
}
