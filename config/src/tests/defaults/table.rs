//! For every key whose default `full.toml` states: a config that leaves the key out (its
//! enclosing table present), and how to read the model's value and write it as `full.toml`
//! does (see `super::canonical` for the form: durations `"30s"`, sizes in bytes, strings
//! quoted, `none` for an absent optional value; words for a described default).

use crate::model::*;
use crate::units::show_duration;

/// The parts of a minimal config (one listener `l`, one route `r`, one cluster `c`): each is
/// added to its section; `route` holds the route's action.
#[derive(Clone, Copy)]
pub struct Given {
    /// Top-level tables (`[server.limits]`, `[overload]`), written before the listener.
    pub top: &'static str,
    pub listener: &'static str,
    pub route: &'static str,
    pub endpoints: &'static str,
    pub cluster: &'static str,
    /// Appended at the end (more clusters).
    pub extra: &'static str,
}

pub struct Entry {
    pub key: &'static str,
    pub given: Given,
    pub read: fn(&Config) -> String,
}

pub const G: Given =
    Given { top: "", listener: "", route: "cluster = \"c\"", endpoints: "[\"127.0.0.1:1\"]", cluster: "", extra: "" };
const SERVER: Given = Given { top: "[server]", ..G };
const LIMITS: Given = Given { top: "[server.limits]", ..G };
const TIMEOUTS: Given = Given { top: "[server.timeouts]", ..G };
const HTTP2: Given = Given { top: "[server.http2]", ..G };
const OVERLOAD: Given = Given { top: "[overload]", ..G };
const TLS: Given = Given { listener: "tls = { certificates = [{ cert = \"c.pem\", key = \"k.pem\" }] }", ..G };
pub fn e(key: &'static str, given: Given, read: fn(&Config) -> String) -> Entry {
    Entry { key, given, read }
}

