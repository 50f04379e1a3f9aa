//! Networks as operators write them: `10.0.0.0/8`, `2001:db8::/32`, or a bare address.

use std::net::IpAddr;

use crate::model::Cidr;

/// Parses `ip/prefix` or a bare `ip` (a single host: /32 or /128).
///
/// Rejected: a prefix longer than the address, a prefix that is not plain decimal digits
/// (`/+8`, `/ 8`), host bits set below the prefix (`10.0.0.1/8` is more likely a typo for a
/// single host than a wish to trust the whole /8), IPv4-mapped IPv6 networks (client
/// addresses in that form are matched against IPv4 networks, so such a network would never
/// match), zone ids and anything with spaces.
pub(super) fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let (address, prefix) = match text.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (text, None),
    };
    let network: IpAddr = address.parse().map_err(|_| {
        format!("invalid network {text:?}: expected an IP address or ip/prefix, e.g. \"10.0.0.0/8\" or \"::1/128\"")
    })?;
    let max: u8 = if network.is_ipv4() { 32 } else { 128 };
    let prefix_len = match prefix {
        None => max,
        Some(digits) => {
            let plain = !digits.is_empty() && digits.len() <= 3 && digits.bytes().all(|b| b.is_ascii_digit());
            match digits.parse::<u8>() {
                Ok(n) if plain && n <= max => n,
                _ => {
                    return Err(format!(
                        "invalid network {text:?}: the prefix length must be an integer from 0 to {max}"
                    ))
                }
            }
        }
    };
    if let IpAddr::V6(v6) = network {
        if let Some(v4) = v6.to_ipv4_mapped() {
            let v4_prefix = prefix_len.saturating_sub(96);
            return Err(format!(
                "invalid network {text:?}: IPv4-mapped clients are matched against IPv4 networks: write it as IPv4 (e.g. \"{v4}/{v4_prefix}\")"
            ));
        }
    }
    let cidr = Cidr { network, prefix_len };
    let masked = masked(cidr);
    if masked != network {
        return Err(format!(
            "invalid network {text:?}: host bits are set below /{prefix_len}: write \"{masked}/{prefix_len}\" for the network, or the bare address for one host"
        ));
    }
    Ok(cidr)
}

