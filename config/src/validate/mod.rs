//! Raw sections -> the validated [`Config`]: every problem is recorded, none stops the others
//! from being checked.

mod cidr;
mod clusters;
mod concurrency;
mod edits;
mod fields;
mod headers;
mod health;
mod http2;
mod listeners;
mod overload;
mod ratelimit;
mod retry;
mod routes;
#[cfg(test)]
mod tests;
mod tls;
mod traffic;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::Path;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{AccessLog, AccessLogFormat, AccessLogTarget, Timeouts, Workers};
use crate::model::{Admin, Config, IoDriver, Limits, Listener, Server};
use crate::problems::Problems;
use crate::raw::{IntOrStr, RawAdmin, RawOverload, RawServer};
use crate::sections::{Parsed, RawConfig};

use fields::{choice, duration, int_in, is_field_value, is_token, size, size_usize};

/// Stands in for an address that did not parse (the config is rejected anyway).
const PLACEHOLDER_ADDRESS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// Converts the raw sections; relative file paths are resolved against `base` when given. The
/// result is meaningful only when `p` holds no problem.
pub(crate) fn convert(raw: &RawConfig, base: Option<&Path>, p: &mut Problems<'_>) -> Config {
    let server_path = KeyPath::root().key("server");
    let server = match raw.server.ok() {
        Some(raw_server) => convert_server(raw_server, base, p, &server_path),
        None => convert_server(&RawServer::default(), base, p, &server_path),
    };
    let listeners = match &raw.listeners {
        Some(listeners) => listeners::convert(listeners, base, p),
        None => Vec::new(),
    };
    if let (Some(admin), Parsed::Ok(_)) = (&server.admin, &raw.server) {
        admin_conflicts(admin, &listeners, p);
    }
    let raw_clusters = raw.clusters.as_deref().unwrap_or_default();
    // Classes are in use when a route names one or a priority header can: then the adaptive
    // limit is on unless a cluster says otherwise.
    let classes_named =
        raw.routes.as_deref().unwrap_or_default().iter().any(|r| r.ok().is_some_and(|r| r.priority.is_some()))
            || raw.overload.ok().is_some_and(|o| o.priority_header.is_some());
    let clusters = clusters::convert(raw_clusters, base, server.hosts_file.as_deref(), classes_named, p);
    let overload_path = KeyPath::root().key("overload");
    let overload = match raw.overload.ok() {
        Some(raw_overload) => overload::convert(raw_overload, p, &overload_path),
        None => overload::convert(&RawOverload::default(), p, &overload_path),
    };
    // When `clusters` is malformed or `[overload]` is broken or has no classes (already
    // reported), references to them are not checked.
    let cluster_names = raw.clusters.as_ref().map(|c| names(c, |c| &c.name));
    let refs = routes::Refs {
        clusters: cluster_names.as_deref(),
        classes: raw.overload.ok().map(|_| overload.classes.as_slice()).filter(|c| !c.is_empty()),
        default_class: overload.default_class,
    };
    let mut routes = routes::convert(raw.routes.as_deref().unwrap_or_default(), &refs, p);
    traffic::convert(raw.routes.as_deref().unwrap_or_default(), &mut routes, &clusters, refs.clusters, p);
    Config { server, listeners, routes, clusters, overload }
}

/// Names of all elements in file order (`None` for a broken element without a readable name).
fn names<T>(elements: &[Parsed<T>], name: impl Fn(&T) -> &String) -> Vec<Option<String>> {
    elements
        .iter()
        .map(|e| match e {
            Parsed::Ok(value) => Some(name(value).clone()),
            Parsed::Broken { name } => name.clone(),
        })
        .collect()
}

/// Records a problem for every name already used by an earlier element.
fn check_unique_names(names: &[Option<String>], section: &str, p: &mut Problems<'_>) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        let Some(name) = name else { continue };
        if let Some(earlier) = first.get(name.as_str()) {
            p.at(
                &KeyPath::root().key(section).index(i).key("name"),
                format!("duplicate name {name:?} (already used by {section}[{earlier}])"),
            );
        } else {
            first.insert(name, i);
        }
    }
}

