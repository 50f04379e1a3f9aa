//! `routes[].hsts` as written.

use serde::Deserialize;

use super::IntOrStr;

/// `routes[].hsts`: `max_age` is required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with max_age, include_subdomains and preload")]
pub(crate) struct RawHsts {
    pub max_age: IntOrStr,
    pub include_subdomains: Option<bool>,
    pub preload: Option<bool>,
}
