//! What is known about the client of a connection: fixed when it is accepted (and its TLS
//! handshake done), shared by every request on it.

use std::net::SocketAddr;
use std::rc::Rc;

use crate::runtime::signal::ListenerHandle;

/// The client side of one downstream connection.
pub struct Client {
    /// The client's address.
    pub peer: SocketAddr,
    /// The client's IP address as text (X-Forwarded-For, `client_ip` hashing).
    pub peer_ip: Vec<u8>,
    /// The listener it came from: when it stops (a reload removed it, or the worker drains),
    /// the connection closes after its current request.
    pub listener: Rc<ListenerHandle>,
    /// What the TLS handshake established (`None` on cleartext). Boxed: a cleartext client's
    /// facts stay small (they live as long as its connection, idle or not).
    pub tls: Option<Box<TlsFacts>>,
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
        Self { peer, peer_ip: peer.ip().to_string().into_bytes(), listener, tls: tls.map(Box::new) }
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