fn convert_server(raw: &RawServer, base: Option<&Path>, p: &mut Problems<'_>, path: &KeyPath) -> Server {
    let workers = match &raw.workers {
        None => defaults::WORKERS,
        Some(IntOrStr::Str(s)) if s == "auto" => Workers::Auto,
        Some(value) => {
            let n = match value {
                IntOrStr::Int(n) if (1..=defaults::MAX_WORKERS).contains(n) => {
                    usize::try_from(*n).ok().and_then(NonZeroUsize::new)
                }
                _ => None,
            };
            n.map(Workers::Fixed).unwrap_or_else(|| {
                let max = defaults::MAX_WORKERS;
                p.at(&path.key("workers"), format!("workers must be \"auto\" or an integer from 1 to {max}"));
                defaults::WORKERS
            })
        }
    };
    let io_driver = choice(
        p,
        &path.key("io_driver"),
        raw.io_driver.as_ref(),
        &[("auto", IoDriver::Auto), ("io_uring", IoDriver::IoUring), ("epoll", IoDriver::Epoll)],
        defaults::IO_DRIVER,
    );
    let log_level = raw.log_level.clone().unwrap_or_else(|| defaults::LOG_LEVEL.to_owned());
    if log_level.trim().is_empty() || !is_field_value(&log_level) {
        p.at(
            &path.key("log_level"),
            "log_level must be a non-empty tracing filter such as \"info\" or \"gateway=debug,info\"",
        );
    }
    let via = raw.via.clone().unwrap_or_else(|| defaults::VIA.to_owned());
    if !is_token(&via) {
        p.at(
            &path.key("via"),
            format!("via {via:?} must be a token (letters, digits and !#$%&'*+-.^_`|~), e.g. \"gateway\""),
        );
    }
    let timeouts = timeouts(raw, p, &path.key("timeouts"));
    Server {
        workers,
        io_driver,
        admin: admin(raw.admin.as_ref(), p, &path.key("admin")),
        drain_timeout: duration(p, &path.key("drain_timeout"), raw.drain_timeout.as_ref(), defaults::DRAIN_TIMEOUT),
        drain_delay: duration(p, &path.key("drain_delay"), raw.drain_delay.as_ref(), defaults::DRAIN_DELAY),
        log_level,
        via,
        server_header: headers::server_header(raw.server_header.as_ref(), p, &path.key("server_header")),
        watch: raw.watch.unwrap_or(defaults::WATCH),
        deadline_header: raw.deadline_header.as_ref().map(|name| {
            let lower = name.to_ascii_lowercase();
            if !is_token(name) {
                p.at(&path.key("deadline_header"), format!("invalid header name {name:?}"));
            } else if overload::RESERVED_HEADERS.contains(&lower.as_str()) || lower == "grpc-timeout" {
                p.at(
                    &path.key("deadline_header"),
                    format!("{name} cannot carry a deadline (grpc-timeout is always honoured): choose another name, e.g. \"x-request-deadline-ms\""),
                );
            }
            lower
        }),
        upgrade_socket: raw.upgrade_socket.as_ref().and_then(|text| {
            let file = std::path::PathBuf::from(text);
            if file.is_absolute() {
                Some(file)
            } else {
                let message = format!("{text:?} must be an absolute path, e.g. \"/run/gateway/upgrade.sock\"");
                p.at(&path.key("upgrade_socket"), message);
                None
            }
        }),
        hosts_file: raw.hosts_file.as_ref().map(|text| {
            let file = tls::file(text, base, p, &path.key("hosts_file"));
            if let Err(e) = std::fs::read_to_string(&file) {
                p.at(&path.key("hosts_file"), format!("cannot read {}: {e}", file.display()));
            }
            file
        }),
        user: account_name(p, &path.key("user"), raw.user.as_ref()),
        group: match (&raw.group, &raw.user) {
            (Some(_), None) => {
                p.at(&path.key("group"), "group needs server.user (the user to switch to)");
                None
            }
            (group, _) => account_name(p, &path.key("group"), group.as_ref()),
        },
        access_log: raw.access_log.as_ref().and_then(|a| access_log(a, p, &path.key("access_log"))),
        limits: limits(raw, p, &path.key("limits")),
        http2: http2::convert(&raw.http2, p, &path.key("http2"), timeouts.body_io),
        timeouts,
    }
}

/// A user or group name as `useradd` accepts it: 1 to 32 of `[A-Za-z0-9_.-]` (plus a final
/// `$`), not starting with `-`; purely numeric names are refused (they read like ids).
fn account_name(p: &mut Problems<'_>, path: &KeyPath, raw: Option<&String>) -> Option<String> {
    let name = raw?;
    let body = name.strip_suffix('$').unwrap_or(name);
    let valid = (1..=32).contains(&name.len())
        && !body.is_empty()
        && !name.starts_with('-')
        && !body.bytes().all(|b| b.is_ascii_digit())
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        p.at(path, format!("{name:?} is not a user or group name (letters, digits, '_', '.', '-'; not numeric)"));
        return None;
    }
    Some(name.clone())
}

fn admin(raw: Option<&RawAdmin>, p: &mut Problems<'_>, path: &KeyPath) -> Option<Admin> {
    let table = match raw {
        None => return Some(Admin { address: defaults::ADMIN_ADDRESS, token: None, per_worker_metrics: false }),
        Some(RawAdmin::Disabled) => return None,
        Some(RawAdmin::Enabled(table)) => table,
    };
    let address = match &table.address {
        None => defaults::ADMIN_ADDRESS,
        Some(text) => socket_addr(text, p, &path.key("address")).unwrap_or(defaults::ADMIN_ADDRESS),
    };
    if let Some(token) = &table.token {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            p.at(&path.key("token"), "token must be non-empty printable ASCII without spaces");
        }
    }
    if !address.ip().is_loopback() && table.token.is_none() {
        p.at(&path.key("address"), format!("admin address {address} is not loopback: set server.admin.token"));
    }
    Some(Admin { address, token: table.token.clone(), per_worker_metrics: table.per_worker_metrics.unwrap_or(false) })
}

