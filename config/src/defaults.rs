//! Every default value of the configuration, in one place.
//!
//! A key left out of the file takes the value below. All of them are finite: the gateway never
//! runs with an unbounded limit or timeout because an operator forgot a key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::model::{Balancer, IoDriver, Workers};

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

// Bounds enforced by validation.

/// Largest accepted `server.workers`.
pub const MAX_WORKERS: i64 = 1024;
/// Largest accepted `server.limits.max_headers`.
pub const MAX_HEADERS_LIMIT: i64 = 256;
/// Largest accepted endpoint weight.
pub const MAX_ENDPOINT_WEIGHT: i64 = 1000;
/// Longest accepted duration anywhere in the file.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);