pub fn entries() -> Vec<Entry> {
    vec![
        e("server.workers", SERVER, |c| match c.server.workers {
            Workers::Auto => q("auto"),
            Workers::Fixed(n) => n.to_string(),
        }),
        e("server.io_driver", SERVER, |c| q(json_name(&c.server.io_driver))),
        e("server.admin", SERVER, |c| match &c.server.admin {
            None => "false".to_owned(),
            Some(a) if a.token.is_none() => format!("{{ address = {} }}", q(&a.address.to_string())),
            Some(a) => format!("{{ address = {}, token = (set) }}", q(&a.address.to_string())),
        }),
        e("server.admin.per_worker_metrics", Given { top: "[server]\nadmin = { address = \"127.0.0.1:9901\" }", ..G }, |c| {
            c.server.admin.as_ref().map_or("admin off".to_owned(), |a| a.per_worker_metrics.to_string())
        }),
        e("server.drain_timeout", SERVER, |c| dur(c.server.drain_timeout)),
        e("server.drain_delay", SERVER, |c| {
            if c.server.drain_delay.is_zero() {
                "none".to_owned()
            } else {
                dur(c.server.drain_delay)
            }
        }),
        e("server.log_level", SERVER, |c| q(&c.server.log_level)),
        e("server.via", SERVER, |c| q(&c.server.via)),
        e("server.server_header", SERVER, |c| c.server.server_header.as_deref().map_or("unset".to_owned(), q)),
        e("server.watch", SERVER, |c| c.server.watch.to_string()),
        e("server.upgrade_socket", SERVER, |c| or_none(c.server.upgrade_socket.as_ref().map(|p| q(&p.display().to_string())))),
        e("server.hosts_file", SERVER, |c| or_none(c.server.hosts_file.as_ref().map(|p| q(&p.display().to_string())))),
        e("server.user", SERVER, |c| or_none(c.server.user.as_deref().map(q))),
        e("server.deadline_header", SERVER, |c| or_none(c.server.deadline_header.as_deref().map(q))),
        e("server.access_log", SERVER, |c| or_none(c.server.access_log.as_ref().map(|_| "(on)".to_owned()))),
        e("server.access_log.buffer_lines", Given { top: "[server.access_log]\nformat = \"json\"\npath = \"stdout\"", ..G }, |c| {
            c.server.access_log.as_ref().map_or("none".to_owned(), |a| a.buffer_lines.to_string())
        }),
        e("server.limits.max_request_line_bytes", LIMITS, |c| c.server.limits.max_request_line_bytes.to_string()),
        e("server.limits.max_header_bytes", LIMITS, |c| c.server.limits.max_header_bytes.to_string()),
        e("server.limits.max_headers", LIMITS, |c| c.server.limits.max_headers.to_string()),
        e("server.limits.max_body_bytes", LIMITS, |c| c.server.limits.max_body_bytes.to_string()),
        e("server.limits.max_response_header_bytes", LIMITS, |c| c.server.limits.max_response_header_bytes.to_string()),
        e("server.limits.max_connections_per_worker", LIMITS, |c| c.server.limits.max_connections_per_worker.to_string()),
        e("server.timeouts.header_read", TIMEOUTS, |c| dur(c.server.timeouts.header_read)),
        e("server.timeouts.idle", TIMEOUTS, |c| dur(c.server.timeouts.idle)),
        e("server.timeouts.body_io", TIMEOUTS, |c| dur(c.server.timeouts.body_io)),
        e("server.http2.max_concurrent_streams", HTTP2, |c| c.server.http2.max_concurrent_streams.to_string()),
        e("server.http2.max_header_list_bytes", HTTP2, |c| c.server.http2.max_header_list_bytes.to_string()),
        e("server.http2.initial_stream_window_bytes", HTTP2, |c| c.server.http2.initial_stream_window_bytes.to_string()),
        e("server.http2.initial_connection_window_bytes", HTTP2, |c| {
            c.server.http2.initial_connection_window_bytes.to_string()
        }),
        e("server.http2.max_frame_bytes", HTTP2, |c| c.server.http2.max_frame_bytes.to_string()),
        e("server.http2.flood_window", HTTP2, |c| dur(c.server.http2.flood_window)),
        e("server.http2.max_resets", HTTP2, |c| c.server.http2.max_resets.to_string()),
        e("server.http2.max_control_frames", HTTP2, |c| c.server.http2.max_control_frames.to_string()),
        e("server.http2.max_empty_frames", HTTP2, |c| c.server.http2.max_empty_frames.to_string()),
        e("server.http2.stall_timeout", HTTP2, |c| dur(c.server.http2.stall_timeout)),
        e("overload.enabled", OVERLOAD, |c| c.overload.enabled.to_string()),
        e("overload.classes", OVERLOAD, |c| list(c.overload.classes.iter().map(|s| q(s)))),
        e("overload.default_class", OVERLOAD, |c| {
            c.overload.classes.get(c.overload.default_class).map_or("(out of range)".to_owned(), |s| q(s))
        }),
        e("overload.priority_header", OVERLOAD, |c| or_none(c.overload.priority_header.as_deref().map(q))),
        e("overload.trusted_sources", OVERLOAD, |c| {
            let nets = c.overload.trusted_sources.iter().map(|n| q(&format!("{}/{}", n.network, n.prefix_len)));
            if c.overload.trusted_sources.is_empty() {
                "none".to_owned()
            } else {
                list(nets)
            }
        }),
        e("overload.trusted_identities", OVERLOAD, |c| {
            if c.overload.trusted_identities.is_empty() {
                "none".to_owned()
            } else {
                format!("{:?}", c.overload.trusted_identities)
            }
        }),
        e("overload.queue_wait_factor", OVERLOAD, |c| c.overload.queue_wait_factor.to_string()),
        e("overload.first_class_reserve", OVERLOAD, |c| c.overload.first_class_reserve.to_string()),
        e("overload.queue_delay_target", OVERLOAD, |c| dur(c.overload.queue_delay_target)),
        e("overload.queue_delay_interval", OVERLOAD, |c| dur(c.overload.queue_delay_interval)),
        e("listeners[].backlog", G, |c| c.listeners[0].backlog.to_string()),
        e("listeners[].proxy_protocol", G, |c| {
            q(match c.listeners[0].proxy_protocol {
                ProxyProtocol::Off => "off",
                ProxyProtocol::V1 => "v1",
                ProxyProtocol::V2 => "v2",
                ProxyProtocol::Any => "any",
                ProxyProtocol::Optional => "optional",
            })
        }),
        e("listeners[].proxy_protocol_timeout", G, |c| dur(c.listeners[0].proxy_protocol_timeout)),
        e("listeners[].trusted_proxies", G, |c| list(c.listeners[0].trusted_proxies.iter().map(|n| q(&format!("{n:?}"))))),
        e("listeners[].forwarded", G, |c| c.listeners[0].forwarded.to_string()),
        e("listeners[].protocols (without tls)", G, |c| protocols(&c.listeners[0])),
        e("listeners[].protocols (with tls)", TLS, |c| protocols(&c.listeners[0])),
        e("listeners[].tls.unknown_sni", TLS, |c| q(json_name(&tls(c).unknown_sni))),
        e("listeners[].tls.min_version", TLS, |c| q(json_name(&tls(c).min_version))),
        e("listeners[].tls.handshake_timeout", TLS, |c| dur(tls(c).handshake_timeout)),
        e("listeners[].tls.session_tickets", TLS, |c| tls(c).session_tickets.to_string()),
        e("listeners[].tls.session_cache", TLS, |c| tls(c).session_cache.to_string()),
        e("listeners[].tls.session_ticket_keys", TLS, |c| {
            list(tls(c).session_ticket_keys.iter().map(|p| q(&p.display().to_string())))
        }),
        e("listeners[].tls.client_auth", TLS, |c| or_none(tls(c).client_auth.as_ref().map(|a| q(json_name(&a.mode))))),
        e(
            "listeners[].tls.client_auth.mode",
            Given {
                listener: "tls = { certificates = [{ cert = \"c.pem\", key = \"k.pem\" }], client_auth = { ca = \"ca.pem\" } }",
                ..G
            },
            |c| or_none(tls(c).client_auth.as_ref().map(|a| q(json_name(&a.mode)))),
        ),
        e("listeners[].tls.identity_header", TLS, |c| q(&tls(c).identity_header)),
    ]
    .into_iter()
    .chain(super::table_routes::entries())
    .collect()
}

