//! `routes[].split`, `sticky`, `pin` and `mirror` as written.

use serde::Deserialize;

/// One `routes[].split` element: a cluster and its weight (both required).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with cluster and weight")]
pub(crate) struct RawSplitTarget {
    pub cluster: String,
    pub weight: i64,
}

/// `routes[].sticky`: exactly one of `header` and `cookie`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with header or cookie")]
pub(crate) struct RawSticky {
    pub header: Option<String>,
    pub cookie: Option<String>,
}

/// One `routes[].pin` element.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with header, an optional value, and cluster")]
pub(crate) struct RawPin {
    pub header: String,
    pub value: Option<String>,
    pub cluster: String,
}

/// `routes[].mirror`: `cluster` is required, the rest has defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mirror table")]
pub(crate) struct RawMirror {
    pub cluster: String,
    /// Integer or float (TOML integers deserialize into `f64`).
    pub percent: Option<f64>,
    pub max_in_flight: Option<i64>,
    pub methods: Option<Vec<String>>,
}
