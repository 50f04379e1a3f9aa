//! The pure part of re-resolution: one round's answers and the endpoints in use -> the new
//! endpoint set.

use std::net::SocketAddr;

use gateway_config::{ConfiguredEndpoint, Endpoint};

/// The endpoint set after a round: each configured endpoint in file order; an IP literal keeps
/// its address; a host name takes every address of its answer (`Some(Ok)`, never empty), each
/// with the configured weight; a name whose lookup failed (`Some(Err)`) or was not made
/// (`None`) keeps the addresses it has in `current` (its last good set). An address already
/// taken by an earlier endpoint is skipped (listing it twice would double its share).
/// `answers` is indexed like `configured`.
pub fn merge(
    configured: &[ConfiguredEndpoint],
    current: &[Endpoint],
    answers: &[Option<Result<Vec<SocketAddr>, String>>],
) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = Vec::with_capacity(current.len());
    for (i, spec) in configured.iter().enumerate() {
        let addresses: Vec<SocketAddr> = match answers.get(i) {
            Some(Some(Ok(found))) if spec.is_name && !found.is_empty() => found.clone(),
            _ => current.iter().filter(|e| e.name == spec.name).map(|e| e.address).collect(),
        };
        for address in addresses {
            if !out.iter().any(|e| e.address == address) {
                out.push(Endpoint { name: spec.name.clone(), address, weight: spec.weight });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(name: &str, weight: u32) -> ConfiguredEndpoint {
        ConfiguredEndpoint { name: name.into(), weight, is_name: name.parse::<SocketAddr>().is_err() }
    }

    fn ep(name: &str, address: &str, weight: u32) -> Endpoint {
        Endpoint { name: name.into(), address: address.parse().unwrap(), weight }
    }

    fn addrs(list: &[&str]) -> Option<Result<Vec<SocketAddr>, String>> {
        Some(Ok(list.iter().map(|a| a.parse().unwrap()).collect()))
    }

    #[test]
    fn a_name_takes_every_address_with_its_weight() {
        let configured = [spec("10.0.0.1:80", 1), spec("svc.test:80", 3)];
        let current = [ep("10.0.0.1:80", "10.0.0.1:80", 1), ep("svc.test:80", "10.1.0.1:80", 3)];
        let got = merge(&configured, &current, &[None, addrs(&["10.1.0.2:80", "10.1.0.3:80"])]);
        assert_eq!(
            got,
            [
                ep("10.0.0.1:80", "10.0.0.1:80", 1),
                ep("svc.test:80", "10.1.0.2:80", 3),
                ep("svc.test:80", "10.1.0.3:80", 3)
            ]
        );
    }

    #[test]
    fn a_failure_keeps_the_last_good_set() {
        let configured = [spec("a.test:80", 1), spec("b.test:80", 1)];
        let current =
            [ep("a.test:80", "10.0.0.1:80", 1), ep("a.test:80", "10.0.0.2:80", 1), ep("b.test:80", "10.0.0.3:80", 1)];
        let got = merge(&configured, &current, &[Some(Err("NXDOMAIN".into())), addrs(&["10.0.0.4:80"])]);
        assert_eq!(
            got,
            [ep("a.test:80", "10.0.0.1:80", 1), ep("a.test:80", "10.0.0.2:80", 1), ep("b.test:80", "10.0.0.4:80", 1)]
        );
        // An empty answer counts as a failure too.
        let got = merge(&configured, &current, &[addrs(&[]), None]);
        assert_eq!(got, current);
    }

    #[test]
    fn an_address_is_listed_once() {
        let configured = [spec("a.test:80", 2), spec("b.test:80", 1)];
        let current = [ep("a.test:80", "10.0.0.1:80", 2), ep("b.test:80", "10.0.0.2:80", 1)];
        let got = merge(&configured, &current, &[addrs(&["10.0.0.1:80"]), addrs(&["10.0.0.1:80", "10.0.0.5:80"])]);
        assert_eq!(got, [ep("a.test:80", "10.0.0.1:80", 2), ep("b.test:80", "10.0.0.5:80", 1)]);
        // b's name loses every address to a: it keeps none, and comes back on a later round.
        let got = merge(&configured, &got, &[None, addrs(&["10.0.0.1:80"])]);
        assert_eq!(got, [ep("a.test:80", "10.0.0.1:80", 2)]);
        let got = merge(&configured, &got, &[None, addrs(&["10.0.0.6:80"])]);
        assert_eq!(got, [ep("a.test:80", "10.0.0.1:80", 2), ep("b.test:80", "10.0.0.6:80", 1)]);
    }
}
