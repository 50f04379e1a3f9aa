//! The PROXY protocol header (HAProxy's spec, versions 1 and 2) a layer-4 balancer sends before
//! the client's first byte: strict parsing of untrusted bytes into the client's real address.
//!
//! [`parse`] looks only at the bytes it is given and never past the header's end, so the caller
//! can read (peek, then consume) exactly the header and leave the client's bytes (a TLS
//! ClientHello, an HTTP request) in the socket. See `accept::read_proxy_header`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Which versions a listener accepts (`listeners[].proxy_protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    V1,
    V2,
    /// Either version, required.
    Any,
    /// Either version, or none at all (the connection's own address is the client's).
    Optional,
}

/// The outcome of [`parse`] on the bytes received so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not enough bytes yet: every byte given belongs to the header (read them all, then more).
    Incomplete,
    /// No PROXY header (only with [`Accept::Optional`]): nothing is consumed.
    Absent,
    /// A complete header of `len` bytes. `source`: the client's address and the address it
    /// connected to, `None` when the header says to use the connection's own (v1 `UNKNOWN`, v2
    /// `LOCAL`, `UNSPEC`, `UNIX`).
    Header { len: usize, source: Option<(SocketAddr, SocketAddr)> },
}

/// Why a header was refused; `label()` is the metric's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The bytes start no PROXY header the listener accepts.
    Missing,
    /// A v1 line longer than 107 bytes or a v2 header longer than [`V2_MAX`].
    TooLong,
    /// A v1 line that is not `PROXY TCP4|TCP6|UNKNOWN ...` with valid addresses and ports.
    BadV1,
    /// v2: version nibble not 2.
    BadVersion,
    /// v2: command neither LOCAL nor PROXY.
    BadCommand,
    /// v2: unknown address family or transport, or a datagram transport.
    BadFamily,
    /// v2: the length is too short for the address family.
    BadLength,
}

impl Error {
    pub fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::TooLong => "too_long",
            Self::BadV1 => "bad_v1",
            Self::BadVersion => "bad_version",
            Self::BadCommand => "bad_command",
            Self::BadFamily => "bad_family",
            Self::BadLength => "bad_length",
        }
    }
}

/// The v1 line's limit, CRLF included (spec §2.1).
pub const V1_MAX: usize = 107;
/// The v2 signature (spec §2.2).
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The largest v2 header accepted, fixed part and TLVs included: balancers' TLVs (AWS, GCP,
/// Azure) take a few hundred bytes; anything longer is refused as `too_long`.
pub const V2_MAX: usize = 16 + 2048;
/// The most bytes [`parse`] may need to see.
pub const MAX_HEADER: usize = V2_MAX;

const V1_PREFIX: &[u8] = b"PROXY ";

/// Parses the start of a connection's bytes.
pub fn parse(buf: &[u8], accept: Accept) -> Result<Parsed, Error> {
    let v1 = matches!(accept, Accept::V1 | Accept::Any | Accept::Optional);
    let v2 = matches!(accept, Accept::V2 | Accept::Any | Accept::Optional);
    let n = buf.len().min(V2_SIGNATURE.len());
    let maybe_v2 = v2 && buf.get(..n) == V2_SIGNATURE.get(..n);
    let n1 = buf.len().min(V1_PREFIX.len());
    let maybe_v1 = v1 && buf.get(..n1) == V1_PREFIX.get(..n1);
    if buf.is_empty() {
        Ok(Parsed::Incomplete)
    } else if maybe_v1 {
        // The signatures differ in their first byte: at most one of the two can match.
        if buf.len() < V1_PREFIX.len() {
            Ok(Parsed::Incomplete)
        } else {
            parse_v1(buf)
        }
    } else if maybe_v2 {
        if buf.len() < 16 {
            Ok(Parsed::Incomplete)
        } else {
            parse_v2(buf)
        }
    } else if accept == Accept::Optional {
        Ok(Parsed::Absent)
    } else {
        Err(Error::Missing)
    }
}

