//! The route table: first match wins, in the order of the configuration.

use gateway_config::{Action, Config, HeaderMatch, HostMatch, IdentityMatch, PathMatch, RouteMatch};

pub use crate::codec::strip_port;

pub mod split;

/// A compiled route table for one config snapshot.
#[derive(Debug)]
pub struct RouteTable {
    routes: Vec<CompiledRoute>,
}

#[derive(Debug)]
struct CompiledRoute {
    matcher: RouteMatch,
    /// Pre-rendered direct response (status line, headers, content-length), if any.
    direct: Option<crate::codec::response::Prerendered>,
}

/// The facts of a request that routing looks at.
pub struct RequestFacts<'a, H> {
    pub method: &'a [u8],
    /// The authority (`host[:port]`), if the request had one.
    pub authority: Option<&'a [u8]>,
    pub path: &'a [u8],
    /// `headers(name_lowercase, value)`: whether the request has header `name`, and when `value`
    /// is given, one with exactly that value.
    pub headers: H,
    /// The principal of the verified client certificate (mTLS), if any.
    pub identity: Option<&'a str>,
}

impl RouteTable {
    pub fn new(config: &Config) -> Self {
        let routes = config
            .routes
            .iter()
            .map(|r| CompiledRoute {
                matcher: r.matcher.clone(),
                direct: match &r.action {
                    Action::Direct(d) => Some(crate::codec::response::Prerendered::new(d)),
                    _ => None,
                },
            })
            .collect();
        Self { routes }
    }

