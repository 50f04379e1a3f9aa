//! One request, one line: the JSON and Combined layouts (documented in the module docs of
//! [`crate::accesslog`]).

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

use super::clock::Clock;
use super::escape::{json_opt_str, json_str, micros, push_seconds, push_u64, quoted, token};

/// The line layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// nginx's `combined` followed by `key=value` fields.
    Combined,
}

/// What a worker records about one finished request. Borrowed from the request state; nothing
/// is copied until it is formatted into the worker's batch.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the request started (wall clock). Formatted with millisecond resolution.
    pub start: SystemTime,
    /// The downstream peer. An IPv4-mapped IPv6 address is logged as IPv4.
    pub client: IpAddr,
    pub method: &'a [u8],
    /// The request target's path, as received.
    pub path: &'a [u8],
    /// The query, without the `?`.
    pub query: Option<&'a [u8]>,
    /// "HTTP/1.1", "HTTP/1.0" or "HTTP/2".
    pub version: &'static str,
    pub host: Option<&'a [u8]>,
    /// The status sent downstream.
    pub status: u16,
    /// Bytes received from the client (head and body).
    pub bytes_in: u64,
    /// Bytes sent to the client (head and body).
    pub bytes_out: u64,
    /// From the first byte of the request to the last byte of the response, downstream.
    pub duration: Duration,
    /// The upstream endpoint that served the request, if one did.
    pub upstream: Option<SocketAddr>,
    /// From sending the request upstream to receiving the end of its response.
    pub upstream_duration: Option<Duration>,
    pub route: Option<&'a str>,
    pub cluster: Option<&'a str>,
    pub request_id: &'a [u8],
    pub user_agent: Option<&'a [u8]>,
    pub referer: Option<&'a [u8]>,
}

