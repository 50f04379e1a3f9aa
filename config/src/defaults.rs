//! Every default value of the configuration, in one place.
//!
//! A key left out of the file takes the value below. All of them are finite: the gateway never
//! runs with an unbounded limit or timeout because an operator forgot a key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::model::{Balancer, IoDriver, RateLimitKey, RateLimitScope, Workers};

/// `server.workers`: one worker per usable CPU.
pub const WORKERS: Workers = Workers::Auto;
/// `server.io_driver`: io_uring, falling back to epoll.
pub const IO_DRIVER: IoDriver = IoDriver::Auto;
/// `server.admin.address`: the admin listener, loopback only, so no token is needed.
pub const ADMIN_ADDRESS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9901);
/// `server.drain_timeout`: time in-flight requests get after SIGTERM.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// `server.log_level`: tracing `EnvFilter` directive.
pub const LOG_LEVEL: &str = "info";
/// `server.watch`: reload automatically when the config file changes.
pub const WATCH: bool = true;
/// `server.access_log.buffer_lines`: lines a worker may have queued for the writer before
/// further lines are dropped (and counted).
pub const ACCESS_LOG_BUFFER_LINES: usize = 4096;
/// `server.via`: the pseudonym written in the `Via` header.
pub const VIA: &str = "gateway";

/// `server.limits.max_request_line_bytes`.
pub const MAX_REQUEST_LINE_BYTES: usize = 8192;
/// `server.limits.max_header_bytes`.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// `server.limits.max_headers`.
pub const MAX_HEADERS: usize = 100;
/// `server.limits.max_body_bytes`.
pub const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;
/// `server.limits.max_response_header_bytes`.
pub const MAX_RESPONSE_HEADER_BYTES: usize = 64 * 1024;
/// `server.limits.max_connections_per_worker`.
pub const MAX_CONNECTIONS_PER_WORKER: usize = 4096;

/// `server.timeouts.header_read`.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// `server.timeouts.idle`.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// `server.timeouts.body_io`.
pub const BODY_IO_TIMEOUT: Duration = Duration::from_secs(30);

/// `listeners[].backlog`.
pub const LISTENER_BACKLOG: u32 = 1024;

/// `routes[].timeout` (routes with a `cluster` only).
pub const ROUTE_TIMEOUT: Duration = Duration::from_secs(15);
/// `routes[].redirect.status`.
pub const REDIRECT_STATUS: u16 = 301;
/// `routes[].direct_response.status`.
pub const DIRECT_RESPONSE_STATUS: u16 = 200;

/// `clusters[].balancer`.
pub const BALANCER: Balancer = Balancer::P2c;
/// `clusters[].connect_timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// `clusters[].pool.max_idle_per_endpoint`.
pub const POOL_MAX_IDLE_PER_ENDPOINT: usize = 64;
/// `clusters[].pool.idle_timeout`.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// `clusters[].endpoints[].weight`.
pub const ENDPOINT_WEIGHT: u32 = 1;

/// `clusters[].caps.max_connections`: upstream connections per worker to the whole cluster.
pub const CAPS_MAX_CONNECTIONS: usize = 1024;
/// `clusters[].caps.max_pending`: requests per worker waiting for an upstream slot.
pub const CAPS_MAX_PENDING: usize = 1024;
/// `clusters[].caps.max_requests`: requests per worker in flight to the cluster.
pub const CAPS_MAX_REQUESTS: usize = 1024;
/// `clusters[].caps.max_retries`: retries per worker in flight to the cluster.
pub const CAPS_MAX_RETRIES: usize = 3;