fn limits(raw: &RawServer, p: &mut Problems<'_>, path: &KeyPath) -> Limits {
    let l = &raw.limits;
    let limits = Limits {
        max_request_line_bytes: size_usize(
            p,
            &path.key("max_request_line_bytes"),
            l.max_request_line_bytes.as_ref(),
            defaults::MAX_REQUEST_LINE_BYTES,
        ),
        max_header_bytes: size_usize(
            p,
            &path.key("max_header_bytes"),
            l.max_header_bytes.as_ref(),
            defaults::MAX_HEADER_BYTES,
        ),
        max_headers: int_in(
            p,
            &path.key("max_headers"),
            l.max_headers,
            1..=defaults::MAX_HEADERS_LIMIT,
            defaults::MAX_HEADERS,
        ),
        max_body_bytes: size(p, &path.key("max_body_bytes"), l.max_body_bytes.as_ref(), defaults::MAX_BODY_BYTES),
        max_response_header_bytes: size_usize(
            p,
            &path.key("max_response_header_bytes"),
            l.max_response_header_bytes.as_ref(),
            defaults::MAX_RESPONSE_HEADER_BYTES,
        ),
        max_connections_per_worker: int_in(
            p,
            &path.key("max_connections_per_worker"),
            l.max_connections_per_worker,
            1..=i64::from(u32::MAX),
            defaults::MAX_CONNECTIONS_PER_WORKER,
        ),
    };
    if limits.max_request_line_bytes > limits.max_header_bytes {
        // Point at whichever of the two the operator wrote.
        let key = if l.max_request_line_bytes.is_some() { "max_request_line_bytes" } else { "max_header_bytes" };
        p.at(
            &path.key(key),
            format!(
            "max_request_line_bytes ({}) must not exceed max_header_bytes ({}): the request line is part of the head",
            limits.max_request_line_bytes, limits.max_header_bytes
        ),
        );
    }
    limits
}

fn access_log(raw: &crate::raw::RawAccessLog, p: &mut Problems<'_>, path: &KeyPath) -> Option<AccessLog> {
    let format = match raw.format.as_deref().unwrap_or("json") {
        "json" => AccessLogFormat::Json,
        "combined" => AccessLogFormat::Combined,
        other => {
            p.at(
                &path.key("format"),
                format!("unknown access log format {other:?} (expected \"json\" or \"combined\")"),
            );
            return None;
        }
    };
    let target = match raw.path.as_deref().unwrap_or("stdout") {
        "stdout" => AccessLogTarget::Stdout,
        "stderr" => AccessLogTarget::Stderr,
        file if file.starts_with('/') => AccessLogTarget::File(file.into()),
        other => {
            p.at(
                &path.key("path"),
                format!("access log path {other:?} must be \"stdout\", \"stderr\" or an absolute file path"),
            );
            return None;
        }
    };
    let buffer_lines =
        int_in(p, &path.key("buffer_lines"), raw.buffer_lines, 64..=1_048_576, defaults::ACCESS_LOG_BUFFER_LINES);
    Some(AccessLog { format, target, buffer_lines })
}

fn timeouts(raw: &RawServer, p: &mut Problems<'_>, path: &KeyPath) -> Timeouts {
    let t = &raw.timeouts;
    Timeouts {
        header_read: duration(p, &path.key("header_read"), t.header_read.as_ref(), defaults::HEADER_READ_TIMEOUT),
        idle: duration(p, &path.key("idle"), t.idle.as_ref(), defaults::IDLE_TIMEOUT),
        body_io: duration(p, &path.key("body_io"), t.body_io.as_ref(), defaults::BODY_IO_TIMEOUT),
    }
}

/// The admin listener must not bind an address a data-plane listener binds.
fn admin_conflicts(admin: &Admin, listeners: &[Listener], p: &mut Problems<'_>) {
    if admin.address.port() == 0 {
        return;
    }
    if let Some(l) = listeners.iter().find(|l| overlaps(l.address, admin.address)) {
        p.at(
            &KeyPath::root().key("server").key("admin").key("address"),
            format!("admin address {} overlaps listener {:?} ({})", admin.address, l.name, l.address),
        );
    }
}

/// Two bind addresses clash: same port, same family, and equal or one of them unspecified.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.is_ipv4() == b.is_ipv4()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// An `ip:port` literal (`127.0.0.1:8080`, `[::1]:8080`); host names are not accepted here.
fn socket_addr(text: &str, p: &mut Problems<'_>, path: &KeyPath) -> Option<SocketAddr> {
    match text.parse() {
        Ok(address) => Some(address),
        Err(_) => {
            p.at(path, format!("invalid address {text:?}: expected ip:port, e.g. \"0.0.0.0:8080\" or \"[::]:8080\""));
            None
        }
    }
}
