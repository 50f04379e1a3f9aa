//! The validated configuration model.
//!
//! Every value here has been checked once, when the file was loaded: references between
//! sections are resolved to indices, durations and sizes are typed, names are unique and every
//! limit and timeout is finite. The data plane reads this model and never re-validates it.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

mod edits;
mod headers;
mod health;
mod tls;
mod traffic;

pub use edits::*;
pub use headers::*;
pub use health::*;
pub use tls::*;
pub use traffic::*;

/// A complete, valid configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Config {
    pub server: Server,
    pub listeners: Vec<Listener>,
    /// Routes in match order: the first route whose match succeeds handles the request.
    pub routes: Vec<Route>,
    pub clusters: Vec<Cluster>,
    pub overload: Overload,
}

/// `[overload]`: priority classes and load shedding.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Overload {
    /// When false, nothing is shed or queued by class (caps and rate limits still apply).
    pub enabled: bool,
    /// Class names, most important first (at least 1, at most 8, unique).
    pub classes: Vec<String>,
    /// Index into `classes` of the class of routes that set none.
    pub default_class: usize,
    /// A request header naming the class to use instead of the route's, honoured only from
    /// `trusted_sources` and always removed before forwarding. Lower-case; never a connection
    /// or framing header (`connection`, `content-length`, `host`, `te`, ...).
    pub priority_header: Option<String>,
    /// Client networks whose `priority_header` is honoured; empty when there is no
    /// `priority_header`.
    pub trusted_sources: Vec<Cidr>,
    /// Verified client certificate identities (mTLS listeners) whose `priority_header` is
    /// honoured, wherever they connect from; empty when there is no `priority_header`.
    pub trusted_identities: Vec<IdentityMatch>,
    /// How long the most important classes after the first may wait for an upstream slot, as a
    /// multiple of the cluster's measured no-load latency (the class after the first gets this
    /// much, later middle classes proportionally less; the last class never waits).
    /// From 0.0 to 10.0.
    pub queue_wait_factor: f64,
    /// With the adaptive limit, the last free slot under a cluster's limit is kept for the first
    /// class for a moment after it frees (the cluster's no-load latency times the first class's
    /// observed share of arrivals, at most one limit's share of it), so that a first-class
    /// request arriving at a full upstream rarely waits; other classes take the slot when the
    /// moment has passed. Costs some goodput at overload (measured about 5% at a 10% share).
    pub first_class_reserve: bool,
    /// The queue-delay signal (CoDel's): when the shortest wait for an upstream slot over a whole
    /// `queue_delay_interval` stayed above `queue_delay_target`, the queue is standing rather than
    /// absorbing a burst, and middle classes are shed on arrival instead of joining it (the class
    /// after the first above `(classes - 2) x target`, the next above one step less, ..., and
    /// each above half its wait bound; only while two of the class stay queued).
    /// Target 1ms to 10s, interval 1ms to 60s, target below interval.
    #[serde(serialize_with = "ser::duration")]
    pub queue_delay_target: Duration,
    #[serde(serialize_with = "ser::duration")]
    pub queue_delay_interval: Duration,
}

/// An IPv4 or IPv6 network, e.g. `10.0.0.0/8`. As loaded: `prefix_len` is at most 32 (IPv4) or
/// 128 (IPv6), `network` has no bits set below the prefix, and it is never an IPv4-mapped IPv6
/// network (mapped client addresses are matched against IPv4 networks instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Cidr {
    pub network: std::net::IpAddr,
    pub prefix_len: u8,
}