/// `clusters[].adaptive_concurrency.enabled`: off by default, so that a healthy upstream whose
/// latency merely rises under load is never shed; with it off the class limit is the cap
/// (`max_requests`) minus the first class's reserve.
pub const ADAPTIVE_ENABLED: bool = false;
/// `clusters[].adaptive_concurrency.initial_limit`: the in-flight limit before any latency
/// was measured.
pub const ADAPTIVE_INITIAL_LIMIT: usize = 16;
/// `clusters[].adaptive_concurrency.min_limit`: the limit never shrinks below this.
pub const ADAPTIVE_MIN_LIMIT: usize = 2;
/// `clusters[].adaptive_concurrency.tolerance`: latency up to `baseline * (1 + tolerance)`
/// does not shrink the limit.
pub const ADAPTIVE_TOLERANCE: f64 = 0.05;
/// `clusters[].adaptive_concurrency.probe_interval`: how often the no-load baseline is
/// re-measured.
pub const ADAPTIVE_PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// `overload.enabled`: shed and queue by priority class.
pub const OVERLOAD_ENABLED: bool = true;
/// `overload.classes`: priority classes, most important first.
pub const OVERLOAD_CLASSES: [&str; 4] = ["critical", "high", "normal", "sheddable"];
/// `overload.default_class`: the class of routes without `priority`, when it is one of
/// `overload.classes`; otherwise the default is the last (least important) class.
pub const OVERLOAD_DEFAULT_CLASS: &str = "normal";
/// `overload.queue_wait_factor`: multiple of the cluster's no-load latency that the second
/// class may wait for an upstream slot.
pub const QUEUE_WAIT_FACTOR: f64 = 1.0;

/// `routes[].rate_limit.max_delay` (with `mode = "delay"`; the default mode, `"reject"`,
/// answers 429 at once): longest wait for a token before 429.
pub const RATE_LIMIT_MAX_DELAY: Duration = Duration::from_millis(100);
/// `routes[].rate_limit.max_keys`: distinct keys tracked per worker.
pub const RATE_LIMIT_MAX_KEYS: usize = 10_000;
/// `routes[].rate_limit.key`: one bucket for the whole route.
pub const RATE_LIMIT_KEY: RateLimitKey = RateLimitKey::Route;
/// `routes[].rate_limit.scope`: each worker enforces its share of the rate.
pub const RATE_LIMIT_SCOPE: RateLimitScope = RateLimitScope::Worker;

/// `routes[].rate_limit.burst`: one second's worth of `rate`, at least 1 (`rate` is at most
/// [`MAX_RATE`], so the result always fits).
pub fn rate_limit_burst(rate: f64) -> u32 {
    // `as` saturates, and `rate` is validated to be finite and positive before this is called.
    rate.ceil().max(1.0) as u32
}

// Bounds enforced by validation.

/// Largest accepted `server.workers`.
pub const MAX_WORKERS: i64 = 1024;
/// Largest accepted `server.limits.max_headers`.
pub const MAX_HEADERS_LIMIT: i64 = 256;
/// Largest accepted endpoint weight.
pub const MAX_ENDPOINT_WEIGHT: i64 = 1000;
/// Most priority classes in `overload.classes`.
pub const MAX_CLASSES: usize = 8;
/// Largest accepted `overload.queue_wait_factor`.
pub const MAX_QUEUE_WAIT_FACTOR: f64 = 10.0;
/// Largest accepted `routes[].rate_limit.rate` (requests per second).
pub const MAX_RATE: f64 = 1e9;
/// Largest accepted `routes[].rate_limit.burst`.
pub const MAX_BURST: i64 = 1_000_000;
/// Largest accepted `routes[].rate_limit.max_keys`.
pub const MAX_RATE_LIMIT_KEYS: i64 = 10_000_000;
/// Largest accepted `clusters[].caps.max_connections`, `max_pending`, `max_requests`,
/// `adaptive_concurrency.initial_limit` and `min_limit`.
pub const MAX_CAP: i64 = 1_000_000;
/// Largest accepted `clusters[].caps.max_retries`.
pub const MAX_RETRIES_CAP: i64 = 1000;
/// Largest accepted `clusters[].adaptive_concurrency.tolerance`.
pub const MAX_TOLERANCE: f64 = 2.0;
/// Shortest and longest accepted `clusters[].adaptive_concurrency.probe_interval`.
pub const MIN_PROBE_INTERVAL: Duration = Duration::from_secs(1);
pub const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(60 * 60);
/// Longest accepted duration anywhere in the file.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);
