//! `[[clusters]]`: endpoints (resolved once, here), balancer, pool, connect timeout, caps,
//! adaptive concurrency, protocol and TLS; health checks and outlier detection in `health`.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Balancer, Cluster, Endpoint, PoolSettings, UpstreamProtocol, UpstreamTls};
use crate::problems::Problems;
use crate::raw::{RawCluster, RawEndpoint, RawUpstreamTls};
use crate::sections::Parsed;

use super::fields::{check_name, choice, duration, int_in};
use super::{check_unique_names, names, PLACEHOLDER_ADDRESS};
use super::{concurrency, health, tls};

/// Converts every cluster, resolving each endpoint with the system resolver; relative file
/// paths are resolved against `base`.
pub(super) fn convert(
    raw: &[Parsed<RawCluster>],
    base: Option<&Path>,
    classes_named: bool,
    p: &mut Problems<'_>,
) -> Vec<Cluster> {
    check_unique_names(&names(raw, |c| &c.name), "clusters", p);
    let section = KeyPath::root().key("clusters");
    let mut out = Vec::with_capacity(raw.len());
    for (i, cluster) in raw.iter().enumerate() {
        let Some(c) = cluster.ok() else { continue };
        let path = section.index(i);
        check_name(p, &path.key("name"), &c.name);
        if c.endpoints.is_empty() {
            p.at(&path.key("endpoints"), "cluster has no endpoints: add at least one \"host:port\" to `endpoints`");
        }
        let mut endpoints: Vec<Endpoint> = Vec::with_capacity(c.endpoints.len());
        for (j, raw_endpoint) in c.endpoints.iter().enumerate() {
            let at = path.key("endpoints").index(j);
            let endpoint = endpoint(raw_endpoint, p, &at);
            let duplicate = endpoints.iter().position(|e| e.address == endpoint.address);
            if let (Some(k), false) = (duplicate, endpoint.address == PLACEHOLDER_ADDRESS) {
                p.at(
                    &at,
                    format!(
                        "endpoint {:?} resolves to {}, like endpoints[{k}] ({:?}): list each endpoint once and use `weight`",
                        endpoint.name, endpoint.address, endpoints.get(k).map_or("", |e| e.name.as_str())
                    ),
                );
            }
            endpoints.push(endpoint);
        }
        let pool_path = path.key("pool");
        let caps_path = path.key("caps");
        let caps = concurrency::caps(&c.caps, p, &caps_path);
        let adaptive_concurrency = concurrency::adaptive(
            &c.adaptive_concurrency,
            &caps,
            &c.caps,
            p,
            &path.key("adaptive_concurrency"),
            &caps_path,
            classes_named,
        );
        let retry_budget = super::retry::budget(&c.retry_budget, &caps, p, &path.key("retry_budget"));
        let tls = c.tls.as_ref().map(|t| upstream_tls(t, &c.endpoints, base, p, &path.key("tls")));
        let protocol = choice(
            p,
            &path.key("protocol"),
            c.protocol.as_ref(),
            &[("http/1.1", UpstreamProtocol::Http1), ("h2", UpstreamProtocol::H2), ("auto", UpstreamProtocol::Auto)],
            defaults::UPSTREAM_PROTOCOL,
        );
        if protocol == UpstreamProtocol::Auto && c.tls.is_none() {
            p.at(
                &path.key("protocol"),
                "protocol \"auto\" lets ALPN choose, which needs TLS: set `tls`, or choose \"http/1.1\" or \"h2\"",
            );
        }
        let balancer = choice(
            p,
            &path.key("balancer"),
            c.balancer.as_ref(),
            &[
                ("p2c", Balancer::P2c),
                ("round_robin", Balancer::RoundRobin),
                ("peak_ewma", Balancer::PeakEwma),
                ("maglev", Balancer::Maglev),
            ],
            defaults::BALANCER,
        );
        let resilience = health::convert(c, balancer, p, &path);
        out.push(Cluster {
            name: c.name.clone(),
            endpoints,
            balancer,
            pool: PoolSettings {
                max_idle_per_endpoint: int_in(
                    p,
                    &pool_path.key("max_idle_per_endpoint"),
                    c.pool.max_idle_per_endpoint,
                    0..=i64::from(u32::MAX),
                    defaults::POOL_MAX_IDLE_PER_ENDPOINT,
                ),
                idle_timeout: duration(
                    p,
                    &pool_path.key("idle_timeout"),
                    c.pool.idle_timeout.as_ref(),
                    defaults::POOL_IDLE_TIMEOUT,
                ),
            },
            connect_timeout: duration(
                p,
                &path.key("connect_timeout"),
                c.connect_timeout.as_ref(),
                defaults::CONNECT_TIMEOUT,
            ),
            caps,
            adaptive_concurrency,
            retry_budget,
            protocol,
            tls,
            health_check: resilience.health_check,
            outlier_detection: resilience.outlier_detection,
            all_unhealthy: resilience.all_unhealthy,
            hash_key: resilience.hash_key,
        });
    }
    out
}