/// `PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n` (or TCP6, or `UNKNOWN` and anything to CRLF).
fn parse_v1(buf: &[u8]) -> Result<Parsed, Error> {
    let window = buf.get(..buf.len().min(V1_MAX)).unwrap_or_default();
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        return if buf.len() >= V1_MAX { Err(Error::TooLong) } else { Ok(Parsed::Incomplete) };
    };
    match window.get(cr + 1) {
        Some(b'\n') => {}
        Some(_) => return Err(Error::BadV1),
        None if buf.len() >= V1_MAX => return Err(Error::TooLong),
        None => return Ok(Parsed::Incomplete),
    }
    let len = cr + 2;
    let line = std::str::from_utf8(window.get(V1_PREFIX.len()..cr).unwrap_or_default()).map_err(|_| Error::BadV1)?;
    if line.starts_with("UNKNOWN") && matches!(line.as_bytes().get(7), None | Some(b' ')) {
        return Ok(Parsed::Header { len, source: None });
    }
    let mut parts = line.split(' ');
    let (Some(proto), Some(src), Some(dst), Some(sport), Some(dport), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::BadV1);
    };
    let (src, dst): (IpAddr, IpAddr) = match proto {
        "TCP4" => (v1_addr::<Ipv4Addr>(src)?.into(), v1_addr::<Ipv4Addr>(dst)?.into()),
        "TCP6" => (v1_addr::<Ipv6Addr>(src)?.into(), v1_addr::<Ipv6Addr>(dst)?.into()),
        _ => return Err(Error::BadV1),
    };
    let (src, dst) = (SocketAddr::new(src, v1_port(sport)?), SocketAddr::new(dst, v1_port(dport)?));
    Ok(Parsed::Header { len, source: Some((src, dst)) })
}

fn v1_addr<T: std::str::FromStr>(text: &str) -> Result<T, Error> {
    text.parse().map_err(|_| Error::BadV1)
}

/// A decimal port, 0 to 65535, without sign or leading zeros.
fn v1_port(text: &str) -> Result<u16, Error> {
    let digits = !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit());
    if !digits || (text.len() > 1 && text.starts_with('0')) {
        return Err(Error::BadV1);
    }
    text.parse().map_err(|_| Error::BadV1)
}

