//! Every default value of the configuration, in one place.
//!
//! A key left out of the file takes the value below. All of them are finite: the gateway never
//! runs with an unbounded limit or timeout because an operator forgot a key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::model::{
    AllUnhealthy, Balancer, ClientAuthMode, IoDriver, Protocol, RateLimitKey, RateLimitScope, TlsVersion,
};
use crate::model::{UnknownSni, UpstreamProtocol, Workers};

/// `server.workers`: one worker per usable CPU.
pub const WORKERS: Workers = Workers::Auto;
/// `server.io_driver`: io_uring, falling back to epoll.
pub const IO_DRIVER: IoDriver = IoDriver::Auto;
/// `server.admin.address`: the admin listener, loopback only, so no token is needed.
pub const ADMIN_ADDRESS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9901);
/// `server.drain_timeout`: time in-flight requests get after SIGTERM.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// `server.drain_delay`: no delay (SIGTERM stops accepting at once).
pub const DRAIN_DELAY: Duration = Duration::ZERO;
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
/// `listeners[].proxy_protocol`: no PROXY header expected.
pub const PROXY_PROTOCOL: crate::model::ProxyProtocol = crate::model::ProxyProtocol::Off;
/// `listeners[].proxy_protocol_timeout`: how long the PROXY header may take.
pub const PROXY_PROTOCOL_TIMEOUT: Duration = Duration::from_secs(5);
/// `listeners[].forwarded`: no RFC 7239 `Forwarded` field is sent upstream.
pub const FORWARDED: bool = false;
/// `listeners[].protocols` of a plain listener.
pub const PLAIN_PROTOCOLS: [Protocol; 1] = [Protocol::Http1];
/// `listeners[].protocols` of a TLS listener: HTTP/2 preferred by ALPN.
pub const TLS_PROTOCOLS: [Protocol; 2] = [Protocol::H2, Protocol::Http1];

/// `listeners[].tls.unknown_sni`: serve the first certificate.
pub const UNKNOWN_SNI: UnknownSni = UnknownSni::Default;
/// `listeners[].tls.min_version`.
pub const TLS_MIN_VERSION: TlsVersion = TlsVersion::Tls12;
/// `listeners[].tls.handshake_timeout`.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// `listeners[].tls.session_tickets`.
pub const TLS_SESSION_TICKETS: bool = true;
/// `listeners[].tls.session_cache`: entries of the server-side session cache.
pub const TLS_SESSION_CACHE: usize = 4096;
/// `listeners[].tls.client_auth.mode`.
pub const CLIENT_AUTH_MODE: ClientAuthMode = ClientAuthMode::Required;
/// `listeners[].tls.identity_header`.
pub const IDENTITY_HEADER: &str = "x-client-identity";

/// `server.http2.max_concurrent_streams`.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// `server.http2.max_header_list_bytes`.
pub const H2_MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;
/// `server.http2.initial_stream_window_bytes`.
pub const H2_INITIAL_STREAM_WINDOW_BYTES: u32 = 256 * 1024;
/// `server.http2.initial_connection_window_bytes`.
pub const H2_INITIAL_CONNECTION_WINDOW_BYTES: u32 = 1024 * 1024;
/// `server.http2.max_frame_bytes`.
pub const H2_MAX_FRAME_BYTES: u32 = 16 * 1024;
/// `server.http2.flood_window`.
pub const H2_FLOOD_WINDOW: Duration = Duration::from_secs(10);
/// `server.http2.max_resets`: per flood window.
pub const H2_MAX_RESETS: u32 = 200;
/// `server.http2.max_control_frames`: PING, SETTINGS and PRIORITY frames per flood window.
pub const H2_MAX_CONTROL_FRAMES: u32 = 200;
/// `server.http2.max_empty_frames`: empty DATA and header-less frames per flood window.
pub const H2_MAX_EMPTY_FRAMES: u32 = 100;

/// `server.http2.stall_timeout`: a connection whose blocked responses get no window this long
/// is closed.
pub const H2_STALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The shortest `server.http2.stall_timeout` (the longest is `server.timeouts.body_io`).
pub const H2_MIN_STALL_TIMEOUT: Duration = Duration::from_millis(100);

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
/// `clusters[].dns_refresh`: how often host-name endpoints are resolved again (when any
/// endpoint of the cluster is a host name).
pub const DNS_REFRESH: Duration = Duration::from_secs(5);
/// `clusters[].pool.max_idle_per_endpoint`.
pub const POOL_MAX_IDLE_PER_ENDPOINT: usize = 1024;
/// `clusters[].pool.idle_timeout`.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// `clusters[].endpoints[].weight`.
pub const ENDPOINT_WEIGHT: u32 = 1;
/// `clusters[].protocol`.
pub const UPSTREAM_PROTOCOL: UpstreamProtocol = UpstreamProtocol::Http1;

