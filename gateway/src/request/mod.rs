//! The protocol-neutral request: what the HTTP/1.1 codec and the HTTP/2 stream handler build
//! at the edge, and the only shape of a request that routing, admission, balancing and the
//! forwarders see. A stage never asks which protocol the client spoke, except to write the
//! answer back (`downstream/`).

mod client;
mod fields;

pub use client::{Client, Edge, TlsFacts};
pub use fields::Fields;

pub use crate::codec::h1::Method;

/// The protocol the client spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    Http2,
}

impl Version {
    /// As the access log and `Via` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
            Self::Http2 => "HTTP/2",
        }
    }

    /// The protocol name `Via` gives (RFC 9110 §7.6.3): `1.0`, `1.1` or `2`.
    pub fn via(self) -> &'static str {
        match self {
            Self::Http10 => "1.0",
            Self::Http11 => "1.1",
            Self::Http2 => "2",
        }
    }
}

/// How the request body arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body at all.
    None,
    /// Exactly this many bytes (possibly 0).
    Length(u64),
    /// A body of unknown length: HTTP/1.1 chunked, or HTTP/2 DATA without `content-length`.
    Stream,
}

/// One request, as every stage after the codec sees it. It borrows the head from its
/// connection's own storage (never from a buffer other requests reuse), so it stays valid
/// across every wait of the pipeline.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub method: Method,
    /// The method token as sent (case-sensitive).
    pub method_bytes: &'a [u8],
    /// The path, percent-encoding kept; `*` for `OPTIONS *`.
    pub path: &'a [u8],
    /// The query without its `?`, if the target had a `?`.
    pub query: Option<&'a [u8]>,
    /// `host[:port]`: `:authority`, an absolute-form target or Host; `None` only for an
    /// HTTP/1.0 request without either.
    pub authority: Option<&'a [u8]>,
    pub fields: Fields<'a>,
    pub body: Body,
    pub version: Version,
    /// A WebSocket opening handshake (HTTP/1.1 `Upgrade: websocket`), not yet checked.
    pub websocket: bool,
    /// Who sent it, over what.
    pub client: &'a Client,
    /// The address the request comes from: `client.peer`, or behind a trusted proxy the one
    /// its X-Forwarded-For names (see [`Client::real_ip`]).
    pub addr: std::net::IpAddr,
}

impl<'a> Request<'a> {
    /// The view of an HTTP/1.1 request whose head was parsed from `buf` into `head` and
    /// `scratch`.
    pub fn h1(
        buf: &'a [u8],
        head: &crate::codec::h1::RequestHead,
        scratch: &'a crate::codec::h1::HeadScratch,
        client: &'a Client,
    ) -> Self {
        use crate::codec::h1::BodyFraming;
        let at = |r: std::ops::Range<usize>| buf.get(r).unwrap_or_default();
        Self {
            method: head.method,
            method_bytes: at(head.method_range.clone()),
            path: at(head.path.clone()),
            query: head.query.clone().map(at),
            authority: head.authority.clone().map(at),
            fields: Fields::H1 { buf, scratch },
            body: match head.body {
                BodyFraming::None => Body::None,
                BodyFraming::Length(n) => Body::Length(n),
                BodyFraming::Chunked => Body::Stream,
            },
            version: if head.version_minor == 0 { Version::Http10 } else { Version::Http11 },
            websocket: head.websocket,
            client,
            addr: client.peer.ip(),
        }
        .with_real_ip()
    }

    /// The view of an HTTP/2 request decoded by the gateway's codec (checked there: pseudo
    /// fields present, content-length one number). `authority`: `:authority`, else Host.
    pub fn h2_native(
        head: &'a gateway_h2::server::RequestHead,
        authority: Option<&'a [u8]>,
        end_of_stream: bool,
        client: &'a Client,
    ) -> Self {
        let body = if end_of_stream { Body::None } else { head.content_length.map_or(Body::Stream, Body::Length) };
        let target = head.path().unwrap_or_default();
        let (path, query) = match target.iter().position(|&b| b == b'?') {
            Some(i) => (target.get(..i).unwrap_or_default(), target.get(i + 1..)),
            None => (target, None),
        };
        let method_bytes = head.method();
        Self {
            method: Method::from_token(method_bytes),
            method_bytes,
            path,
            query,
            authority,
            fields: Fields::H2Native(head),
            body,
            version: Version::Http2,
            websocket: false,
            client,
            addr: client.peer.ip(),
        }
        .with_real_ip()
    }

    /// Calls `f` with [`Self::addr`] as text (the connection's own text when it is the
    /// connection's address; else formatted on the stack).
    pub fn with_addr_text<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.addr == self.client.peer.ip() {
            return f(&self.client.peer_ip);
        }
        let mut buf = [0u8; 64];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        let _ = std::io::Write::write_fmt(&mut cursor, format_args!("{}", self.addr));
        let n = usize::try_from(cursor.position()).unwrap_or(0);
        f(buf.get(..n).unwrap_or_default())
    }

    /// Behind a trusted proxy, the address its X-Forwarded-For names (no work otherwise).
    fn with_real_ip(mut self) -> Self {
        if self.client.trusted.is_some() {
            let fields = self.fields;
            let xff = fields.iter().filter(|(n, _)| n.eq_ignore_ascii_case(b"x-forwarded-for")).map(|(_, v)| v);
            self.addr = self.client.real_ip(xff);
        }
        self
    }

    /// HEAD: an answer carries no body.
    pub fn is_head(&self) -> bool {
        self.method == Method::Head
    }

    /// RFC 9110 §9.2.2 idempotent methods: safe to send again.
    pub fn is_idempotent(&self) -> bool {
        self.method.is_idempotent()
    }

    /// No body, or an empty one.
    pub fn bodyless(&self) -> bool {
        matches!(self.body, Body::None | Body::Length(0))
    }

    /// The scheme the client used.
    pub fn scheme(&self) -> &'static str {
        self.client.scheme()
    }
}