/// The binary header: signature, version and command, family and transport, length, addresses,
/// TLVs (skipped).
fn parse_v2(buf: &[u8]) -> Result<Parsed, Error> {
    let byte = |i: usize| buf.get(i).copied().unwrap_or(0);
    let (ver_cmd, fam) = (byte(12), byte(13));
    if ver_cmd >> 4 != 2 {
        return Err(Error::BadVersion);
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(Error::BadCommand),
    };
    let body = usize::from(u16::from_be_bytes([byte(14), byte(15)]));
    let len = 16 + body;
    if len > V2_MAX {
        return Err(Error::TooLong);
    }
    let (family, transport) = (fam >> 4, fam & 0x0f);
    if family > 3 || transport > 2 {
        return Err(Error::BadFamily);
    }
    let need = match family {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    // LOCAL (a balancer's own health check) may carry any family: its addresses are ignored.
    if !local && body < need {
        return Err(Error::BadLength);
    }
    if !local && transport == 2 && matches!(family, 1 | 2) {
        // A datagram's addresses on a stream listener: not what a TCP balancer sends.
        return Err(Error::BadFamily);
    }
    let Some(header) = buf.get(..len) else { return Ok(Parsed::Incomplete) };
    if local || transport == 0 {
        return Ok(Parsed::Header { len, source: None });
    }
    let addr = header.get(16..).unwrap_or_default();
    let source = match family {
        1 => {
            let ip = |at: usize| <[u8; 4]>::try_from(addr.get(at..at + 4).unwrap_or_default()).map(Ipv4Addr::from);
            let (src, dst) = (ip(0), ip(4));
            let (sport, dport) = (port(addr, 8), port(addr, 10));
            match (src, dst, sport, dport) {
                (Ok(s), Ok(d), Some(sp), Some(dp)) => {
                    Some((SocketAddr::new(s.into(), sp), SocketAddr::new(d.into(), dp)))
                }
                _ => return Err(Error::BadLength),
            }
        }
        2 => {
            let ip = |at: usize| <[u8; 16]>::try_from(addr.get(at..at + 16).unwrap_or_default()).map(Ipv6Addr::from);
            let (src, dst) = (ip(0), ip(16));
            let (sport, dport) = (port(addr, 32), port(addr, 34));
            match (src, dst, sport, dport) {
                (Ok(s), Ok(d), Some(sp), Some(dp)) => {
                    Some((SocketAddr::new(s.into(), sp), SocketAddr::new(d.into(), dp)))
                }
                _ => return Err(Error::BadLength),
            }
        }
        // UNSPEC and UNIX: the connection's own address stands.
        _ => None,
    };
    Ok(Parsed::Header { len, source })
}

fn port(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*buf.get(at)?, *buf.get(at + 1)?]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut out = V2_SIGNATURE.to_vec();
        out.extend_from_slice(&[ver_cmd, fam]);
        out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn inet(src: [u8; 4], sport: u16) -> Vec<u8> {
        let mut b = src.to_vec();
        b.extend_from_slice(&[10, 0, 0, 1]);
        b.extend_from_slice(&sport.to_be_bytes());
        b.extend_from_slice(&443u16.to_be_bytes());
        b
    }

    fn header(len: usize, source: &str) -> Parsed {
        match source.parse::<SocketAddr>().unwrap() {
            SocketAddr::V4(s) => Parsed::Header { len, source: Some((s.into(), "10.0.0.1:443".parse().unwrap())) },
            SocketAddr::V6(s) => {
                Parsed::Header { len, source: Some((s.into(), "[2001:db8::1]:65535".parse().unwrap())) }
            }
        }
    }

    #[test]
    fn v1_tcp4_tcp6_unknown() {
        let line = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\nGET /";
        assert_eq!(parse(line, Accept::V1), Ok(header(line.len() - 5, "203.0.113.7:51234")));
        let line = b"PROXY TCP6 2001:db8::7 2001:db8::1 0 65535\r\n\x16\x03";
        assert_eq!(parse(line, Accept::Any), Ok(header(line.len() - 2, "[2001:db8::7]:0")));
        assert_eq!(parse(b"PROXY UNKNOWN\r\n", Accept::V1), Ok(Parsed::Header { len: 15, source: None }));
        let unknown = b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n";
        assert_eq!(parse(unknown, Accept::Optional), Ok(Parsed::Header { len: unknown.len(), source: None }));
    }

    #[test]
    fn v1_incomplete_until_crlf_and_never_past_107_bytes() {
        let line = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443\r\n";
        for n in 0..line.len() {
            assert_eq!(parse(&line[..n], Accept::V1), Ok(Parsed::Incomplete), "{n}");
        }
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(V1_MAX - 2, b'x');
        long.extend_from_slice(b"\r\n");
        assert_eq!(long.len(), 107);
        assert_eq!(parse(&long, Accept::V1), Ok(Parsed::Header { len: 107, source: None }));
        let mut too_long = b"PROXY UNKNOWN ".to_vec();
        too_long.resize(V1_MAX - 1, b'x');
        assert_eq!(parse(&too_long, Accept::V1), Ok(Parsed::Incomplete), "106 bytes, no CR yet");
        too_long.extend_from_slice(b"\r\n");
        assert_eq!(parse(&too_long, Accept::V1), Err(Error::TooLong), "the LF would be byte 109");
        too_long.truncate(V1_MAX);
        assert_eq!(parse(&too_long, Accept::V1), Err(Error::TooLong), "107 bytes ending in CR");
    }

    #[test]
    fn v1_malformed_lines_are_refused() {
        for bad in [
            &b"PROXY TCP4 203.0.113.7 10.0.0.1 51234\r\n"[..],
            b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 443 9\r\n",
            b"PROXY TCP4 203.0.113.7  10.0.0.1 51234 443\r\n",
            b"PROXY TCP4 2001:db8::7 10.0.0.1 51234 443\r\n",
            b"PROXY TCP6 203.0.113.7 10.0.0.1 51234 443\r\n",
            b"PROXY TCP4 203.0.113.07 10.0.0.1 51234 443\r\n",
            b"PROXY TCP4 203.0.113.7 10.0.0.1 051234 443\r\n",
            b"PROXY TCP4 203.0.113.7 10.0.0.1 65536 443\r\n",
            b"PROXY TCP4 203.0.113.7 10.0.0.1 +1 443\r\n",
            b"PROXY UDP4 203.0.113.7 10.0.0.1 1 443\r\n",
            b"PROXY UNKNOWNX\r\n",
            b"PROXY TCP4 203.0.113.7 10.0.0.1 1 443\rX",
            b"PROXY TCP4 203.0.113.7 10.0.0.1 1 443\n",
            b"PROXY TCP4 \xff\r\n",
        ] {
            let r = parse(bad, Accept::V1);
            assert!(
                matches!(r, Err(Error::BadV1)) || r == Ok(Parsed::Incomplete),
                "{:?}: {r:?}",
                String::from_utf8_lossy(bad)
            );
            if bad.ends_with(b"\r\n") || bad.ends_with(b"\rX") {
                assert_eq!(r, Err(Error::BadV1), "{:?}", String::from_utf8_lossy(bad));
            }
        }
        assert_eq!(parse(b"proxy TCP4", Accept::V1), Err(Error::Missing));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n", Accept::Any), Err(Error::Missing));
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4 1.2.3.4 1 2\r\n", Accept::V2), Err(Error::Missing));
    }

    #[test]
    fn v2_inet_inet6_and_tlvs_skipped() {
        let mut body = inet([198, 51, 100, 9], 40000);
        body.extend_from_slice(&[0x20, 0x00, 0x05, 0x01, 0, 0, 0, 0]);
        let h = v2(0x21, 0x11, &body);
        let mut with_data = h.clone();
        with_data.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(parse(&with_data, Accept::V2), Ok(header(h.len(), "198.51.100.9:40000")));
        for n in 0..h.len() {
            assert_eq!(parse(&h[..n], Accept::Any), Ok(Parsed::Incomplete), "{n}");
        }
        let mut body6 = "2001:db8::7".parse::<Ipv6Addr>().unwrap().octets().to_vec();
        body6.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        body6.extend_from_slice(&8080u16.to_be_bytes());
        body6.extend_from_slice(&65535u16.to_be_bytes());
        let h6 = v2(0x21, 0x21, &body6);
        assert_eq!(parse(&h6, Accept::Optional), Ok(header(52, "[2001:db8::7]:8080")));
    }

    #[test]
    fn v2_local_unspec_and_unix_keep_the_connections_address() {
        assert_eq!(parse(&v2(0x20, 0x00, &[]), Accept::V2), Ok(Parsed::Header { len: 16, source: None }));
        let local_inet = v2(0x20, 0x11, &inet([1, 2, 3, 4], 1));
        assert_eq!(parse(&local_inet, Accept::V2), Ok(Parsed::Header { len: 28, source: None }));
        assert_eq!(parse(&v2(0x20, 0x11, &[]), Accept::V2), Ok(Parsed::Header { len: 16, source: None }));
        assert_eq!(parse(&v2(0x21, 0x00, &[]), Accept::V2), Ok(Parsed::Header { len: 16, source: None }));
        assert_eq!(parse(&v2(0x21, 0x31, &[0; 216]), Accept::V2), Ok(Parsed::Header { len: 232, source: None }));
    }

    #[test]
    fn v2_malformed_headers_are_refused() {
        let body = inet([1, 2, 3, 4], 1);
        assert_eq!(parse(&v2(0x11, 0x11, &body), Accept::V2), Err(Error::BadVersion));
        assert_eq!(parse(&v2(0x31, 0x11, &body), Accept::V2), Err(Error::BadVersion));
        assert_eq!(parse(&v2(0x22, 0x11, &body), Accept::V2), Err(Error::BadCommand));
        assert_eq!(parse(&v2(0x2f, 0x11, &body), Accept::V2), Err(Error::BadCommand));
        assert_eq!(parse(&v2(0x21, 0x41, &body), Accept::V2), Err(Error::BadFamily));
        assert_eq!(parse(&v2(0x21, 0x13, &body), Accept::V2), Err(Error::BadFamily));
        assert_eq!(parse(&v2(0x21, 0x12, &body), Accept::V2), Err(Error::BadFamily), "datagram");
        assert_eq!(parse(&v2(0x21, 0x11, &body[..11]), Accept::V2), Err(Error::BadLength));
        assert_eq!(parse(&v2(0x21, 0x21, &[0; 35]), Accept::V2), Err(Error::BadLength));
        assert_eq!(parse(&v2(0x21, 0x31, &[0; 100]), Accept::V2), Err(Error::BadLength));
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(parse(&huge, Accept::V2), Err(Error::TooLong));
        let mut bad_sig = v2(0x21, 0x11, &body);
        bad_sig[11] = b'X';
        assert_eq!(parse(&bad_sig, Accept::V2), Err(Error::Missing));
        assert_eq!(parse(&bad_sig, Accept::Optional), Ok(Parsed::Absent));
        assert_eq!(parse(&v2(0x21, 0x11, &body), Accept::V1), Err(Error::Missing));
    }

    /// The invariants the fuzz target checks, on inputs that start like a header: a header
    /// never claims more than it was given or than the limits, exactly its bytes parse the same,
    /// and every shorter prefix is incomplete (so the reader may take those bytes and wait).
    fn check(input: &[u8], accept: Accept) {
        let result = parse(input, accept);
        if let Ok(Parsed::Header { len, .. }) = result {
            assert!(len <= input.len() && len <= MAX_HEADER);
            assert_eq!(parse(&input[..len], accept), result);
            for n in 0..len {
                assert_eq!(parse(&input[..n], accept), Ok(Parsed::Incomplete), "prefix {n} of {len}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn prefixes_of_headers_are_incomplete(
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            v1_start in proptest::sample::select(vec![&b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2"[..], b"PROXY UNKNOWN", b"PROXY TCP6 ::1 ::2 3 4", b"PROXY "]),
            v2_head in proptest::collection::vec(proptest::prelude::any::<u8>(), 4),
            mode in 0u8..4,
        ) {
            let accept = [Accept::V1, Accept::V2, Accept::Any, Accept::Optional][usize::from(mode)];
            let mut a = v1_start.to_vec();
            a.extend_from_slice(&tail);
            check(&a, accept);
            let mut crlf = v1_start.to_vec();
            crlf.extend_from_slice(b"\r\n");
            crlf.extend_from_slice(&tail);
            check(&crlf, accept);
            let mut b = V2_SIGNATURE.to_vec();
            // Small lengths so that complete headers come up often.
            let fam = [0x00, 0x11, 0x21, 0x31, v2_head[1]][usize::from(v2_head[1] % 5)];
            b.extend_from_slice(&[0x20 | (v2_head[0] & 1), fam, 0, v2_head[3] % 64]);
            b.extend_from_slice(&tail);
            check(&b, accept);
        }
    }

    #[test]
    fn optional_passes_other_protocols_through() {
        for start in [&b"GET / HTTP/1.1\r\n"[..], b"\x16\x03\x01\x02\x00", b"PRI * HTTP/2.0\r\n", b"\r\n\r\nX"] {
            assert_eq!(parse(start, Accept::Optional), Ok(Parsed::Absent));
        }
        assert_eq!(parse(b"P", Accept::Optional), Ok(Parsed::Incomplete));
        assert_eq!(parse(b"PR", Accept::Optional), Ok(Parsed::Incomplete));
        assert_eq!(parse(b"\r\n\r\n", Accept::Optional), Ok(Parsed::Incomplete));
        assert_eq!(parse(b"", Accept::Optional), Ok(Parsed::Incomplete));
    }
}