/// `tls`: the CA file, and the SNI name (by default the endpoints' common host name).
fn upstream_tls(
    raw: &RawUpstreamTls,
    endpoints: &[RawEndpoint],
    base: Option<&Path>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> UpstreamTls {
    let ca = tls::file(&raw.ca, base, p, &path.key("ca"));
    let sni = match &raw.sni {
        Some(text) => tls::sni_name(text).unwrap_or_else(|message| {
            p.at(&path.key("sni"), format!("invalid sni: {message}"));
            String::new()
        }),
        None => default_sni(endpoints).unwrap_or_else(|message| {
            p.at(path, message);
            String::new()
        }),
    };
    UpstreamTls { sni, ca }
}

/// The host name all endpoints share: the name the upstream certificates are verified against
/// when `sni` is not set.
fn default_sni(endpoints: &[RawEndpoint]) -> Result<String, String> {
    let mut name: Option<String> = None;
    for endpoint in endpoints {
        let host = endpoint.address.rsplit_once(':').map_or(endpoint.address.as_str(), |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.parse::<IpAddr>().is_ok() {
            return Err(format!(
                "set tls.sni: endpoint {:?} is an IP address, and the upstream certificate is verified \
                 against the SNI name, which must be a DNS name",
                endpoint.address
            ));
        }
        let host = host.to_ascii_lowercase();
        match &name {
            Some(first) if *first != host => {
                return Err(format!(
                    "set tls.sni: the endpoints have different host names ({first:?} and {host:?}), and one \
                     name is sent as SNI and verified in every upstream certificate"
                ))
            }
            Some(_) => {}
            None => name = Some(host),
        }
    }
    // No endpoints at all is reported on `endpoints`.
    match name {
        Some(host) => {
            tls::sni_name(&host).map_err(|e| format!("set tls.sni: the endpoints' host is not a usable SNI name: {e}"))
        }
        None => Ok(String::new()),
    }
}

fn endpoint(raw: &RawEndpoint, p: &mut Problems<'_>, path: &KeyPath) -> Endpoint {
    let weight =
        int_in(p, &path.key("weight"), raw.weight, 1..=defaults::MAX_ENDPOINT_WEIGHT, defaults::ENDPOINT_WEIGHT);
    let address = resolve(&raw.address).unwrap_or_else(|message| {
        // Point at `address` in the table form, at the string itself otherwise.
        let at = if raw.is_table { path.key("address") } else { path.clone() };
        p.at(&at, message);
        PLACEHOLDER_ADDRESS
    });
    Endpoint { name: raw.address.clone(), address, weight }
}

/// Resolves `host:port` once and keeps the first address.
fn resolve(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return usable(text, address);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "invalid endpoint {text:?}: expected host:port, e.g. \"10.0.0.7:8080\" or \"origin.internal:80\""
        ));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("invalid endpoint {text:?}: expected host:port with a port from 1 to 65535"));
    }
    let mut addresses = text.to_socket_addrs().map_err(|e| format!("cannot resolve endpoint {text:?}: {e}"))?;
    let address = addresses.next().ok_or_else(|| format!("endpoint {text:?} resolved to no address"))?;
    usable(text, address)
}

fn usable(text: &str, address: SocketAddr) -> Result<SocketAddr, String> {
    if address.port() == 0 {
        return Err(format!("endpoint {text:?}: port 0 cannot be connected to"));
    }
    if address.ip().is_unspecified() || address.ip().is_multicast() {
        return Err(format!("endpoint {text:?}: {} cannot be connected to", address.ip()));
    }
    Ok(address)
}
