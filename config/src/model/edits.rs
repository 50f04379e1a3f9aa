//! Per-route header edits and path rewrites (`routes[].request_headers`, `response_headers`,
//! `rewrite`), compiled once at load: names lower-case and checked, values split into literal
//! text and variables, so a request only expands them.

/// `request_headers` / `response_headers = { set = {...}, add = {...}, remove = [...] }`.
///
/// As loaded: names are lower-case RFC 9110 tokens, never framing, hop-by-hop or
/// gateway-managed fields; a name appears in at most one of `set` and `remove`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HeaderEdits {
    /// Replace every field of the name (also when absent) with this value.
    pub set: Vec<(String, Template)>,
    /// Append this value, keeping the ones received.
    pub add: Vec<(String, Template)>,
    /// Remove every field of the name.
    pub remove: Vec<String>,
}

impl HeaderEdits {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Whether a received field `name` is dropped (it is removed or set).
    pub fn drops(&self, name: &[u8]) -> bool {
        self.remove.iter().any(|r| name.eq_ignore_ascii_case(r.as_bytes()))
            || self.set.iter().any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
    }
}

/// A field value: literal text and `${variable}`s, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(into = "String")]
pub struct Template(pub Vec<Part>);

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Var(Var),
}

/// What a `${name}` expands to for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// `${client_ip}`: the request's client address (PROXY header, trusted X-Forwarded-For).
    ClientIp,
    /// `${request_id}`: the id sent upstream in `x-request-id`.
    RequestId,
    /// `${route}`: the route's name.
    Route,
    /// `${cluster}`: the cluster the request is sent to (after any split).
    Cluster,
    /// `${tls_identity}`: the verified client certificate's principal (mTLS), else empty.
    TlsIdentity,
    /// `${scheme}`: `http` or `https`.
    Scheme,
}

impl Var {
    pub const ALL: [(&'static str, Var); 6] = [
        ("client_ip", Var::ClientIp),
        ("request_id", Var::RequestId),
        ("route", Var::Route),
        ("cluster", Var::Cluster),
        ("tls_identity", Var::TlsIdentity),
        ("scheme", Var::Scheme),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, v)| *v == self).map_or("", |(n, _)| n)
    }
}

impl From<Template> for String {
    fn from(t: Template) -> String {
        let mut out = String::new();
        for part in &t.0 {
            match part {
                Part::Text(s) => out.push_str(s),
                Part::Var(v) => {
                    out.push_str("${");
                    out.push_str(v.name());
                    out.push('}');
                }
            }
        }
        out
    }
}

/// `rewrite`: the path the upstream is sent (the query is kept).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rewrite {
    /// `{ prefix = "/new" }`: the route's `match.path_prefix` replaced by this.
    Prefix(String),
    /// `{ path = "/x" }`: the whole path replaced by this.
    Path(String),
}