/// `clusters[].health_check.interval`.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(5);
/// `clusters[].health_check.timeout` (must stay below the interval).
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
/// `clusters[].health_check.healthy_threshold`.
pub const HEALTH_HEALTHY_THRESHOLD: u32 = 2;
/// `clusters[].health_check.unhealthy_threshold`.
pub const HEALTH_UNHEALTHY_THRESHOLD: u32 = 3;
/// `clusters[].health_check.expected_statuses`: any 2xx or 3xx.
pub const HEALTH_EXPECTED_STATUSES: std::ops::RangeInclusive<u16> = 200..=399;
/// `clusters[].outlier_detection.enabled`.
pub const OUTLIER_ENABLED: bool = true;
/// `clusters[].outlier_detection.consecutive_5xx`.
pub const OUTLIER_CONSECUTIVE_5XX: u32 = 5;
/// `clusters[].outlier_detection.consecutive_gateway_errors`: connect failures, resets and
/// timeouts are the gateway's own view of a broken endpoint, so three in a row (per worker)
/// eject it; with one endpoint of three refusing or resetting, a worker sends it about three
/// requests (each retried elsewhere) before ejecting it.
pub const OUTLIER_CONSECUTIVE_GATEWAY_ERRORS: u32 = 3;
/// `clusters[].outlier_detection.base_ejection_time`.
pub const OUTLIER_BASE_EJECTION_TIME: Duration = Duration::from_secs(30);
/// `clusters[].outlier_detection.max_ejection_time`.
pub const OUTLIER_MAX_EJECTION_TIME: Duration = Duration::from_secs(300);
/// `clusters[].outlier_detection.max_ejection_percent`.
pub const OUTLIER_MAX_EJECTION_PERCENT: u8 = 50;
/// `clusters[].all_unhealthy`: a fast 503 when no endpoint is eligible.
pub const ALL_UNHEALTHY: AllUnhealthy = AllUnhealthy::Fail;
/// The time constant of the `peak_ewma` balancer's latency average (not configurable).
pub const PEAK_EWMA_DECAY: Duration = Duration::from_secs(10);

/// `routes[].websocket`: WebSocket upgrades are not tunnelled unless a route allows them (the
/// request is then served as plain HTTP, its Upgrade field dropped).
pub const WEBSOCKET: bool = false;

/// `clusters[].caps.max_connections`: upstream connections per worker to the whole cluster.
pub const CAPS_MAX_CONNECTIONS: usize = 1024;
/// `clusters[].caps.max_pending`: requests per worker waiting for an upstream slot.
pub const CAPS_MAX_PENDING: usize = 1024;
/// `clusters[].caps.max_requests`: requests per worker in flight to the cluster.
pub const CAPS_MAX_REQUESTS: usize = 1024;
/// `clusters[].caps.max_retries`: retries per worker in flight to the cluster (the ceiling of
/// the proportional `retry_budget`).
pub const CAPS_MAX_RETRIES: usize = 64;
/// `clusters[].retry_budget.percent`: retries in flight, as a share of requests in flight.
pub const RETRY_BUDGET_PERCENT: f64 = 20.0;
/// `clusters[].retry_budget.min_concurrent`: retries always allowed in flight (low traffic).
pub const RETRY_BUDGET_MIN_CONCURRENT: usize = 3;
/// `routes[].retry.num_retries`.
pub const RETRY_NUM_RETRIES: u32 = 2;
/// The most `routes[].retry.num_retries` may be.
pub const MAX_NUM_RETRIES: i64 = 10;
/// `routes[].retry.retry_on`: failures before any response byte (`connect-failure`,
/// `refused-stream`, `reset`, which includes a per-try timeout). A reset is retried only for
/// idempotent requests, so resending one the upstream may have seen is safe (RFC 9110 §9.2.2);
/// the other two, which the upstream never saw, for every method. Status answers (a 5xx, a
/// shed 503) are not retried by default.
pub const RETRY_ON: crate::model::RetryOn = crate::model::RetryOn::CONNECT_FAILURE
    .union(crate::model::RetryOn::REFUSED_STREAM)
    .union(crate::model::RetryOn::RESET);
/// The adaptive per-try timeout (`routes[].retry.per_try_timeout` left out, `reset` retried):
/// a try that can still be retried on its timeout is cut at `ADAPTIVE_TRY_FACTOR` x the
/// cluster's observed peak time to a response head on this worker, at least
/// `ADAPTIVE_TRY_FLOOR`, at most the route timeout / `ADAPTIVE_TRY_CAP_DIVISOR`. A cluster
/// whose observed peak x factor exceeds that cap is slow, not hanging: its tries are not cut.
pub const ADAPTIVE_TRY_FACTOR: u32 = 4;
/// The shortest adaptive per-try timeout.
pub const ADAPTIVE_TRY_FLOOR: Duration = Duration::from_millis(250);
/// The adaptive per-try timeout is at most the route timeout divided by this.
pub const ADAPTIVE_TRY_CAP_DIVISOR: u32 = 2;
/// Responses a worker observes from a cluster before the adaptive per-try timeout follows
/// them; until then (a new worker or cluster) a cut try takes the cap.
pub const ADAPTIVE_TRY_WARMUP: u32 = 8;
/// `routes[].retry.backoff.base` and `.max`.
pub const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(25);
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(250);
/// `routes[].retry.max_replay_bytes`: request bodies held for a resend.
pub const RETRY_MAX_REPLAY_BYTES: u64 = 64 * 1024;
/// The most `routes[].retry.max_replay_bytes` may be.
pub const MAX_REPLAY_BYTES: u64 = 16 * 1024 * 1024;

