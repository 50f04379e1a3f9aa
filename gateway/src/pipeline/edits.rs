//! A route's header edits (`request_headers`, `response_headers`) applied to one message: the
//! rules were compiled at load (`gateway_config::HeaderEdits`); here their `${variables}` are
//! expanded. A value that expands to nothing, or to bytes no field value may hold, is not sent
//! (as nginx's `proxy_set_header` with an empty value). Nothing here runs for a route without
//! edits.

use std::io::Write;
use std::net::IpAddr;

use gateway_config::{HeaderEdits, Part, Template, Var};

/// What the variables expand to for one request.
#[derive(Clone, Copy)]
pub struct Vars<'a> {
    pub client_ip: IpAddr,
    pub request_id: &'a [u8],
    pub route: &'a str,
    pub cluster: &'a str,
    pub identity: Option<&'a str>,
    pub scheme: &'static str,
}

/// Appends the expansion of `t` to `out`.
pub fn expand(out: &mut Vec<u8>, t: &Template, vars: &Vars<'_>) {
    for part in &t.0 {
        match part {
            Part::Text(s) => out.extend_from_slice(s.as_bytes()),
            Part::Var(Var::ClientIp) => {
                let _ = write!(out, "{}", vars.client_ip);
            }
            Part::Var(Var::RequestId) => out.extend_from_slice(vars.request_id),
            Part::Var(Var::Route) => out.extend_from_slice(vars.route.as_bytes()),
            Part::Var(Var::Cluster) => out.extend_from_slice(vars.cluster.as_bytes()),
            Part::Var(Var::TlsIdentity) => out.extend_from_slice(vars.identity.unwrap_or_default().as_bytes()),
            Part::Var(Var::Scheme) => out.extend_from_slice(vars.scheme.as_bytes()),
        }
    }
}

/// Appends the `set` and `add` fields as HTTP/1.1 lines (the received fields they replace or
/// that are removed were left out by the caller: [`HeaderEdits::drops`]).
pub fn push_h1(out: &mut Vec<u8>, edits: &HeaderEdits, vars: &Vars<'_>) {
    for (name, value) in edits.set.iter().chain(&edits.add) {
        let start = out.len();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        let value_at = out.len();
        expand(out, value, vars);
        let value = out.get(value_at..).unwrap_or_default();
        if value.is_empty() || !valid_value(value) {
            out.truncate(start);
            continue;
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Writes the `set` and `add` fields into an HTTP/2 head being encoded (the received fields
/// they replace or that are removed were left out by the caller: [`HeaderEdits::drops`]).
pub fn push_h2(w: &mut gateway_h2::server::HeadWriter<'_>, edits: &HeaderEdits, vars: &Vars<'_>) {
    let mut value = Vec::new();
    for (name, template) in edits.set.iter().chain(&edits.add) {
        value.clear();
        expand(&mut value, template, vars);
        if !value.is_empty() && valid_value(&value) {
            w.field(name.as_bytes(), &value);
        }
    }
}

/// Applies every edit to an HTTP/2 (or `http`) header map.
pub fn apply_h2(headers: &mut http::HeaderMap, edits: &HeaderEdits, vars: &Vars<'_>) {
    for name in edits.remove.iter().chain(edits.set.iter().map(|(n, _)| n)) {
        headers.remove(name.as_str());
    }
    let mut buf = Vec::new();
    for (i, (name, value)) in edits.set.iter().chain(&edits.add).enumerate() {
        buf.clear();
        expand(&mut buf, value, vars);
        let Ok(name) = http::HeaderName::from_bytes(name.as_bytes()) else { continue };
        match http::HeaderValue::from_bytes(&buf) {
            Ok(v) if !buf.is_empty() && valid_value(&buf) => {
                if i < edits.set.len() {
                    headers.insert(name, v);
                } else {
                    headers.append(name, v);
                }
            }
            _ => {}
        }
    }
}

/// No control characters (a variable such as a certificate identity could bring one).
fn valid_value(v: &[u8]) -> bool {
    !v.iter().any(|&b| b < 0x20 || b == 0x7f)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn edits() -> HeaderEdits {
        let t = |parts: Vec<Part>| Template(parts);
        HeaderEdits {
            set: vec![
                ("x-who".into(), t(vec![Part::Text("ip=".into()), Part::Var(Var::ClientIp)])),
                ("x-id".into(), t(vec![Part::Var(Var::TlsIdentity)])),
            ],
            add: vec![(
                "x-via".into(),
                t(vec![Part::Var(Var::Route), Part::Text("/".into()), Part::Var(Var::Cluster)]),
            )],
            remove: vec!["x-secret".into()],
        }
    }

    const VARS: Vars<'static> = Vars {
        client_ip: IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 7)),
        request_id: b"rid",
        route: "api",
        cluster: "c1",
        identity: None,
        scheme: "https",
    };

    #[test]
    fn h1_lines_skip_empty_and_invalid_values() {
        let mut out = Vec::new();
        push_h1(&mut out, &edits(), &VARS);
        assert_eq!(out, b"x-who: ip=203.0.113.7\r\nx-via: api/c1\r\n");
        let mut out = Vec::new();
        push_h1(&mut out, &edits(), &Vars { identity: Some("a\r\nx: 1"), ..VARS });
        assert_eq!(out, b"x-who: ip=203.0.113.7\r\nx-via: api/c1\r\n");
        let mut out = Vec::new();
        push_h1(&mut out, &edits(), &Vars { identity: Some("spiffe://x/y"), ..VARS });
        assert_eq!(out, b"x-who: ip=203.0.113.7\r\nx-id: spiffe://x/y\r\nx-via: api/c1\r\n");
        assert!(edits().drops(b"X-Secret") && edits().drops(b"x-who") && !edits().drops(b"x-via"));
    }

    #[test]
    fn h2_maps_set_add_and_remove() {
        let mut h = http::HeaderMap::new();
        h.append("x-who", http::HeaderValue::from_static("spoof"));
        h.append("x-via", http::HeaderValue::from_static("up"));
        h.append("x-secret", http::HeaderValue::from_static("s"));
        apply_h2(&mut h, &edits(), &VARS);
        assert_eq!(h.get_all("x-who").iter().collect::<Vec<_>>(), ["ip=203.0.113.7"]);
        assert_eq!(h.get_all("x-via").iter().collect::<Vec<_>>(), ["up", "api/c1"]);
        assert!(h.get("x-secret").is_none() && h.get("x-id").is_none());
    }
}
