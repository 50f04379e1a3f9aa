//! Endpoint name resolution, shared by the config load (which validates the first answer) and
//! the gateway's resolver thread (which re-resolves names every `clusters[].dns_refresh`).
//!
//! A name is looked up in `server.hosts_file` first (an /etc/hosts-style file: `address name
//! [alias...]` per line, `#` starts a comment); a name the file does not list goes to the system
//! resolver (getaddrinfo: nsswitch, /etc/hosts, resolv.conf search domains). Every address of
//! the answer is returned, sorted (a DNS server that rotates its answers does not look like a
//! change), without duplicates and without addresses that cannot be connected to (unspecified,
//! multicast). getaddrinfo gives no TTL, so callers re-resolve on a fixed interval.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;

/// An endpoint as written: an IP literal (never re-resolved) or a host name and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Literal(SocketAddr),
    Name { host: String, port: u16 },
}

impl Target {
    /// Parses `"10.0.0.7:8080"`, `"[::1]:80"` or `"origin.internal:80"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Ok(address) = text.parse::<SocketAddr>() {
            return usable(text, address).map(Target::Literal);
        }
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(format!(
                "invalid endpoint {text:?}: expected host:port, e.g. \"10.0.0.7:8080\" or \"origin.internal:80\""
            ));
        };
        match port.parse::<u16>() {
            Ok(port) if !host.is_empty() && port != 0 => Ok(Target::Name { host: host.to_owned(), port }),
            Ok(0) => Err(format!("endpoint {text:?}: port 0 cannot be connected to")),
            _ => Err(format!("invalid endpoint {text:?}: expected host:port with a port from 1 to 65535")),
        }
    }

    /// Whether this endpoint is a host name (re-resolved), not an IP literal.
    pub fn is_name(&self) -> bool {
        matches!(self, Target::Name { .. })
    }
}

/// Every usable address of `text` (see the module docs); an error when there is none. Blocks
/// while the system resolver works: never call it on a worker.
pub fn resolve(text: &str, hosts_file: Option<&Path>) -> Result<Vec<SocketAddr>, String> {
    let (host, port) = match Target::parse(text)? {
        Target::Literal(address) => return Ok(vec![address]),
        Target::Name { host, port } => (host, port),
    };
    let from_file = match hosts_file {
        Some(file) => {
            let content =
                std::fs::read_to_string(file).map_err(|e| format!("cannot read hosts_file {}: {e}", file.display()))?;
            hosts_lookup(&content, &host)
        }
        None => Vec::new(),
    };
    let found: Vec<SocketAddr> = if from_file.is_empty() {
        (host.as_str(), port).to_socket_addrs().map_err(|e| format!("cannot resolve endpoint {text:?}: {e}"))?.collect()
    } else {
        from_file.into_iter().map(|ip| SocketAddr::new(ip, port)).collect()
    };
    let mut out: Vec<SocketAddr> = Vec::with_capacity(found.len());
    for address in found {
        if usable(text, address).is_ok() && !out.contains(&address) {
            out.push(address);
        }
    }
    if out.is_empty() {
        return Err(format!("endpoint {text:?} resolved to no usable address"));
    }
    out.sort_unstable();
    Ok(out)
}

/// The addresses an /etc/hosts-style `content` lists for `host` (case-insensitive), in file
/// order. Malformed lines are skipped.
pub fn hosts_lookup(content: &str, host: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in content.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(Ok(ip)) = fields.next().map(str::parse::<IpAddr>) else { continue };
        if fields.any(|name| name.eq_ignore_ascii_case(host)) && !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn hosts_file_lines() {
        let content = "# comment\n127.0.0.2 origin.test other\n\n127.0.0.3\tOrigin.Test # b\nbad line\n\
                       127.0.0.2 origin.test\n::1 v6.test origin.test\n";
        let found = hosts_lookup(content, "origin.test");
        let want: Vec<IpAddr> =
            vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap(), "::1".parse().unwrap()];
        assert_eq!(found, want);
        assert!(hosts_lookup(content, "missing.test").is_empty());
        assert!(hosts_lookup(content, "bad").is_empty());
    }

    #[test]
    fn targets() {
        assert_eq!(Target::parse("10.0.0.1:80").unwrap(), Target::Literal("10.0.0.1:80".parse().unwrap()));
        assert_eq!(Target::parse("[::1]:80").unwrap(), Target::Literal("[::1]:80".parse().unwrap()));
        assert_eq!(Target::parse("a.test:81").unwrap(), Target::Name { host: "a.test".into(), port: 81 });
        assert!(Target::parse("a.test").is_err());
        assert!(Target::parse("a.test:0").unwrap_err().contains("port 0"));
        assert!(Target::parse(":80").is_err());
        assert!(Target::parse("0.0.0.0:80").is_err());
    }

    #[test]
    fn resolves_through_the_hosts_file_first() {
        let dir = std::env::temp_dir().join(format!("gw-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hosts");
        std::fs::write(&file, "127.0.0.3 a.test\n127.0.0.2 a.test\n224.0.0.1 m.test\n").unwrap();
        let got = resolve("a.test:90", Some(&file)).unwrap();
        assert_eq!(got, vec!["127.0.0.2:90".parse().unwrap(), "127.0.0.3:90".parse::<SocketAddr>().unwrap()]);
        assert!(resolve("m.test:90", Some(&file)).unwrap_err().contains("no usable address"));
        // Not in the file: the system resolver answers.
        assert!(resolve("localhost:90", Some(&file)).is_ok());
        assert!(resolve("a.test:90", Some(&dir.join("missing"))).unwrap_err().contains("cannot read hosts_file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