/// The network address of `cidr`: its address with every bit below the prefix cleared.
fn masked(cidr: Cidr) -> IpAddr {
    match cidr.network {
        IpAddr::V4(v4) => {
            let bits = u32::from(cidr.prefix_len.min(32));
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let bits = u32::from(cidr.prefix_len.min(128));
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cidr(text: &str) -> Cidr {
        parse_cidr(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn networks_and_bare_addresses() {
        assert_eq!(cidr("10.0.0.0/8"), Cidr { network: ip("10.0.0.0"), prefix_len: 8 });
        assert_eq!(cidr("127.0.0.1"), Cidr { network: ip("127.0.0.1"), prefix_len: 32 });
        assert_eq!(cidr("127.0.0.1/32"), Cidr { network: ip("127.0.0.1"), prefix_len: 32 });
        assert_eq!(cidr("0.0.0.0/0"), Cidr { network: ip("0.0.0.0"), prefix_len: 0 });
        assert_eq!(cidr("::1"), Cidr { network: ip("::1"), prefix_len: 128 });
        assert_eq!(cidr("::1/128"), Cidr { network: ip("::1"), prefix_len: 128 });
        assert_eq!(cidr("2001:DB8::/32"), Cidr { network: ip("2001:db8::"), prefix_len: 32 });
        assert_eq!(cidr("fd00::/8"), Cidr { network: ip("fd00::"), prefix_len: 8 });
        assert_eq!(cidr("::/0"), Cidr { network: ip("::"), prefix_len: 0 });
        assert_eq!(cidr("192.168.1.0/024"), Cidr { network: ip("192.168.1.0"), prefix_len: 24 });
    }

    #[test]
    fn bad_prefixes() {
        for (bad, hint) in [
            ("10.0.0.0/33", "from 0 to 32"),
            ("::/129", "from 0 to 128"),
            ("10.0.0.0/", "from 0 to 32"),
            ("10.0.0.0/-1", "from 0 to 32"),
            ("10.0.0.0/+8", "from 0 to 32"),
            ("10.0.0.0/ 8", "from 0 to 32"),
            ("10.0.0.0/8.0", "from 0 to 32"),
            ("10.0.0.0/0008", "from 0 to 32"),
            ("10.0.0.0/256", "from 0 to 32"),
            ("10.0.0.0/8/8", "from 0 to 32"),
            ("10.0.0.1/8", "host bits are set below /8: write \"10.0.0.0/8\""),
            ("2001:db8::1/32", "write \"2001:db8::/32\""),
            ("::ffff:10.0.0.0/104", "write it as IPv4 (e.g. \"10.0.0.0/8\")"),
            ("::ffff:127.0.0.1", "write it as IPv4 (e.g. \"127.0.0.1/32\")"),
        ] {
            let err = parse_cidr(bad).unwrap_err();
            assert!(err.contains(hint), "{bad:?}: {err}");
            assert!(err.starts_with(&format!("invalid network {bad:?}")), "{err}");
        }
    }

    #[test]
    fn garbage() {
        for bad in [
            "",
            "/8",
            "localhost",
            "10.0.0",
            "10.0.0.256",
            "10.0.0.0 /8",
            " 10.0.0.0/8",
            "[::1]",
            "[::1]/128",
            "fe80::1%eth0",
            "10.0.0.0:80",
            "*",
        ] {
            let err = parse_cidr(bad).unwrap_err();
            assert!(err.contains("expected an IP address or ip/prefix"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn contains_v4() {
        let net = cidr("10.1.0.0/16");
        assert!(net.contains(ip("10.1.0.0")));
        assert!(net.contains(ip("10.1.255.255")));
        assert!(!net.contains(ip("10.2.0.0")));
        assert!(!net.contains(ip("10.0.255.255")));
        let host = cidr("192.0.2.7/32");
        assert!(host.contains(ip("192.0.2.7")));
        assert!(!host.contains(ip("192.0.2.6")) && !host.contains(ip("192.0.2.8")));
        let all = cidr("0.0.0.0/0");
        assert!(all.contains(ip("255.255.255.255")) && all.contains(ip("0.0.0.0")));
        assert!(!all.contains(ip("::1")), "an IPv4 network never holds a (non-mapped) IPv6 address");
    }

    #[test]
    fn contains_v6() {
        let net = cidr("2001:db8::/32");
        assert!(net.contains(ip("2001:db8::1")));
        assert!(net.contains(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!net.contains(ip("2001:db9::")));
        let host = cidr("::1");
        assert!(host.contains(ip("::1")) && !host.contains(ip("::2")));
        let all = cidr("::/0");
        assert!(all.contains(ip("fe80::1")) && all.contains(ip("::")));
        assert!(!all.contains(ip("10.0.0.1")), "an IPv6 network never holds an IPv4 address");
    }

    #[test]
    fn contains_v4_mapped_v6() {
        let net = cidr("10.0.0.0/8");
        assert!(net.contains(ip("::ffff:10.9.8.7")));
        assert!(!net.contains(ip("::ffff:11.0.0.1")));
        assert!(cidr("127.0.0.1").contains(ip("::ffff:127.0.0.1")));
        // Mapped addresses are IPv4 for matching: not inside an IPv6 /0.
        assert!(!cidr("::/0").contains(ip("::ffff:10.0.0.1")));
        // IPv4-compatible (deprecated) and NAT64 addresses are not mapped ones.
        assert!(!net.contains(ip("::10.0.0.1")));
        assert!(!net.contains(ip("64:ff9b::10.0.0.1")));
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in ".*") {
            let _ = parse_cidr(&text);
        }

        #[test]
        fn every_v4_network_holds_its_own_addresses(addr in any::<u32>(), prefix in 0u8..=32, host in any::<u32>()) {
            let network = masked(Cidr { network: IpAddr::V4(addr.into()), prefix_len: prefix });
            let net = parse_cidr(&format!("{network}/{prefix}")).unwrap();
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            let IpAddr::V4(base) = network else { unreachable!() };
            let inside = (u32::from(base) & mask) | (host & !mask);
            prop_assert!(net.contains(IpAddr::V4(inside.into())));
            prop_assert_eq!(net.contains(IpAddr::V4(host.into())), host & mask == u32::from(base));
        }
    }
}
