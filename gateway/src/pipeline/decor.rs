//! Fields the gateway sets on every response it sends, generated or proxied, HTTP/1.1 and
//! HTTP/2: `server` (`server.server_header`) and `strict-transport-security` (`routes[].hsts`,
//! on TLS connections only: RFC 6797 §7.2 forbids it over plain HTTP). Each replaces the
//! upstream's field of the same name; `server_header = ""` removes the upstream's Server field
//! and adds none, and a route with `hsts` owns the field: over plain HTTP the upstream's is
//! removed and none is added. A WebSocket `101` is decorated like a final response; interim (1xx) heads
//! are not (they are forwarded as the upstream sent them, hop-by-hop fields removed).
//!
//! A route's `response_headers` edits apply to the final responses relayed from its upstreams,
//! whatever their status (as HAProxy's `http-response set-header`; unlike nginx's `add_header`
//! without `always`, upstream errors are edited too), never to the answers the gateway makes
//! itself (its 4xx/5xx refusals, `direct_response`, `redirect`) nor to a WebSocket 101.

use gateway_config::{Config, HeaderEdits};

use super::edits::{self, Vars};
use super::exchange::Exchange;
use super::forward::Try;

/// The fields for one response: borrowed from the snapshot the request runs on.
#[derive(Clone, Copy, Default)]
pub struct Decor<'a> {
    /// `Some("")`: remove the upstream's, add none.
    server: Option<&'a str>,
    /// `Some(None)`: an HSTS route over plain HTTP: remove the upstream's, add none.
    hsts: Option<Option<&'a str>>,
    /// The route's `response_headers` and their variables (relayed responses only).
    edits: Option<(&'a HeaderEdits, Vars<'a>)>,
}

impl<'a> Decor<'a> {
    /// The fields for a response of `route` (none before routing) on a TLS connection or not.
    pub fn new(config: &'a Config, route: Option<usize>, tls: bool) -> Self {
        let hsts = route
            .and_then(|i| config.routes.get(i))
            .and_then(|r| r.hsts.as_ref())
            .map(|h| tls.then_some(h.value.as_str()));
        Self { server: config.server.server_header.as_deref(), hsts, edits: None }
    }

    /// The fields for a response relayed from an upstream: [`Self::new`] and the route's
    /// `response_headers`.
    pub fn for_relay(config: &'a Config, t: &Try<'a>, ex: &'a Exchange) -> Self {
        let mut decor = Self::new(config, ex.route, ex.tls);
        let route = ex.route.and_then(|i| config.routes.get(i));
        if let Some((route, e)) = route.and_then(|r| Some((r, r.response_headers.as_ref()?))) {
            let cluster = ex.cluster.and_then(|c| config.clusters.get(c)).map_or("", |c| c.name.as_str());
            let vars = Vars {
                client_ip: t.req.addr,
                request_id: &ex.request_id,
                route: &route.name,
                cluster,
                identity: t.req.client.identity(),
                scheme: t.req.scheme(),
            };
            decor.edits = Some((e, vars));
        }
        decor
    }

    /// Whether an upstream field named `name` is replaced or removed (and so not forwarded).
    pub fn replaces(&self, name: &[u8]) -> bool {
        (self.server.is_some() && gateway_h1::eq_lower(name, b"server"))
            || (self.hsts.is_some() && gateway_h1::eq_lower(name, b"strict-transport-security"))
            || self.edits.is_some_and(|(e, _)| e.drops(name))
    }

    /// Appends the fields as HTTP/1.1 lines.
    pub fn push_h1(&self, out: &mut Vec<u8>) {
        if let Some(server) = self.server.filter(|s| !s.is_empty()) {
            out.extend_from_slice(b"server: ");
            out.extend_from_slice(server.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(Some(hsts)) = self.hsts {
            out.extend_from_slice(b"strict-transport-security: ");
            out.extend_from_slice(hsts.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some((e, vars)) = &self.edits {
            edits::push_h1(out, e, vars);
        }
    }

    /// Writes the fields into an HTTP/2 head being encoded (the upstream's fields they
    /// replace were left out by the caller: [`Self::replaces`]).
    pub fn push_h2(&self, w: &mut gateway_h2::server::HeadWriter<'_>) {
        if let Some(server) = self.server.filter(|s| !s.is_empty()) {
            w.field(b"server", server.as_bytes());
        }
        if let Some(Some(hsts)) = self.hsts {
            w.field(b"strict-transport-security", hsts.as_bytes());
        }
        if let Some((e, vars)) = &self.edits {
            edits::push_h2(w, e, vars);
        }
    }

    /// Inserts the fields right after the status line of the HTTP/1.1 response starting at
    /// `start` in `out` (a head the gateway wrote itself, without either field).
    pub fn insert_h1(&self, out: &mut Vec<u8>, start: usize) {
        let Some(line_end) = out.get(start..).and_then(|b| b.windows(2).position(|w| w == b"\r\n")) else {
            return;
        };
        let at = start + line_end + 2;
        let before = out.len();
        self.push_h1(out);
        let added = out.len() - before;
        if let Some(tail) = out.get_mut(at..) {
            tail.rotate_right(added);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn inserted_after_the_status_line() {
        let d = Decor { server: Some("edge"), hsts: Some(Some("max-age=60")), edits: None };
        let mut out = b"xxHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec();
        d.insert_h1(&mut out, 2);
        assert_eq!(
            out,
            b"xxHTTP/1.1 404 Not Found\r\nserver: edge\r\nstrict-transport-security: max-age=60\r\ncontent-length: 0\r\n\r\n"
        );
        let hidden = Decor { server: Some(""), hsts: None, edits: None };
        let mut out = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        hidden.insert_h1(&mut out, 0);
        assert_eq!(out, b"HTTP/1.1 200 OK\r\n\r\n");
        assert!(hidden.replaces(b"Server") && !hidden.replaces(b"strict-transport-security"));
        assert!(!Decor::default().replaces(b"server"));
    }
}
