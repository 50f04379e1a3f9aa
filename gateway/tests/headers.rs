//! End-to-end: the fields the gateway sets on every response. `server.server_header` (replace
//! or hide the upstream's Server field, add it to generated responses) and `routes[].hsts`
//! (Strict-Transport-Security on TLS connections only), over HTTP/1.1 and HTTP/2, on proxied,
//! direct, redirect and error responses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use common::clients::*;
use common::tls::{temp_dir, TestPki};
use common::*;

/// What the origin answers every request with: its own Server and HSTS fields.
const ORIGIN_REPLY: &[u8] =
    b"HTTP/1.1 200 OK\r\nserver: upstream-stack/1.2\r\nstrict-transport-security: max-age=1\r\ncontent-length: 2\r\n\r\nok";

/// An origin answering every request with [`ORIGIN_REPLY`].
fn origin_with_fields() -> SocketAddr {
    origin_replying(ORIGIN_REPLY.to_vec())
}

/// Routes before the default proxy route: a direct response, a redirect, and `/hsts/...`
/// (proxied) with HSTS; `/direct-hsts` and `/redirect-hsts` with HSTS too.
const ROUTES: &str = r#"
[[routes]]
name = "direct"
match = { path = "/direct" }
direct_response = { status = 200, body = "direct" }

[[routes]]
name = "direct-hsts"
match = { path = "/direct-hsts" }
direct_response = { status = 200, body = "direct" }
hsts = { max_age = "365d", include_subdomains = true }

[[routes]]
name = "redirect-hsts"
match = { path = "/redirect-hsts" }
redirect = { status = 308, path = "/new" }
hsts = { max_age = "365d", include_subdomains = true }

[[routes]]
name = "hsts"
match = { path_prefix = "/hsts" }
cluster = "origin"
hsts = { max_age = "365d", include_subdomains = true, preload = true }
"#;

const HSTS: &str = "max-age=31536000; includeSubDomains";
const HSTS_PRELOAD: &str = "max-age=31536000; includeSubDomains; preload";

fn all<'a>(r: &'a Resp, name: &str) -> Vec<&'a str> {
    r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
}

fn h2c(toml: String) -> String {
    toml.replace("address = \"127.0.0.1:0\"\n", "address = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n")
}

/// `(status, server fields)` of an HTTP/2 GET.
fn h2_servers(addr: SocketAddr, tls: Option<(&str, Arc<rustls::ClientConfig>)>, path: &str) -> Vec<(u16, H2Resp)> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    runtime().block_on(async {
        let mut c = h2_connect(addr, tls).await;
        let mut out = Vec::new();
        for p in path.split(',') {
            let r = h2_request(&mut c, h2_get(scheme, "a.test", p), None).await.unwrap();
            out.push((r.status, r));
        }
        out
    })
}

#[test]
fn server_header_replaces_the_upstreams_and_marks_generated_responses() {
    each_driver(|d| {
        let text = h2c(config(d, origin_with_fields(), "server_header = \"edge\"", ROUTES));
        let gw = TestGateway::start(&text);
        for (path, status) in [("/x", 200), ("/direct", 200), ("/redirect-hsts", 308)] {
            let r = get(gw.addr, path);
            assert_eq!((r.status, all(&r, "server")), (status, vec!["edge"]), "{d} {path}: {r:?}");
        }
        // A gateway error: a malformed request is answered 400 before any routing.
        let r = exchange(gw.addr, b"GET / HTTP/1.1\r\nhost: a\r\ncontent-length: x\r\n\r\n");
        assert_eq!((r.status, all(&r, "server")), (400, vec!["edge"]), "{d}: {r:?}");
        // Over plain HTTP an HSTS route sends none (RFC 6797 §7.2): the upstream's is removed.
        let r = get(gw.addr, "/hsts/x");
        assert_eq!(all(&r, "strict-transport-security"), Vec::<&str>::new(), "{d}: plain HTTP: {r:?}");
        // Other routes pass the upstream's own field.
        assert_eq!(all(&get(gw.addr, "/x"), "strict-transport-security"), ["max-age=1"], "{d}");
        for (status, r) in h2_servers(gw.addr, None, "/x,/direct,/nowhere-but-proxied") {
            let servers: Vec<_> = r.headers.get_all("server").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
            assert_eq!((status, servers), (200, vec!["edge".to_owned()]), "{d}: HTTP/2: {r:?}");
        }
    });
}