impl Cidr {
    /// Whether `ip` is inside this network (IPv4-mapped IPv6 addresses match IPv4 networks).
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let bits = u32::from(self.prefix_len.min(32));
                let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let bits = u32::from(self.prefix_len.min(128));
                let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Process-wide settings.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Server {
    pub workers: Workers,
    pub io_driver: IoDriver,
    /// The admin listener; `None` only when the operator disabled it with `admin = false`.
    pub admin: Option<Admin>,
    /// A request header carrying the milliseconds the client will still wait (an incoming
    /// deadline, honoured like `grpc-timeout`: it can only shorten the route timeout) and
    /// sent upstream with what remains of it. Lower-case; `None`: only `grpc-timeout`.
    pub deadline_header: Option<String>,
    /// Unix socket on which a new gateway process takes over the listening sockets (binary
    /// upgrade, `gateway run --takeover`); `None`: no takeover.
    pub upgrade_socket: Option<std::path::PathBuf>,
    /// An /etc/hosts-style file consulted before the system resolver for endpoint host names
    /// (read again at every resolution); `None`: the system resolver alone.
    pub hosts_file: Option<std::path::PathBuf>,
    /// Started as root: the user to switch to once the listeners and the admin port are bound,
    /// before any worker starts (its primary group unless `group` is set). Started as another
    /// user: must name that user or be absent. `None`: stay as started (root needs
    /// `--allow-root`).
    pub user: Option<String>,
    /// The group to switch to with `user` (default: the user's primary group); only with `user`.
    pub group: Option<String>,
    /// How long in-flight requests may run after SIGTERM before connections are closed.
    #[serde(serialize_with = "ser::duration")]
    pub drain_timeout: Duration,
    /// On drain, how long to keep accepting (while `/ready` already says 503) so that load
    /// balancers and kube-proxy stop sending new connections first; then `drain_timeout` runs.
    #[serde(serialize_with = "ser::duration")]
    pub drain_delay: Duration,
    /// Log filter (tracing `EnvFilter` syntax); `RUST_LOG` overrides it.
    pub log_level: String,
    /// The name this gateway puts in `Via` (`1.1 <via>`).
    pub via: String,
    /// `Some(v)`: every response the gateway sends carries exactly `server: v` (the upstream's
    /// is replaced); `Some("")`: no Server field at all (the upstream's is removed); `None`
    /// (the default): the upstream's passes, generated responses carry none.
    pub server_header: Option<String>,
    /// Reload automatically when the config file changes (SIGHUP and `POST /reload` always work).
    pub watch: bool,
    /// One line per request, when configured; `None` means off.
    pub access_log: Option<AccessLog>,
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub http2: Http2,
}

/// `[server.http2]`: settings and abuse limits of every HTTP/2 connection, downstream (TLS `h2`
/// and cleartext prior-knowledge `h2`). All finite and within the ranges RFC 9113 allows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Http2 {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams a client may have open at once; 1 to 10 000.
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: largest decoded header list of a request; 1 KiB to 16 MiB.
    pub max_header_list_bytes: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: per-stream receive window; 65 535 to 2^31-1.
    pub initial_stream_window_bytes: u32,
    /// Connection-level receive window; 65 535 to 2^31-1.
    pub initial_connection_window_bytes: u32,
    /// SETTINGS_MAX_FRAME_SIZE: largest frame payload accepted; 16 384 to 16 777 215.
    pub max_frame_bytes: u32,
    /// The period over which the flood limits below are counted.
    #[serde(serialize_with = "ser::duration")]
    pub flood_window: Duration,
    /// Streams a client may reset (RST_STREAM) per `flood_window` before the connection is
    /// closed with ENHANCE_YOUR_CALM (rapid reset).
    pub max_resets: u32,
    /// PING, SETTINGS and PRIORITY frames a client may send per `flood_window`.
    pub max_control_frames: u32,
    /// Empty DATA frames and CONTINUATION/HEADERS frames without header block bytes a client may
    /// send per `flood_window`.
    pub max_empty_frames: u32,
    /// How long a connection may have responses waiting for flow-control window without any of
    /// them being granted window before it is closed with GOAWAY ENHANCE_YOUR_CALM; 100 ms up to
    /// `server.timeouts.body_io`.
    #[serde(serialize_with = "ser::duration")]
    pub stall_timeout: Duration,
}

