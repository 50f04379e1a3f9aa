//! The route table: first match wins, in the order of the configuration. A table with many
//! host routes is indexed by host (see `index`).

use gateway_config::{Action, Config, HeaderMatch, HostMatch, IdentityMatch, PathMatch, RouteMatch};

pub use crate::codec::strip_port;

mod index;
pub mod split;

use index::{HostIndex, INDEX_FROM};

/// A compiled route table for one config snapshot.
#[derive(Debug)]
pub struct RouteTable {
    routes: Vec<CompiledRoute>,
    /// With [`INDEX_FROM`] host routes or more: the routes by host.
    index: Option<HostIndex>,
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
        Self::from_routes(routes)
    }

    /// The table of `routes`, indexed by host from [`INDEX_FROM`] host routes on.
    fn from_routes(routes: Vec<CompiledRoute>) -> Self {
        let hosts = routes.iter().filter(|r| r.matcher.host.is_some()).count();
        let index = (hosts >= INDEX_FROM).then(|| HostIndex::new(routes.iter().map(|r| r.matcher.host.as_ref())));
        Self { routes, index }
    }

    /// Index of the first route (in `Config::routes`) matching the request.
    pub fn find<H>(&self, req: &RequestFacts<'_, H>) -> Option<usize>
    where
        H: Fn(&[u8], Option<&[u8]>) -> bool,
    {
        match &self.index {
            Some(index) => {
                index.first(req.authority, |at| self.routes.get(at).is_some_and(|r| matches(&r.matcher, req)))
            }
            None => self.find_linear(req),
        }
    }

    /// [`RouteTable::find`] trying every route in turn.
    fn find_linear<H>(&self, req: &RequestFacts<'_, H>) -> Option<usize>
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

    /// A table of `matchers`, indexed by host or not.
    fn table(matchers: &[RouteMatch], indexed: bool) -> RouteTable {
        let routes: Vec<CompiledRoute> =
            matchers.iter().map(|m| CompiledRoute { matcher: m.clone(), direct: None }).collect();
        let index = indexed.then(|| HostIndex::new(routes.iter().map(|r| r.matcher.host.as_ref())));
        RouteTable { routes, index }
    }

    fn host_route(host: HostMatch, path: &str) -> RouteMatch {
        RouteMatch { host: Some(host), path: Some(PathMatch::Prefix(path.into())), ..Default::default() }
    }

    #[test]
    fn the_index_keeps_the_first_match_in_table_order() {
        let mut ms = Vec::new();
        for i in 0..40 {
            ms.push(host_route(HostMatch::Exact(format!("h{i}.example.com")), "/"));
        }
        // 40: a path route for any host; 41: a wildcard; 42: an exact host after the wildcard
        // that covers it; 43: the catch-all.
        ms.push(RouteMatch { path: Some(PathMatch::Prefix("/only".into())), ..Default::default() });
        ms.push(host_route(HostMatch::Suffix(".example.com".into()), "/"));
        ms.push(host_route(HostMatch::Exact("late.example.com".into()), "/"));
        ms.push(RouteMatch::default());
        let t =
            RouteTable::from_routes(ms.iter().map(|m| CompiledRoute { matcher: m.clone(), direct: None }).collect());
        assert!(t.index.is_some(), "indexed from {INDEX_FROM} host routes");
        let find = |host: Option<&str>, path: &str| t.find(&facts("GET", host, path, &[]));
        assert_eq!(find(Some("h39.example.com"), "/"), Some(39));
        assert_eq!(find(Some("H7.Example.COM:8443"), "/"), Some(7));
        assert_eq!(find(Some("h7.example.com."), "/"), Some(7));
        assert_eq!(find(Some("h7.example.com"), "/only"), Some(7), "the host route comes first");
        assert_eq!(find(Some("other.example.com"), "/only"), Some(40), "the path route before the wildcard");
        assert_eq!(find(Some("other.example.com"), "/"), Some(41));
        assert_eq!(find(Some("late.example.com"), "/"), Some(41), "the wildcard before the exact host after it");
        assert_eq!(find(Some("a.b.example.com"), "/"), Some(41));
        assert_eq!(find(Some("example.com"), "/"), Some(43), "a wildcard never matches its own domain");
        assert_eq!(find(None, "/"), Some(43));
        assert_eq!(find(None, "/only"), Some(40));
        let long = format!("{}.example.com", "x".repeat(400));
        assert_eq!(find(Some(&long), "/"), Some(41), "a host longer than the stack buffer");
        assert_eq!(find(Some("[::1]:8080"), "/"), Some(43));
    }

    proptest::proptest! {
        /// The indexed table finds what trying every route in turn finds, for any table and any
        /// request: hosts in any case, with a port or a trailing dot, wildcards at any depth.
        #[test]
        fn the_index_finds_what_trying_every_route_finds(
            routes in proptest::collection::vec(
                (0u8..3, proptest::collection::vec(0u8..3, 1..4), 0u8..4, proptest::bool::ANY), 0..40),
            requests in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(0u8..3, 1..5)), 0u8..4, proptest::bool::ANY, 0u8..4, proptest::bool::ANY),
                1..20),
        ) {
            let labels = ["a", "b", "c"];
            let name = |ls: &[u8]| ls.iter().map(|&l| labels[l as usize % 3]).collect::<Vec<_>>().join(".");
            let paths = ["/", "/x", "/xy", "/z"];
            let ms: Vec<RouteMatch> = routes
                .iter()
                .map(|(kind, host, path, get_only)| RouteMatch {
                    host: match kind {
                        0 => None,
                        1 => Some(HostMatch::Exact(name(host))),
                        _ => Some(HostMatch::Suffix(format!(".{}", name(host)))),
                    },
                    path: (*path > 0).then(|| PathMatch::Prefix(paths[*path as usize].into())),
                    methods: if *get_only { vec!["GET".into()] } else { Vec::new() },
                    ..Default::default()
                })
                .collect();
            let (indexed, linear) = (table(&ms, true), table(&ms, false));
            for (host, path, post, decor, upper) in &requests {
                let host = host.as_ref().map(|h| {
                    let mut h = name(h);
                    if *upper {
                        h = h.to_ascii_uppercase();
                    }
                    match decor {
                        1 => h.push_str(":8080"),
                        2 => h.push('.'),
                        3 => h.push_str(".:1"),
                        _ => {}
                    }
                    h
                });
                let method = if *post { "POST" } else { "GET" };
                let req = facts(method, host.as_deref(), paths[*path as usize], &[]);
                proptest::prop_assert_eq!(indexed.find(&req), linear.find(&req), "{:?} {:?}", host, ms);
            }
        }
    }

    #[test]
    fn strip_port_handles_ipv6_and_plain_hosts() {
        assert_eq!(strip_port(b"[::1]:8080"), b"[::1]");
        assert_eq!(strip_port(b"[::1]"), b"[::1]");
        assert_eq!(strip_port(b"a.example:1"), b"a.example");
        assert_eq!(strip_port(b"a.example"), b"a.example");
    }
}