pub fn q(s: &str) -> String {
    format!("\"{s}\"")
}

/// A duration as the file writes it, quoted: `"30s"`.
pub fn dur(d: std::time::Duration) -> String {
    q(&show_duration(d))
}

pub fn or_none(v: Option<String>) -> String {
    v.unwrap_or_else(|| "none".to_owned())
}

pub fn list(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(", "))
}

/// The name of a model enum's value in the config file.
pub fn json_name<T: Named>(v: &T) -> &'static str {
    v.name()
}

pub trait Named {
    fn name(&self) -> &'static str;
}

macro_rules! named {
    ($($t:ty { $($v:pat => $n:literal),+ })+) => {
        $(impl Named for $t {
            fn name(&self) -> &'static str {
                match self { $($v => $n),+ }
            }
        })+
    };
}

named! {
    IoDriver { IoDriver::Auto => "auto", IoDriver::IoUring => "io_uring", IoDriver::Epoll => "epoll" }
    UnknownSni { UnknownSni::Default => "default", UnknownSni::Refuse => "refuse" }
    TlsVersion { TlsVersion::Tls12 => "1.2", TlsVersion::Tls13 => "1.3" }
    ClientAuthMode { ClientAuthMode::Required => "required", ClientAuthMode::Optional => "optional" }
    Protocol { Protocol::Http1 => "http/1.1", Protocol::H2 => "h2" }
    UpstreamProtocol { UpstreamProtocol::Http1 => "http/1.1", UpstreamProtocol::H2 => "h2", UpstreamProtocol::Auto => "auto" }
    Balancer {
        Balancer::P2c => "p2c", Balancer::RoundRobin => "round_robin", Balancer::PeakEwma => "peak_ewma",
        Balancer::Maglev => "maglev"
    }
    AllUnhealthy { AllUnhealthy::Fail => "fail", AllUnhealthy::Panic => "panic" }
    RateLimitScope { RateLimitScope::Worker => "worker", RateLimitScope::Process => "process" }
    RateLimitMode { RateLimitMode::Reject => "reject", RateLimitMode::Delay { .. } => "delay" }
}

fn protocols(l: &Listener) -> String {
    list(l.protocols.iter().map(|p| q(json_name(p))))
}

fn tls(c: &Config) -> &ListenerTls {
    c.listeners[0].tls.as_ref().expect("a TLS listener")
}
