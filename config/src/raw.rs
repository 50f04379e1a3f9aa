//! The TOML file as written, before validation.
//!
//! Every struct denies unknown keys. Leaves that need range or syntax checks are kept loose
//! here (`i64`, strings) so that validation can report them with a precise message and keep
//! checking the rest of the section; a wrong TOML type is a serde error for the whole element.
//! Absent keys are `None`: their defaults live in [`crate::defaults`].

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

mod headers;
mod traffic;

pub(crate) use headers::*;
pub(crate) use traffic::*;

/// `[server]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [server] table")]
pub(crate) struct RawServer {
    pub workers: Option<IntOrStr>,
    pub io_driver: Option<String>,
    pub admin: Option<RawAdmin>,
    pub drain_timeout: Option<IntOrStr>,
    pub drain_delay: Option<IntOrStr>,
    pub log_level: Option<String>,
    pub via: Option<String>,
    pub watch: Option<bool>,
    pub upgrade_socket: Option<String>,
    pub hosts_file: Option<String>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub deadline_header: Option<String>,
    pub server_header: Option<String>,
    pub access_log: Option<RawAccessLog>,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub timeouts: RawTimeouts,
    #[serde(default)]
    pub http2: RawHttp2,
}

/// `[server.http2]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [server.http2] table")]
pub(crate) struct RawHttp2 {
    pub max_concurrent_streams: Option<i64>,
    pub max_header_list_bytes: Option<IntOrStr>,
    pub initial_stream_window_bytes: Option<IntOrStr>,
    pub initial_connection_window_bytes: Option<IntOrStr>,
    pub max_frame_bytes: Option<IntOrStr>,
    pub flood_window: Option<IntOrStr>,
    pub max_resets: Option<i64>,
    pub max_control_frames: Option<i64>,
    pub max_empty_frames: Option<i64>,
    pub stall_timeout: Option<IntOrStr>,
}