/// `clusters[].adaptive_concurrency.enabled`: on by default while classes are in use (a route
/// sets `priority`, or `[overload] priority_header` is set), so that naming classes is enough
/// for them to be protected. Without classes there is nobody to favour, and the limit would
/// only turn into 503s requests a healthy upstream serves (a cluster serving slow and fast
/// requests alike shows latency swings the limit takes for queueing): off, the class limit is
/// the cap (`max_requests`) minus the first class's reserve.
pub const ADAPTIVE_ENABLED: bool = true;
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
/// class may wait for an upstream slot. Below 1 so that waiting plus being served stays under
/// twice the no-load latency with room for the proxy's and the network's own time; under the
/// adaptive limit, what being served takes beyond the no-load latency comes off the wait.
pub const QUEUE_WAIT_FACTOR: f64 = 0.9;
/// `overload.first_class_reserve`: on, since a first-class request otherwise waits for the next
/// completion whenever the upstream is full (critical p99 about 1.5x the no-load latency at
/// three times the capacity, against about 1.35x with it, for about 5% of goodput).
pub const FIRST_CLASS_RESERVE: bool = true;

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
/// `overload.queue_delay_target` and `queue_delay_interval`: CoDel's 5 ms and 100 ms.
pub const QUEUE_DELAY_TARGET: Duration = Duration::from_millis(5);
pub const QUEUE_DELAY_INTERVAL: Duration = Duration::from_millis(100);
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
/// Most files in `listeners[].tls.session_ticket_keys`.
pub const MAX_SESSION_TICKET_KEYS: usize = 8;
/// Largest accepted `listeners[].tls.session_cache`.
pub const MAX_SESSION_CACHE: i64 = 10_000_000;
/// Accepted `server.http2.max_concurrent_streams`.
pub const H2_STREAMS_RANGE: std::ops::RangeInclusive<i64> = 1..=10_000;
/// Accepted `server.http2.max_header_list_bytes`.
pub const H2_HEADER_LIST_RANGE: std::ops::RangeInclusive<i64> = 1024..=16 * 1024 * 1024;
/// Accepted HTTP/2 flow-control windows (RFC 9113 section 6.9.2: at most 2^31-1; at least the
/// protocol's initial 65 535).
pub const H2_WINDOW_RANGE: std::ops::RangeInclusive<i64> = 65_535..=2_147_483_647;
/// Accepted `server.http2.max_frame_bytes` (RFC 9113 section 6.5.2).
pub const H2_FRAME_RANGE: std::ops::RangeInclusive<i64> = 16_384..=16_777_215;
/// Accepted `server.http2.max_resets`, `max_control_frames` and `max_empty_frames`.
pub const H2_FLOOD_LIMIT_RANGE: std::ops::RangeInclusive<i64> = 1..=1_000_000;
/// Accepted `clusters[].dns_refresh`.
pub const DNS_REFRESH_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(60 * 60);
/// Accepted `clusters[].health_check.interval`.
pub const HEALTH_INTERVAL_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(60 * 60);
/// Accepted health check thresholds.
pub const HEALTH_THRESHOLD_RANGE: std::ops::RangeInclusive<i64> = 1..=100;
/// Accepted `clusters[].outlier_detection.consecutive_5xx` and `consecutive_gateway_errors`.
pub const OUTLIER_CONSECUTIVE_RANGE: std::ops::RangeInclusive<i64> = 0..=10_000;
/// Longest accepted duration anywhere in the file.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// `routes[].mirror.percent`: every eligible request is mirrored.
pub const MIRROR_PERCENT: f64 = 100.0;
/// `routes[].mirror.max_in_flight`: copies in flight per worker per route.
pub const MIRROR_MAX_IN_FLIGHT: usize = 16;
/// `routes[].mirror.methods`: safe methods, which never carry a body in practice.
pub const MIRROR_METHODS: [&str; 3] = ["GET", "HEAD", "OPTIONS"];
/// Largest accepted `routes[].split[].weight`.
pub const MAX_SPLIT_WEIGHT: i64 = 10_000;
/// Most targets in `routes[].split` (and pins in `routes[].pin`).
pub const MAX_SPLIT_TARGETS: usize = 64;
/// Largest accepted `routes[].mirror.max_in_flight`.
pub const MAX_MIRROR_IN_FLIGHT: i64 = 10_000;