#[test]
fn empty_server_header_hides_the_upstreams() {
    let text = h2c(config("io_uring", origin_with_fields(), "server_header = \"\"", ROUTES));
    let gw = TestGateway::start(&text);
    for path in ["/x", "/direct"] {
        let r = get(gw.addr, path);
        assert_eq!((r.status, all(&r, "server")), (200, vec![]), "{path}: {r:?}");
    }
    for (status, r) in h2_servers(gw.addr, None, "/x,/direct") {
        assert_eq!((status, r.headers.get("server")), (200, None), "HTTP/2: {r:?}");
    }
    // Without the key, the upstream's passes and generated responses carry none.
    let gw = TestGateway::start(&config("io_uring", origin_with_fields(), "", ROUTES));
    assert_eq!(all(&get(gw.addr, "/x"), "server"), ["upstream-stack/1.2"]);
    assert_eq!(all(&get(gw.addr, "/direct"), "server"), Vec::<&str>::new());
}

/// A gateway whose listener `main` is TLS (HTTP/2 and HTTP/1.1 by ALPN) for `a.test`.
fn tls_gateway(d: &str, pki: &TestPki) -> (TestGateway, std::path::PathBuf) {
    let dir = temp_dir("hsts");
    let (cert, key) = pki.write_leaf(&dir, "a", &["a.test"]);
    let base = config(d, origin_with_fields(), "", ROUTES);
    let listener = format!(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"h2\", \"http/1.1\"]\n\
         [listeners.tls]\ncertificates = [{{ cert = \"{}\", key = \"{}\" }}]\n",
        cert.display(),
        key.display()
    );
    let text = base.replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener);
    (TestGateway::start(&text), dir)
}

#[test]
fn hsts_is_set_per_route_over_tls_only() {
    each_driver(|d| {
        let pki = TestPki::new();
        let (gw, dir) = tls_gateway(d, &pki);
        let h1 = client_config(&pki.ca_pem(), &ClientOpts { alpn: vec![b"http/1.1".to_vec()], ..Default::default() });
        let get_tls = |path: &str| {
            let raw = format!("GET {path} HTTP/1.1\r\nhost: a.test\r\n\r\n");
            tls_exchange(gw.addr, "a.test", h1.clone(), raw.as_bytes())
        };
        // HSTS routes: the gateway's value replaces the upstream's; generated responses get it.
        for (path, status, want) in
            [("/hsts/x", 200, HSTS_PRELOAD), ("/direct-hsts", 200, HSTS), ("/redirect-hsts", 308, HSTS)]
        {
            let r = get_tls(path);
            assert_eq!((r.status, all(&r, "strict-transport-security")), (status, vec![want]), "{d} {path}: {r:?}");
        }
        // Other routes: the upstream's own field passes, generated responses carry none.
        assert_eq!(all(&get_tls("/x"), "strict-transport-security"), ["max-age=1"], "{d}");
        assert_eq!(all(&get_tls("/direct"), "strict-transport-security"), Vec::<&str>::new(), "{d}");
        // HTTP/2 over TLS.
        let h2 = client_config(&pki.ca_pem(), &ClientOpts { alpn: vec![b"h2".to_vec()], ..Default::default() });
        let got = h2_servers(gw.addr, Some(("a.test", h2)), "/hsts/x,/direct-hsts,/redirect-hsts,/x,/direct");
        let hsts: Vec<_> = got
            .iter()
            .map(|(s, r)| {
                let v: Vec<_> =
                    r.headers.get_all("strict-transport-security").iter().map(|v| v.to_str().unwrap()).collect();
                (*s, v.join(","))
            })
            .collect();
        assert_eq!(
            hsts,
            [
                (200, HSTS_PRELOAD.to_owned()),
                (200, HSTS.to_owned()),
                (308, HSTS.to_owned()),
                (200, "max-age=1".to_owned()),
                (200, String::new())
            ],
            "{d}: HTTP/2"
        );
        drop(gw);
        let _ = std::fs::remove_dir_all(dir);
    });
}

#[test]
fn a_websocket_101_carries_the_server_header_too() {
    let o = origin();
    let routes = "[[routes]]\nname = \"ws\"\nmatch = { host = \"ws.test\" }\ncluster = \"origin\"\nwebsocket = true\n";
    let gw = TestGateway::start(&config("io_uring", o.addr(), "server_header = \"edge\"", routes));
    let mut s = connect(gw.addr);
    s.write_all(
        b"GET /ws/echo HTTP/1.1\r\nhost: ws.test\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
          sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed inside the head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101 "), "{head}");
    assert_eq!(head.matches("\r\nserver: ").count(), 1, "{head}");
    assert!(head.contains("\r\nserver: edge\r\n"), "{head}");
}