/// `admin = false`, `admin = true` (the default address) or `admin = { address, token }`.
#[derive(Debug)]
pub(crate) enum RawAdmin {
    Disabled,
    Enabled(RawAdminTable),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with address, token and per_worker_metrics")]
pub(crate) struct RawAdminTable {
    pub address: Option<String>,
    pub token: Option<String>,
    pub per_worker_metrics: Option<bool>,
}

/// `[server.limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [server.limits] table")]
pub(crate) struct RawLimits {
    pub max_request_line_bytes: Option<IntOrStr>,
    pub max_header_bytes: Option<IntOrStr>,
    pub max_headers: Option<i64>,
    pub max_body_bytes: Option<IntOrStr>,
    pub max_response_header_bytes: Option<IntOrStr>,
    pub max_connections_per_worker: Option<i64>,
}

/// `[server.timeouts]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [server.timeouts] table")]
pub(crate) struct RawTimeouts {
    pub header_read: Option<IntOrStr>,
    pub idle: Option<IntOrStr>,
    pub body_io: Option<IntOrStr>,
}

/// `[server.access_log]`: present means enabled.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an access_log table")]
pub(crate) struct RawAccessLog {
    pub format: Option<String>,
    pub path: Option<String>,
    pub buffer_lines: Option<i64>,
}

/// One `[[listeners]]` element.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a listener table")]
pub(crate) struct RawListener {
    pub name: String,
    pub address: String,
    pub backlog: Option<i64>,
    pub protocols: Option<Vec<String>>,
    pub tls: Option<RawListenerTls>,
    pub proxy_protocol: Option<String>,
    pub proxy_protocol_timeout: Option<IntOrStr>,
    pub trusted_proxies: Option<Vec<String>>,
    pub forwarded: Option<bool>,
}

/// `listeners[].tls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a tls table")]
pub(crate) struct RawListenerTls {
    #[serde(default)]
    pub certificates: Vec<RawCertificate>,
    pub unknown_sni: Option<String>,
    pub min_version: Option<String>,
    pub handshake_timeout: Option<IntOrStr>,
    pub session_tickets: Option<bool>,
    pub session_ticket_keys: Option<Vec<String>>,
    pub session_cache: Option<i64>,
    pub client_auth: Option<RawClientAuth>,
    pub identity_header: Option<String>,
}

/// `listeners[].tls.certificates[]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with cert, key and optional names")]
pub(crate) struct RawCertificate {
    pub cert: String,
    pub key: String,
    pub names: Option<Vec<String>>,
}

/// `listeners[].tls.client_auth`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with ca and mode")]
pub(crate) struct RawClientAuth {
    pub ca: String,
    pub mode: Option<String>,
}

/// One `[[routes]]` element.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a route table")]
pub(crate) struct RawRoute {
    pub name: String,
    #[serde(rename = "match", default)]
    pub matcher: RawMatch,
    pub cluster: Option<String>,
    pub timeout: Option<IntOrStr>,
    pub direct_response: Option<RawDirectResponse>,
    pub redirect: Option<RawRedirect>,
    pub priority: Option<String>,
    pub rate_limit: Option<RawRateLimit>,
    pub websocket: Option<bool>,
    pub retry: Option<RawRetry>,
    /// Weighted clusters instead of `cluster` (see [`RawSplitTarget`]).
    pub split: Option<Vec<RawSplitTarget>>,
    pub sticky: Option<RawSticky>,
    pub pin: Option<Vec<RawPin>>,
    pub mirror: Option<RawMirror>,
    pub hsts: Option<RawHsts>,
    pub request_headers: Option<RawHeaderEdits>,
    pub response_headers: Option<RawHeaderEdits>,
    pub rewrite: Option<RawRewrite>,
}

/// `routes[].request_headers` and `response_headers`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with set, add and remove")]
pub(crate) struct RawHeaderEdits {
    #[serde(default)]
    pub set: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub add: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `routes[].rewrite`: exactly one of `prefix` and `path`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with prefix or path")]
pub(crate) struct RawRewrite {
    pub prefix: Option<String>,
    pub path: Option<String>,
}

/// `routes[].retry`: every key has a default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a retry table")]
pub(crate) struct RawRetry {
    pub retry_on: Option<Vec<String>>,
    pub num_retries: Option<i64>,
    pub per_try_timeout: Option<IntOrStr>,
    pub retriable_status_codes: Option<Vec<i64>>,
    pub backoff: Option<RawBackoff>,
    pub max_replay_bytes: Option<IntOrStr>,
}

/// `routes[].retry.backoff`: full-jitter exponential backoff.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a backoff table")]
pub(crate) struct RawBackoff {
    pub base: Option<IntOrStr>,
    pub max: Option<IntOrStr>,
}

/// `clusters[].retry_budget`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a retry_budget table")]
pub(crate) struct RawRetryBudget {
    pub percent: Option<f64>,
    pub min_concurrent: Option<i64>,
}

/// `routes[].rate_limit`: `rate` is required, the rest has defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a rate_limit table")]
pub(crate) struct RawRateLimit {
    /// Integer or float (TOML integers deserialize into `f64`).
    pub rate: f64,
    pub burst: Option<i64>,
    pub key: Option<String>,
    pub mode: Option<String>,
    pub max_delay: Option<IntOrStr>,
    pub scope: Option<String>,
    pub max_keys: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a match table")]
pub(crate) struct RawMatch {
    pub host: Option<String>,
    pub path: Option<String>,
    pub path_prefix: Option<String>,
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default)]
    pub headers: Vec<RawHeaderMatch>,
    pub client_identity: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with name and an optional value")]
pub(crate) struct RawHeaderMatch {
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a direct_response table")]
pub(crate) struct RawDirectResponse {
    pub status: Option<i64>,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub headers: OrderedHeaders,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a redirect table")]
pub(crate) struct RawRedirect {
    pub status: Option<i64>,
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<i64>,
    pub path: Option<String>,
    #[serde(default)]
    pub keep_query: bool,
}

/// One `[[clusters]]` element.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a cluster table")]
pub(crate) struct RawCluster {
    pub name: String,
    #[serde(default)]
    pub endpoints: Vec<RawEndpoint>,
    pub dns_refresh: Option<IntOrStr>,
    pub balancer: Option<String>,
    pub connect_timeout: Option<IntOrStr>,
    #[serde(default)]
    pub pool: RawPool,
    #[serde(default)]
    pub caps: RawCaps,
    #[serde(default)]
    pub adaptive_concurrency: RawAdaptiveConcurrency,
    #[serde(default)]
    pub retry_budget: RawRetryBudget,
    pub protocol: Option<String>,
    pub tls: Option<RawUpstreamTls>,
    pub health_check: Option<RawHealthCheck>,
    #[serde(default)]
    pub outlier_detection: RawOutlierDetection,
    pub all_unhealthy: Option<String>,
    pub hash_key: Option<String>,
}

/// `clusters[].health_check`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a health_check table")]
pub(crate) struct RawHealthCheck {
    pub path: Option<String>,
    pub interval: Option<IntOrStr>,
    pub timeout: Option<IntOrStr>,
    pub healthy_threshold: Option<i64>,
    pub unhealthy_threshold: Option<i64>,
    /// Codes (`204`) and ranges (`"200-299"`).
    pub expected_statuses: Option<Vec<IntOrStr>>,
    pub host: Option<String>,
}

/// `clusters[].outlier_detection`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an outlier_detection table")]
pub(crate) struct RawOutlierDetection {
    pub enabled: Option<bool>,
    pub consecutive_5xx: Option<i64>,
    pub consecutive_gateway_errors: Option<i64>,
    pub base_ejection_time: Option<IntOrStr>,
    pub max_ejection_time: Option<IntOrStr>,
    pub max_ejection_percent: Option<i64>,
}

/// `clusters[].tls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with ca and an optional sni")]
pub(crate) struct RawUpstreamTls {
    pub sni: Option<String>,
    pub ca: String,
}

/// `"host:port"` or `{ address = "host:port", weight = 3 }`.
#[derive(Debug)]
pub(crate) struct RawEndpoint {
    pub address: String,
    pub weight: Option<i64>,
    /// Written in the table form (problems then point at its `address` key).
    pub is_table: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a pool table")]
pub(crate) struct RawPool {
    pub max_idle_per_endpoint: Option<i64>,
    pub idle_timeout: Option<IntOrStr>,
}

/// `clusters[].caps`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a caps table")]
pub(crate) struct RawCaps {
    pub max_connections: Option<i64>,
    pub max_pending: Option<i64>,
    pub max_requests: Option<i64>,
    pub max_retries: Option<i64>,
}

/// `clusters[].adaptive_concurrency`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an adaptive_concurrency table")]
pub(crate) struct RawAdaptiveConcurrency {
    pub enabled: Option<bool>,
    pub initial_limit: Option<i64>,
    pub min_limit: Option<i64>,
    pub tolerance: Option<f64>,
    pub probe_interval: Option<IntOrStr>,
}

/// `[overload]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [overload] table")]
pub(crate) struct RawOverload {
    pub enabled: Option<bool>,
    pub classes: Option<Vec<String>>,
    pub default_class: Option<String>,
    pub priority_header: Option<String>,
    #[serde(default)]
    pub trusted_sources: Vec<String>,
    #[serde(default)]
    pub trusted_identities: Vec<String>,
    pub queue_wait_factor: Option<f64>,
    pub first_class_reserve: Option<bool>,
    pub queue_delay_target: Option<IntOrStr>,
    pub queue_delay_interval: Option<IntOrStr>,
}

/// A TOML integer or string, kept apart so validation can say what the string should look like
/// (`workers = "auto"`, `max_body_bytes = "16MiB"`, `idle = "60s"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntOrStr {
    Int(i64),
    Str(String),
}

/// Header fields in file order (a TOML table keeps its keys in the order written).
#[derive(Debug, Default)]
pub(crate) struct OrderedHeaders(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for IntOrStr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrStr, E> {
                i64::try_from(v).map(IntOrStr::Int).map_err(|_| E::custom("integer out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Str(v.to_owned()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawAdmin {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawAdmin;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("false, true or a table with address and token")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawAdmin, E> {
                Ok(if v { RawAdmin::Enabled(RawAdminTable::default()) } else { RawAdmin::Disabled })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawAdmin, A::Error> {
                RawAdminTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawAdmin::Enabled)
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawEndpoint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, rename = "RawEndpoint")]
        #[serde(expecting = "a table with address and weight")]
        struct Table {
            address: String,
            weight: Option<i64>,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawEndpoint;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"host:port\" or a table with address and weight")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawEndpoint, E> {
                Ok(RawEndpoint { address: v.to_owned(), weight: None, is_table: false })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawEndpoint, A::Error> {
                let t = Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawEndpoint { address: t.address, weight: t.weight, is_table: true })
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for OrderedHeaders {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedHeaders;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of header names to string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedHeaders, A::Error> {
                let mut fields = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    fields.push((name, value));
                }
                Ok(OrderedHeaders(fields))
            }
        }
        deserializer.deserialize_map(V)
    }
}
