//! What is known about the client of a connection: fixed when it is accepted (and its TLS
//! handshake done), shared by every request on it.

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

use gateway_config::Cidr;

use crate::runtime::signal::ListenerHandle;

/// The client side of one downstream connection.
pub struct Client {
    /// The client's address: the source a PROXY protocol header gave (when the listener takes
    /// one), else the connection's peer. Rate-limit keys, priority trust, `client_ip` hashing,
    /// the access log and X-Forwarded-For all read it (or, from a trusted proxy, the request's
    /// address derived from it: [`crate::request::Request::addr`]).
    pub peer: SocketAddr,
    /// The client's IP address as text (X-Forwarded-For, `client_ip` hashing).
    pub peer_ip: Vec<u8>,
    /// The listener it came from: when it stops (a reload removed it, or the worker drains),
    /// the connection closes after its current request.
    pub listener: Rc<ListenerHandle>,
    /// What the TLS handshake established (`None` on cleartext). Boxed: a cleartext client's
    /// facts stay small (they live as long as its connection, idle or not).
    pub tls: Option<Box<TlsFacts>>,
    /// The listener's port the client connected to (a PROXY header's destination port when
    /// given): `X-Forwarded-Port`.
    pub port: u16,
    /// Whether the peer is one of the listener's `trusted_proxies`: its X-Forwarded-For,
    /// Forwarded and X-Forwarded-Proto/-Host/-Port are believed and extended. Holds the list,
    /// to find the first untrusted hop of X-Forwarded-For.
    pub trusted: Option<Rc<[Cidr]>>,
    /// The listener sends RFC 7239 `Forwarded` upstream.
    pub forwarded: bool,
}

/// What the handshake established, for forwarding and routing.
pub struct TlsFacts {
    /// The header that carries the client identity upstream; always removed from client input.
    pub identity_header: String,
    /// The verified client certificate's identity, when the client presented one.
    pub identity: Option<crate::tls::ClientIdentity>,
}

impl Client {
    pub fn new(peer: SocketAddr, listener: Rc<ListenerHandle>, tls: Option<TlsFacts>) -> Self {
        Self {
            peer,
            peer_ip: peer.ip().to_string().into_bytes(),
            listener,
            tls: tls.map(Box::new),
            port: 0,
            trusted: None,
            forwarded: false,
        }
    }

    /// The same client with the listener's edge facts (see [`Edge`]).
    pub fn with_edge(mut self, edge: &Edge) -> Self {
        self.port = edge.port;
        self.trusted = edge.trusted.clone();
        self.forwarded = edge.forwarded;
        self
    }

    /// The address a request from this client comes from: the connection's, or from a trusted
    /// proxy the rightmost untrusted address of its X-Forwarded-For (nginx `real_ip_recursive`;
    /// an entry that is not an IP address ends the walk). `xff`: the field's values in order.
    pub fn real_ip<'a>(&self, xff: impl Iterator<Item = &'a [u8]>) -> IpAddr {
        let own = self.peer.ip();
        let Some(trusted) = &self.trusted else { return own };
        let (mut untrusted, mut leftmost) = (None, None);
        for value in xff {
            for entry in value.split(|&b| b == b',') {
                let Some(ip) = parse_hop(entry) else {
                    // Nothing left of a malformed entry is believed.
                    (untrusted, leftmost) = (None, None);
                    continue;
                };
                leftmost.get_or_insert(ip);
                if !trusted.iter().any(|c| c.contains(ip)) {
                    untrusted = Some(ip);
                }
            }
        }
        untrusted.or(leftmost).unwrap_or(own)
    }

    /// The principal of the client's verified certificate (mTLS), if any.
    pub fn identity(&self) -> Option<&str> {
        self.tls.as_ref().and_then(|t| t.identity.as_ref()).map(|i| i.principal.as_str())
    }

    /// The identity header and the value to send in it (`None` value: strip, send none); `None`
    /// on cleartext.
    pub fn identity_field(&self) -> Option<(&str, Option<&str>)> {
        self.tls.as_ref().map(|t| (t.identity_header.as_str(), t.identity.as_ref().map(|i| i.header_value.as_str())))
    }

    /// `https` over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The listener's `trusted_proxies` for a peer, when the peer is one of them.
    pub fn trust(peer: IpAddr, trusted_proxies: &[Cidr]) -> Option<Rc<[Cidr]>> {
        trusted_proxies.iter().any(|c| c.contains(peer)).then(|| Rc::from(trusted_proxies))
    }

    /// A cleartext client on 192.0.2.1 (for unit tests).
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::new(SocketAddr::from(([192, 0, 2, 1], 40000)), Rc::default(), None)
    }

    /// Whether the connection must close after its current request.
    pub fn closing(&self) -> bool {
        self.listener.stop.is_triggered()
    }
}

/// What a listener tells its connections about the edge in front of it.
#[derive(Default, Clone)]
pub struct Edge {
    pub port: u16,
    pub trusted: Option<Rc<[Cidr]>>,
    pub forwarded: bool,
}

/// One X-Forwarded-For entry: an address, optionally `[v6]`, `v4:port` or `[v6]:port`.
fn parse_hop(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?.trim_matches([' ', '\t']);
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    if let Ok(sa) = text.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    text.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cidr(network: &str, prefix_len: u8) -> Cidr {
        Cidr { network: network.parse().unwrap(), prefix_len }
    }

    #[test]
    fn real_ip_walks_x_forwarded_for_from_the_right_past_trusted_hops() {
        let trusted = [cidr("10.0.0.0", 8), cidr("::1", 128)];
        let mut client = Client::for_tests();
        client.peer = "10.0.0.2:1000".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Untrusted peer: its X-Forwarded-For says nothing.
        assert_eq!(client.real_ip([&b"203.0.113.9"[..]].into_iter()), ip("10.0.0.2"));
        client.trusted = Client::trust(client.peer.ip(), &trusted);
        assert!(client.trusted.is_some());
        let real = |values: &[&[u8]]| client.real_ip(values.iter().copied());
        assert_eq!(real(&[]), ip("10.0.0.2"));
        assert_eq!(real(&[b"203.0.113.9"]), ip("203.0.113.9"));
        assert_eq!(real(&[b"1.1.1.1, 203.0.113.9, 10.1.1.1"]), ip("203.0.113.9"), "rightmost untrusted");
        assert_eq!(real(&[b"1.1.1.1", b"203.0.113.9 ,10.1.1.1"]), ip("203.0.113.9"), "across lines");
        assert_eq!(real(&[b"10.3.3.3, 10.1.1.1"]), ip("10.3.3.3"), "all trusted: the leftmost");
        assert_eq!(real(&[b"1.1.1.1, garbage, 10.1.1.1"]), ip("10.1.1.1"), "nothing left of garbage");
        assert_eq!(real(&[b"[2001:db8::1]:443, 10.1.1.1"]), ip("2001:db8::1"));
        assert_eq!(real(&[b"198.51.100.1:5555"]), ip("198.51.100.1"));
        assert_eq!(real(&[b"1.1.1.1, garbage"]), ip("10.0.0.2"), "nothing believed");
        assert!(Client::trust(ip("192.0.2.1"), &trusted).is_none());
    }
}