    /// Index of the first route (in `Config::routes`) matching the request.
    pub fn find<H>(&self, req: &RequestFacts<'_, H>) -> Option<usize>
    where
        H: Fn(&[u8], Option<&[u8]>) -> bool,
    {
        self.routes.iter().position(|r| matches(&r.matcher, req))
    }

    /// Index of the first route matching `req`.
    pub fn route(&self, req: &crate::request::Request<'_>) -> Option<usize> {
        let facts = RequestFacts {
            method: req.method_bytes,
            authority: req.authority,
            path: req.path,
            headers: |name: &[u8], value: Option<&[u8]>| req.fields.any(name, |v| value.is_none_or(|want| v == want)),
            identity: req.client.identity(),
        };
        self.find(&facts)
    }

    /// The pre-rendered direct response of route `index`.
    pub fn direct(&self, index: usize) -> Option<&crate::codec::response::Prerendered> {
        self.routes.get(index).and_then(|r| r.direct.as_ref())
    }
}

fn matches<H>(m: &RouteMatch, req: &RequestFacts<'_, H>) -> bool
where
    H: Fn(&[u8], Option<&[u8]>) -> bool,
{
    if let Some(host) = &m.host {
        let Some(authority) = req.authority else { return false };
        if !host_matches(host, strip_port(authority)) {
            return false;
        }
    }
    if let Some(path) = &m.path {
        let ok = match path {
            PathMatch::Exact(p) => req.path == p.as_bytes(),
            PathMatch::Prefix(p) => req.path.starts_with(p.as_bytes()),
        };
        if !ok {
            return false;
        }
    }
    if !m.methods.is_empty() && !m.methods.iter().any(|x| x.as_bytes() == req.method) {
        return false;
    }
    if let Some(want) = &m.client_identity {
        let ok = match (want, req.identity) {
            (IdentityMatch::Exact(w), Some(id)) => id == w,
            (IdentityMatch::Prefix(w), Some(id)) => id.starts_with(w.as_str()),
            (_, None) => false,
        };
        if !ok {
            return false;
        }
    }
    m.headers
        .iter()
        .all(|HeaderMatch { name, value }| (req.headers)(name.as_bytes(), value.as_deref().map(str::as_bytes)))
}

fn host_matches(pattern: &HostMatch, host: &[u8]) -> bool {
    let host = host.strip_suffix(b".").unwrap_or(host);
    match pattern {
        HostMatch::Exact(h) => host.eq_ignore_ascii_case(h.as_bytes()),
        HostMatch::Suffix(s) => {
            let s = s.as_bytes();
            host.len() > s.len() && host.get(host.len() - s.len()..).is_some_and(|tail| tail.eq_ignore_ascii_case(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(
        method: &'a str,
        host: Option<&'a str>,
        path: &'a str,
        headers: &'a [(&'a str, &'a str)],
    ) -> RequestFacts<'a, impl Fn(&[u8], Option<&[u8]>) -> bool + 'a> {
        RequestFacts {
            method: method.as_bytes(),
            authority: host.map(str::as_bytes),
            path: path.as_bytes(),
            headers: move |name: &[u8], value: Option<&[u8]>| {
                headers
                    .iter()
                    .any(|(n, v)| n.as_bytes().eq_ignore_ascii_case(name) && value.is_none_or(|x| x == v.as_bytes()))
            },
            identity: None,
        }
    }

    fn route(m: RouteMatch) -> RouteMatch {
        m
    }

    fn check(m: &RouteMatch, method: &str, host: Option<&str>, path: &str, headers: &[(&str, &str)]) -> bool {
        matches(m, &facts(method, host, path, headers))
    }

    #[test]
    fn exact_and_suffix_hosts_ignore_case_port_and_trailing_dot() {
        let exact = route(RouteMatch { host: Some(HostMatch::Exact("shop.example.com".into())), ..Default::default() });
        assert!(check(&exact, "GET", Some("Shop.Example.COM:8080"), "/", &[]));
        assert!(check(&exact, "GET", Some("shop.example.com."), "/", &[]));
        assert!(!check(&exact, "GET", Some("www.shop.example.com"), "/", &[]));
        assert!(!check(&exact, "GET", None, "/", &[]));
        let suffix = route(RouteMatch { host: Some(HostMatch::Suffix(".example.com".into())), ..Default::default() });
        assert!(check(&suffix, "GET", Some("a.example.com"), "/", &[]));
        assert!(check(&suffix, "GET", Some("a.b.EXAMPLE.com:1"), "/", &[]));
        assert!(!check(&suffix, "GET", Some("example.com"), "/", &[]));
        assert!(!check(&suffix, "GET", Some("badexample.com"), "/", &[]));
    }

    #[test]
    fn paths_methods_and_headers() {
        let m = RouteMatch {
            path: Some(PathMatch::Prefix("/api".into())),
            methods: vec!["GET".into(), "POST".into()],
            headers: vec![
                HeaderMatch { name: "x-canary".into(), value: Some("1".into()) },
                HeaderMatch { name: "x-present".into(), value: None },
            ],
            ..Default::default()
        };
        let hs = [("X-Canary", "1"), ("x-present", "")];
        assert!(check(&m, "GET", None, "/api/v1", &hs));
        assert!(check(&m, "POST", None, "/apix", &hs));
        assert!(!check(&m, "PUT", None, "/api", &hs));
        assert!(!check(&m, "get", None, "/api", &hs), "methods are case-sensitive");
        assert!(!check(&m, "GET", None, "/ap", &hs));
        assert!(!check(&m, "GET", None, "/api", &[("x-canary", "2"), ("x-present", "")]));
        assert!(!check(&m, "GET", None, "/api", &[("x-canary", "1")]));
        let exact = RouteMatch { path: Some(PathMatch::Exact("/".into())), ..Default::default() };
        assert!(check(&exact, "GET", None, "/", &[]));
        assert!(!check(&exact, "GET", None, "/x", &[]));
        assert!(check(&RouteMatch::default(), "DELETE", None, "/anything", &[]));
    }

    #[test]
    fn strip_port_handles_ipv6_and_plain_hosts() {
        assert_eq!(strip_port(b"[::1]:8080"), b"[::1]");
        assert_eq!(strip_port(b"[::1]"), b"[::1]");
        assert_eq!(strip_port(b"a.example:1"), b"a.example");
        assert_eq!(strip_port(b"a.example"), b"a.example");
    }
}
