//! `[[clusters]]`: endpoints (resolved here to every address; re-resolved by the gateway), balancer, pool, connect timeout, caps,
//! adaptive concurrency, protocol and TLS; health checks and outlier detection in `health`.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::{Balancer, Cluster, ConfiguredEndpoint, Endpoint, PoolSettings, UpstreamProtocol, UpstreamTls};
use crate::problems::Problems;
use crate::raw::{RawCluster, RawEndpoint, RawUpstreamTls};
use crate::resolve::{resolve, Target};
use crate::sections::Parsed;

use super::fields::{check_name, choice, duration, int_in};
use super::{check_unique_names, names};
use super::{concurrency, health, tls};

/// Converts every cluster, resolving each host-name endpoint to all its addresses
/// (`hosts_file` first, then the system resolver); relative file paths are resolved against
/// `base`.
pub(super) fn convert(
    raw: &[Parsed<RawCluster>],
    base: Option<&Path>,
    hosts_file: Option<&Path>,
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
        let mut configured = Vec::with_capacity(c.endpoints.len());
        for (j, raw_endpoint) in c.endpoints.iter().enumerate() {
            let at = path.key("endpoints").index(j);
            let (spec, addresses) = endpoint(raw_endpoint, hosts_file, p, &at);
            for address in addresses {
                if let Some(k) = endpoints.iter().position(|e| e.address == address) {
                    p.at(
                        &at,
                        format!(
                            "endpoint {:?} resolves to {address}, like endpoints[{k}] ({:?}): list each endpoint once and use `weight`",
                            spec.name, endpoints.get(k).map_or("", |e| e.name.as_str())
                        ),
                    );
                }
                endpoints.push(Endpoint { name: spec.name.clone(), address, weight: spec.weight });
            }
            configured.push(spec);
        }
        let dns_refresh = if configured.iter().any(|e| e.is_name) {
            let refresh = duration(p, &path.key("dns_refresh"), c.dns_refresh.as_ref(), defaults::DNS_REFRESH);
            if !defaults::DNS_REFRESH_RANGE.contains(&refresh) {
                p.at(&path.key("dns_refresh"), format!("dns_refresh must be between 100ms and 1h, got {refresh:?}"));
            }
            Some(refresh)
        } else {
            if c.dns_refresh.is_some() && !c.endpoints.is_empty() {
                p.at(
                    &path.key("dns_refresh"),
                    "dns_refresh applies to endpoints given as host names, and every endpoint here is an IP address: remove it",
                );
            }
            None
        };
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
            configured,
            dns_refresh,
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

/// One configured endpoint and every address it resolves to now (none when it is invalid or
/// does not resolve, which is reported).
fn endpoint(
    raw: &RawEndpoint,
    hosts_file: Option<&Path>,
    p: &mut Problems<'_>,
    path: &KeyPath,
) -> (ConfiguredEndpoint, Vec<SocketAddr>) {
    let weight =
        int_in(p, &path.key("weight"), raw.weight, 1..=defaults::MAX_ENDPOINT_WEIGHT, defaults::ENDPOINT_WEIGHT);
    // Point at `address` in the table form, at the string itself otherwise.
    let at = if raw.is_table { path.key("address") } else { path.clone() };
    let is_name = Target::parse(&raw.address).is_ok_and(|t| t.is_name());
    let addresses = resolve(&raw.address, hosts_file).unwrap_or_else(|message| {
        p.at(&at, message);
        Vec::new()
    });
    (ConfiguredEndpoint { name: raw.address.clone(), weight, is_name }, addresses)
}