/// Appends `e` as one JSON line (newline included).
pub(crate) fn json(out: &mut Vec<u8>, e: &Entry<'_>, clock: &mut Clock) {
    clock.set(e.start);
    out.extend_from_slice(b"{\"time\":\"");
    clock.push_iso(out);
    out.extend_from_slice(b"\",\"client\":\"");
    let _ = write!(out, "{}", e.client.to_canonical());
    out.extend_from_slice(b"\",\"method\":");
    json_str(out, e.method);
    out.extend_from_slice(b",\"path\":");
    json_str(out, e.path);
    out.extend_from_slice(b",\"query\":");
    json_opt_str(out, e.query);
    out.extend_from_slice(b",\"version\":\"");
    out.extend_from_slice(e.version.as_bytes());
    out.extend_from_slice(b"\",\"host\":");
    json_opt_str(out, e.host);
    out.extend_from_slice(b",\"status\":");
    push_u64(out, u64::from(e.status));
    out.extend_from_slice(b",\"bytes_in\":");
    push_u64(out, e.bytes_in);
    out.extend_from_slice(b",\"bytes_out\":");
    push_u64(out, e.bytes_out);
    out.extend_from_slice(b",\"duration_us\":");
    push_u64(out, micros(e.duration));
    out.extend_from_slice(b",\"upstream\":");
    match e.upstream {
        Some(a) => {
            out.push(b'"');
            let _ = write!(out, "{a}");
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"upstream_duration_us\":");
    match e.upstream_duration {
        Some(d) => push_u64(out, micros(d)),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"route\":");
    json_opt_str(out, e.route.map(str::as_bytes));
    out.extend_from_slice(b",\"cluster\":");
    json_opt_str(out, e.cluster.map(str::as_bytes));
    out.extend_from_slice(b",\"request_id\":");
    json_str(out, e.request_id);
    out.extend_from_slice(b",\"user_agent\":");
    json_opt_str(out, e.user_agent);
    out.extend_from_slice(b",\"referer\":");
    json_opt_str(out, e.referer);
    out.extend_from_slice(b"}\n");
}

/// Appends `e` as one Combined line (newline included).
pub(crate) fn combined(out: &mut Vec<u8>, e: &Entry<'_>, clock: &mut Clock) {
    clock.set(e.start);
    let _ = write!(out, "{}", e.client.to_canonical());
    out.extend_from_slice(b" - - [");
    clock.push_clf(out);
    out.extend_from_slice(b"] \"");
    quoted(out, e.method);
    out.push(b' ');
    quoted(out, e.path);
    if let Some(q) = e.query {
        out.push(b'?');
        quoted(out, q);
    }
    out.push(b' ');
    out.extend_from_slice(e.version.as_bytes());
    out.extend_from_slice(b"\" ");
    push_u64(out, u64::from(e.status));
    out.push(b' ');
    push_u64(out, e.bytes_out);
    out.push(b' ');
    quoted_or_dash(out, e.referer);
    out.push(b' ');
    quoted_or_dash(out, e.user_agent);
    out.extend_from_slice(b" rt=");
    push_seconds(out, e.duration);
    out.extend_from_slice(b" urt=");
    match e.upstream_duration {
        Some(d) => push_seconds(out, d),
        None => out.push(b'-'),
    }
    out.extend_from_slice(b" in=");
    push_u64(out, e.bytes_in);
    out.extend_from_slice(b" host=");
    quoted_or_dash(out, e.host);
    out.extend_from_slice(b" route=");
    quoted_or_dash(out, e.route.map(str::as_bytes));
    out.extend_from_slice(b" cluster=");
    quoted_or_dash(out, e.cluster.map(str::as_bytes));
    out.extend_from_slice(b" upstream=");
    match e.upstream {
        Some(a) => {
            let _ = write!(out, "{a}");
        }
        None => out.push(b'-'),
    }
    out.extend_from_slice(b" rid=");
    if e.request_id.is_empty() {
        out.push(b'-');
    } else {
        token(out, e.request_id);
    }
    out.push(b'\n');
}

fn quoted_or_dash(out: &mut Vec<u8>, v: Option<&[u8]>) {
    out.push(b'"');
    match v {
        Some(v) => quoted(out, v),
        None => out.push(b'-'),
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;
    use std::time::UNIX_EPOCH;

    fn sample() -> Entry<'static> {
        Entry {
            start: UNIX_EPOCH + Duration::from_millis(971_186_136_123),
            client: "203.0.113.7".parse().unwrap(),
            method: b"GET",
            path: b"/api/items",
            query: Some(b"page=2&q=x"),
            version: "HTTP/1.1",
            host: Some(b"shop.example.com"),
            status: 200,
            bytes_in: 143,
            bytes_out: 5120,
            duration: Duration::from_micros(12_345),
            upstream: Some("10.0.0.2:8080".parse().unwrap()),
            upstream_duration: Some(Duration::from_micros(10_001)),
            route: Some("api"),
            cluster: Some("backend"),
            request_id: b"4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e",
            user_agent: Some(b"curl/8.5.0"),
            referer: Some(b"https://shop.example.com/"),
        }
    }

    fn line(f: fn(&mut Vec<u8>, &Entry<'_>, &mut Clock), e: &Entry<'_>) -> String {
        let mut out = Vec::new();
        f(&mut out, e, &mut Clock::default());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn combined_exact_line() {
        assert_eq!(
            line(combined, &sample()),
            "203.0.113.7 - - [10/Oct/2000:13:55:36 +0000] \"GET /api/items?page=2&q=x HTTP/1.1\" 200 5120 \
             \"https://shop.example.com/\" \"curl/8.5.0\" rt=0.012 urt=0.010 in=143 host=\"shop.example.com\" \
             route=\"api\" cluster=\"backend\" upstream=10.0.0.2:8080 rid=4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e\n"
        );
    }

    #[test]
    fn combined_absent_fields_are_dashes() {
        let e = Entry {
            client: IpAddr::V6(Ipv6Addr::LOCALHOST),
            query: None,
            version: "HTTP/1.0",
            host: None,
            status: 502,
            upstream: None,
            upstream_duration: None,
            route: None,
            cluster: None,
            request_id: b"",
            user_agent: None,
            referer: None,
            ..sample()
        };
        assert_eq!(
            line(combined, &e),
            "::1 - - [10/Oct/2000:13:55:36 +0000] \"GET /api/items HTTP/1.0\" 502 5120 \"-\" \"-\" rt=0.012 \
             urt=- in=143 host=\"-\" route=\"-\" cluster=\"-\" upstream=- rid=-\n"
        );
    }

    #[test]
    fn json_has_every_field() {
        let v: serde_json::Value = serde_json::from_str(&line(json, &sample())).unwrap();
        let want = serde_json::json!({
            "time": "2000-10-10T13:55:36.123Z",
            "client": "203.0.113.7",
            "method": "GET",
            "path": "/api/items",
            "query": "page=2&q=x",
            "version": "HTTP/1.1",
            "host": "shop.example.com",
            "status": 200,
            "bytes_in": 143,
            "bytes_out": 5120,
            "duration_us": 12345,
            "upstream": "10.0.0.2:8080",
            "upstream_duration_us": 10001,
            "route": "api",
            "cluster": "backend",
            "request_id": "4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e",
            "user_agent": "curl/8.5.0",
            "referer": "https://shop.example.com/",
        });
        assert_eq!(v, want);
    }

    #[test]
    fn json_absent_fields_are_null_and_mapped_v4_is_v4() {
        let e = Entry {
            client: "::ffff:192.0.2.1".parse().unwrap(),
            query: None,
            host: None,
            upstream: None,
            upstream_duration: None,
            route: None,
            cluster: None,
            user_agent: None,
            referer: None,
            ..sample()
        };
        let v: serde_json::Value = serde_json::from_str(&line(json, &e)).unwrap();
        assert_eq!(v["client"], "192.0.2.1");
        for k in ["query", "host", "upstream", "upstream_duration_us", "route", "cluster", "user_agent", "referer"] {
            assert!(v[k].is_null(), "{k}");
        }
    }

    #[test]
    fn hostile_bytes_keep_one_line_per_entry() {
        let nasty: &[u8] = b"a\"b\\c\nd\re\x00f\xff\"}{\n";
        let e = Entry {
            method: nasty,
            path: nasty,
            query: Some(nasty),
            host: Some(nasty),
            request_id: nasty,
            user_agent: Some(nasty),
            referer: Some(nasty),
            route: Some("r\n\"x"),
            cluster: Some("c\u{0}"),
            ..sample()
        };
        for (is_json, f) in [(true, json as fn(&mut Vec<u8>, &Entry<'_>, &mut Clock)), (false, combined)] {
            let mut out = Vec::new();
            let mut clock = Clock::default();
            for _ in 0..3 {
                f(&mut out, &e, &mut clock);
            }
            assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 3);
            assert!(out.iter().all(|&b| b == b'\n' || (0x20..0x7f).contains(&b)), "printable ASCII only");
            for l in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                if is_json {
                    let v: serde_json::Value = serde_json::from_slice(l).unwrap();
                    assert_eq!(v["path"], "a\"b\\c\nd\re\u{0}f\u{ff}\"}{\n");
                    assert_eq!(v["route"], "r\n\"x");
                } else {
                    // The quoted request line holds no raw quote: exactly 2 * 6 quote marks
                    // (request, referer, user agent, host, route, cluster).
                    assert_eq!(l.iter().filter(|&&b| b == b'"').count(), 12);
                }
            }
        }
    }
}