/// The access log: written by a background thread from per-worker bounded buffers.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AccessLog {
    pub format: AccessLogFormat,
    pub target: AccessLogTarget,
    /// Lines a worker may have queued before further lines are dropped and counted.
    pub buffer_lines: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    /// One JSON object per line.
    Json,
    /// nginx `combined` followed by `key=value` fields.
    Combined,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogTarget {
    Stdout,
    Stderr,
    File(std::path::PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// As many workers as CPUs this process may use (affinity mask and cgroup quota).
    Auto,
    Fixed(NonZeroUsize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoDriver {
    /// io_uring, falling back to epoll only when io_uring cannot start.
    Auto,
    IoUring,
    Epoll,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Admin {
    pub address: SocketAddr,
    /// Required when `address` is not loopback (validation enforces it). Never serialized.
    #[serde(serialize_with = "ser::redacted")]
    pub token: Option<String>,
    /// `/metrics` labels every per-worker series with its `worker` (else summed over workers;
    /// `?per_worker=1` asks for the per-worker view either way).
    pub per_worker_metrics: bool,
}

/// Per-request and per-connection limits; all finite.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Limits {
    /// Longest request line (method, target, version) accepted; longer -> 414.
    pub max_request_line_bytes: usize,
    /// Largest request head (request line and headers); larger -> 431.
    pub max_header_bytes: usize,
    /// Most header fields in a request; more -> 431.
    pub max_headers: usize,
    /// Largest request body; larger -> 413.
    pub max_body_bytes: u64,
    /// Largest upstream response head; larger -> 502.
    pub max_response_header_bytes: usize,
    /// Most connections one worker holds open; beyond it new connections are closed at accept.
    pub max_connections_per_worker: usize,
}

/// Downstream timeouts; all finite.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Timeouts {
    /// Time allowed to receive a complete request head once its first byte arrived (or the
    /// connection opened); expiry -> 408 and close. Like `idle`, checked on a coarse 100 ms
    /// timer: never early, up to about 0.2 s late.
    #[serde(serialize_with = "ser::duration")]
    pub header_read: Duration,
    /// How long an idle keep-alive connection is kept open between requests (coarse, as
    /// `header_read`).
    #[serde(serialize_with = "ser::duration")]
    pub idle: Duration,
    /// Longest wait for the client to send the next piece of a request body, or to accept the
    /// next piece of a response; expiry closes the connection.
    #[serde(serialize_with = "ser::duration")]
    pub body_io: Duration,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Listener {
    /// Unique name.
    pub name: String,
    pub address: SocketAddr,
    /// Listen backlog passed to `listen(2)`.
    pub backlog: u32,
    /// Protocols served, most preferred first: non-empty, no duplicates. With TLS this is the
    /// ALPN list; without it, `H2` means cleartext HTTP/2 with prior knowledge (h2c).
    pub protocols: Vec<Protocol>,
    /// `None`: plain TCP.
    pub tls: Option<ListenerTls>,
    /// The PROXY protocol header expected before the client's first byte (`proxy_protocol`).
    pub proxy_protocol: ProxyProtocol,
    /// How long the PROXY header may take to arrive (`proxy_protocol_timeout`).
    #[serde(serialize_with = "ser::duration")]
    pub proxy_protocol_timeout: Duration,
    /// Networks whose `X-Forwarded-For` / `Forwarded` is believed and, when non-empty, the only
    /// peers a PROXY header is accepted from (`trusted_proxies`). Empty: no peer is trusted.
    pub trusted_proxies: Vec<Cidr>,
    /// Whether the upstream gets an RFC 7239 `Forwarded` field (`forwarded`).
    pub forwarded: bool,
}

/// `listeners[].proxy_protocol`: which PROXY protocol header (HAProxy's spec) the listener
/// expects from the layer-4 balancer in front of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyProtocol {
    /// No header: the connection's address is the client's.
    Off,
    /// A version 1 (text) header is required.
    V1,
    /// A version 2 (binary) header is required.
    V2,
    /// Either version is required.
    Any,
    /// Either version, or none (the connection's address then stands).
    Optional,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Route {
    /// Unique name.
    pub name: String,
    pub matcher: RouteMatch,
    pub action: Action,
    /// Index into `Config::overload.classes` (the default class when the route sets none).
    pub priority: usize,
    pub rate_limit: Option<RateLimit>,
    /// Whether WebSocket upgrades (`Upgrade: websocket`) are tunnelled; only on routes that proxy.
    /// Elsewhere the upgrade is dropped and the request served as plain HTTP.
    pub websocket: bool,
    /// Weighted clusters, sticky key and pins (`split`, `sticky`, `pin`); only on routes that
    /// proxy, whose `Action::Proxy` is then the first target.
    pub split: Option<Split>,
    /// Shadow traffic (`mirror`); only on routes that proxy.
    pub mirror: Option<Mirror>,
    /// `strict-transport-security` on every response of the route sent over TLS.
    pub hsts: Option<Hsts>,
    /// Edits of the request sent upstream (`request_headers`); `None` when there are none.
    pub request_headers: Option<HeaderEdits>,
    /// Edits of the upstream's response (`response_headers`); `None` when there are none.
    pub response_headers: Option<HeaderEdits>,
    /// The path sent upstream (`rewrite`); only on routes that proxy.
    pub rewrite: Option<Rewrite>,
}

/// A token bucket on a route: `rate` requests per second with bursts of `burst`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RateLimit {
    /// Tokens added per second: greater than 0, at most 1e9.
    pub rate: f64,
    /// Bucket size: at least 1.
    pub burst: u32,
    pub key: RateLimitKey,
    pub mode: RateLimitMode,
    /// Whether the rate is split across workers (each enforces rate/workers) or shared by all
    /// workers through one atomic bucket.
    pub scope: RateLimitScope,
    /// Most distinct keys tracked per worker (least recently used ones are forgotten).
    pub max_keys: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitKey {
    /// One bucket for the whole route.
    Route,
    ClientIp,
    /// A request header's value (lower-case name); requests without it share one bucket.
    Header(String),
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitMode {
    /// 429 at once when no token is available.
    Reject,
    /// Wait for a token up to `max_delay`, then 429. `max_delay` is positive and, on a route
    /// that proxies, at most the route's timeout.
    Delay {
        #[serde(serialize_with = "ser::duration")]
        max_delay: Duration,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitScope {
    Worker,
    Process,
}

/// All present conditions must hold. An empty match matches every request.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct RouteMatch {
    pub host: Option<HostMatch>,
    pub path: Option<PathMatch>,
    /// Upper-case method tokens; empty means any method.
    pub methods: Vec<String>,
    pub headers: Vec<HeaderMatch>,
    /// The verified client certificate's identity (mTLS listeners), see [`IdentityMatch`].
    pub client_identity: Option<IdentityMatch>,
}

/// A match on the principal of a verified client certificate: its first URI SAN (a SPIFFE id),
/// else its first DNS SAN, else its subject CN. Requests without a verified certificate never
/// match.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum IdentityMatch {
    Exact(String),
    /// Written with a trailing `*`: `spiffe://example.org/ns/prod/*`.
    Prefix(String),
}

impl IdentityMatch {
    /// Whether the principal `id` matches.
    pub fn matches(&self, id: &str) -> bool {
        match self {
            IdentityMatch::Exact(w) => id == w,
            IdentityMatch::Prefix(w) => id.starts_with(w.as_str()),
        }
    }
}

/// Host match, compared case-insensitively against the request host without its port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum HostMatch {
    /// Lower-case host name, e.g. `shop.example.com`.
    Exact(String),
    /// `*.example.com` is stored as `.example.com` (lower case): it matches `a.example.com`
    /// and `a.b.example.com`, never `example.com` itself.
    Suffix(String),
}

/// Path match against the request path (the target without its query string).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum PathMatch {
    Exact(String),
    /// Plain byte prefix: `/api` matches `/api`, `/api/x` and `/apix`.
    Prefix(String),
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeaderMatch {
    /// Lower-case field name.
    pub name: String,
    /// `None`: the header must be present. `Some(v)`: one of its values must equal `v` exactly.
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Action {
    Proxy(ProxyAction),
    Direct(DirectResponse),
    Redirect(Redirect),
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProxyAction {
    /// Index into `Config::clusters`.
    pub cluster: usize,
    /// Time from the start of the request until the upstream response head arrives (-> 504),
    /// and the longest pause between two reads of the upstream response body.
    #[serde(serialize_with = "ser::duration")]
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

/// When and how a failed try is retried: a try the upstream never saw (a connect failure, a
/// refused HTTP/2 stream) whatever the method, any other only for idempotent requests (RFC 9110
/// §9.2.2); a body must be absent, held whole or kept as it streamed (within
/// `max_replay_bytes`) unless nothing of it was sent; within the cluster's retry budget and the request's deadline, and to another
/// endpoint when one exists.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RetryPolicy {
    pub retry_on: RetryOn,
    /// Retries after the first try (0: never retried); at most 10.
    pub num_retries: u32,
    /// Each try's own timeout (until the response head); `None`: adaptive when a timed-out try
    /// is retried ([`Self::adaptive`]), otherwise a try may use what is left of the route
    /// timeout. Never more than the route timeout.
    #[serde(serialize_with = "ser::opt_duration")]
    pub per_try_timeout: Option<Duration>,
    /// Statuses retried under `retriable-status-codes` (500..=599 only).
    pub retriable_status_codes: Vec<u16>,
    /// Full-jitter backoff before retry k (from 0): uniform in 0..min(max, base * 2^k).
    #[serde(serialize_with = "ser::duration")]
    pub backoff_base: Duration,
    #[serde(serialize_with = "ser::duration")]
    pub backoff_max: Duration,
    /// A request body up to this size is held (or, from an HTTP/2 client, kept as it streams)
    /// so that it can be sent again; larger bodies are retried only when nothing was sent
    /// (`connect-failure`).
    pub max_replay_bytes: u64,
}

impl RetryPolicy {
    /// Whether tries are cut by the adaptive per-try timeout: no `per_try_timeout` is set and a
    /// timed-out try is retried (`reset`, `gateway-error` or `5xx`). A try cut that way never
    /// takes more than [`Self::adaptive_cap`], and the last try has what remains of the route
    /// timeout, so the tries always fit it.
    pub fn adaptive(&self) -> bool {
        self.per_try_timeout.is_none() && self.num_retries > 0 && self.retry_on.covers_reset()
    }

    /// The longest adaptive per-try timeout on a route with timeout `route_timeout`.
    pub fn adaptive_cap(route_timeout: Duration) -> Duration {
        route_timeout / crate::defaults::ADAPTIVE_TRY_CAP_DIVISOR
    }

    /// The longest backoff before retry `k` (counted from 0).
    pub fn backoff_cap(&self, k: u32) -> Duration {
        let factor = 1u32.checked_shl(k.min(20)).unwrap_or(u32::MAX);
        self.backoff_base.saturating_mul(factor).min(self.backoff_max)
    }
}

/// The conditions a try is retried on (a set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryOn(u8);

impl RetryOn {
    /// The connection (TCP or TLS) could not be established: nothing was sent.
    pub const CONNECT_FAILURE: Self = Self(1);
    /// An HTTP/2 upstream refused the stream (REFUSED_STREAM, or GOAWAY above its id): not
    /// processed (RFC 9113 §8.7).
    pub const REFUSED_STREAM: Self = Self(2);
    /// The connection closed or reset, or the per-try timeout expired, before a response head
    /// (not a malformed response: that is `gateway-error`).
    pub const RESET: Self = Self(4);
    /// 502, 503 and 504 responses, a malformed response (the gateway's 502), and everything
    /// `connect-failure` and `reset` cover.
    pub const GATEWAY_ERROR: Self = Self(8);
    /// Any 5xx response, and everything `gateway-error` covers.
    pub const SERVER_ERROR: Self = Self(16);
    /// The statuses in `retriable_status_codes`.
    pub const RETRIABLE_STATUS_CODES: Self = Self(32);

    /// The names as written in the config, with their flags.
    pub const NAMES: [(&'static str, Self); 6] = [
        ("connect-failure", Self::CONNECT_FAILURE),
        ("refused-stream", Self::REFUSED_STREAM),
        ("reset", Self::RESET),
        ("gateway-error", Self::GATEWAY_ERROR),
        ("5xx", Self::SERVER_ERROR),
        ("retriable-status-codes", Self::RETRIABLE_STATUS_CODES),
    ];

    pub const fn empty() -> Self {
        Self(0)
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// Any condition that can only be detected after the request was (partly) sent, so that
    /// retrying needs the body again.
    pub const fn after_send(self) -> bool {
        self.0 & !(Self::CONNECT_FAILURE.0 | Self::REFUSED_STREAM.0) != 0
    }

    /// Whether a failure of this kind is retried.
    pub fn covers_connect_failure(self) -> bool {
        self.0 & (Self::CONNECT_FAILURE.0 | Self::GATEWAY_ERROR.0 | Self::SERVER_ERROR.0) != 0
    }

    pub fn covers_reset(self) -> bool {
        self.0 & (Self::RESET.0 | Self::GATEWAY_ERROR.0 | Self::SERVER_ERROR.0) != 0
    }

    pub fn covers_refused_stream(self) -> bool {
        self.0 & Self::REFUSED_STREAM.0 != 0 || self.covers_connect_failure()
    }

    /// Whether a response with `status` is retried (`listed`: the route's
    /// `retriable_status_codes`).
    pub fn covers_status(self, status: u16, listed: &[u16]) -> bool {
        (self.contains(Self::SERVER_ERROR) && (500..600).contains(&status))
            || (self.contains(Self::GATEWAY_ERROR) && matches!(status, 502..=504))
            || (self.contains(Self::RETRIABLE_STATUS_CODES) && listed.contains(&status))
    }
}

impl serde::Serialize for RetryOn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let names: Vec<&str> = Self::NAMES.iter().filter(|(_, f)| self.contains(*f)).map(|(n, _)| *n).collect();
        let mut seq = s.serialize_seq(Some(names.len()))?;
        for n in names {
            seq.serialize_element(n)?;
        }
        seq.end()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DirectResponse {
    pub status: u16,
    /// Field names are valid tokens, values contain no control characters.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// A redirect: each unset part keeps the request's own.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Redirect {
    /// 301, 302, 303, 307 or 308.
    pub status: u16,
    /// `http` or `https`.
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    /// Replaces the whole path (and drops the query unless `keep_query`).
    pub path: Option<String>,
    pub keep_query: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cluster {
    /// Unique name.
    pub name: String,
    /// The endpoints in use: every address of every configured endpoint (a host name yields
    /// all its addresses, each with the configured weight), each address once. Resolved at
    /// load; the gateway replaces this list as names re-resolve (see `dns_refresh`).
    pub endpoints: Vec<Endpoint>,
    /// The endpoints as written, in file order: what `endpoints` is resolved from.
    pub configured: Vec<ConfiguredEndpoint>,
    /// How often host-name endpoints are resolved again; `None` when every endpoint is an IP
    /// literal (never re-resolved).
    #[serde(serialize_with = "ser::opt_duration")]
    pub dns_refresh: Option<Duration>,
    pub balancer: Balancer,
    pub pool: PoolSettings,
    #[serde(serialize_with = "ser::duration")]
    pub connect_timeout: Duration,
    pub caps: Caps,
    pub adaptive_concurrency: AdaptiveConcurrency,
    pub retry_budget: RetryBudget,
    /// The HTTP version spoken to the endpoints; `Auto` only with `tls`.
    pub protocol: UpstreamProtocol,
    /// `None`: plain TCP to the endpoints.
    pub tls: Option<UpstreamTls>,
    /// Active health checks; `None`: off (every endpoint counts as healthy).
    pub health_check: Option<HealthCheck>,
    pub outlier_detection: OutlierDetection,
    pub all_unhealthy: AllUnhealthy,
    /// Set exactly when `balancer` is `Maglev`.
    pub hash_key: Option<HashKey>,
}

/// Circuit breakers, per worker: over a cap the gateway answers 503 (`x-gateway-reason:
/// overflow`) at once. All finite: from 1 to 1 000 000 (`max_retries` from 0 to 1000).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Caps {
    /// Upstream connections (idle and busy) to the whole cluster.
    pub max_connections: usize,
    /// Requests waiting for an upstream slot.
    pub max_pending: usize,
    /// Requests in flight to the cluster (also the ceiling of the adaptive limit).
    pub max_requests: usize,
    /// Retries in flight (used by the retry policy).
    pub max_retries: usize,
}

/// The in-flight limit that follows the upstream's measured latency (gradient controller): it
/// grows while latency stays near the no-load baseline and shrinks when it rises.
/// `1 <= min_limit <= initial_limit <= caps.max_requests`, whether enabled or not.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AdaptiveConcurrency {
    /// When false, the limit is `caps.max_requests`.
    pub enabled: bool,
    /// Starting and lowest limits.
    pub initial_limit: usize,
    pub min_limit: usize,
    /// Latency above `baseline * (1 + tolerance)` shrinks the limit. Above 0, at most 2.
    pub tolerance: f64,
    /// How often the no-load baseline is re-measured (briefly halving the limit); 1s to 1h.
    #[serde(serialize_with = "ser::duration")]
    pub probe_interval: Duration,
}

/// How many retries a cluster takes, per worker. Below `min_concurrent` retries in flight a
/// retry is always allowed; above it, retries in flight stay below `percent` of the requests in
/// flight to the cluster, and retries made stay below `percent` of the requests made (plus a
/// small bank earned before an outage). `caps.max_retries` bounds everything. A retry counts
/// from its backoff until its try ends.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RetryBudget {
    /// From 0 to 100.
    pub percent: f64,
    /// From 0 to `caps.max_retries`.
    pub min_concurrent: usize,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Endpoint {
    /// As written in the file (`host:port`), for logs and stats; the addresses of one host
    /// name share it.
    pub name: String,
    /// One address of `name`.
    pub address: SocketAddr,
    /// At least 1 (the configured endpoint's).
    pub weight: u32,
}

impl Endpoint {
    /// The key consistent hashing places this endpoint by: the name as written for an IP
    /// literal, the address for one of a host name's addresses (so that every gateway
    /// resolving the same addresses builds the same table).
    pub fn hash_key(&self) -> std::borrow::Cow<'_, str> {
        if self.name.parse::<SocketAddr>().is_ok() {
            std::borrow::Cow::Borrowed(&self.name)
        } else {
            std::borrow::Cow::Owned(self.address.to_string())
        }
    }
}

/// One endpoint as written in the file.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConfiguredEndpoint {
    /// `host:port` as written.
    pub name: String,
    /// At least 1.
    pub weight: u32,
    /// A host name (re-resolved every `dns_refresh`), not an IP literal.
    pub is_name: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Balancer {
    /// Power of two random choices on least outstanding requests (the default).
    P2c,
    /// Smooth weighted round robin.
    RoundRobin,
    /// Power of two choices on latency: peak-sensitive EWMA of response time x (outstanding + 1).
    PeakEwma,
    /// Maglev consistent hashing on `hash_key` (requests without the key use p2c).
    Maglev,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PoolSettings {
    /// Idle keep-alive connections kept per endpoint per worker.
    pub max_idle_per_endpoint: usize,
    /// An idle pooled connection older than this is closed instead of reused.
    #[serde(serialize_with = "ser::duration")]
    pub idle_timeout: Duration,
}

impl serde::Serialize for Workers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Workers::Auto => s.serialize_str("auto"),
            Workers::Fixed(n) => s.serialize_u64(n.get() as u64),
        }
    }
}

/// Serialization helpers: the JSON form of a config is what the admin port shows.
mod ser {
    use std::ops::RangeInclusive;
    use std::time::Duration;

    /// Status ranges as `"200-399"`, single codes as `"204"`.
    pub fn status_ranges<S: serde::Serializer>(v: &[RangeInclusive<u16>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|r| {
            if r.start() == r.end() {
                r.start().to_string()
            } else {
                format!("{}-{}", r.start(), r.end())
            }
        }))
    }

    /// Durations as the config writes them: `"250ms"`, `"15s"`.
    pub fn duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::units::show_duration(*d))
    }

    pub fn opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => duration(d, s),
            None => s.serialize_none(),
        }
    }

    /// Secrets: whether one is set, never its value.
    pub fn redacted<S: serde::Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(_) => s.serialize_str("<redacted>"),
            None => s.serialize_none(),
        }
    }
}
