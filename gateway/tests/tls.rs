//! End-to-end TLS: real certificates made here, real rustls clients, the real gateway proxying
//! to a real origin. SNI, ALPN, protocol versions, mTLS identity, certificate reload.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::Write;
use std::path::Path;

use common::clients::*;
use common::tls::TestPki;
use common::*;

/// Files of one TLS test: a CA, a certificate for `a.test`, one for `*.wild.test`.
struct Certs {
    dir: tempdir::Dir,
    pki: TestPki,
}

mod tempdir {
    /// A directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "gw-tls-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

impl Certs {
    fn new(tag: &str) -> Self {
        let dir = tempdir::Dir::new(tag);
        let pki = TestPki::new();
        let (a, ak) = pki.leaf(&["a.test"]);
        let (w, wk) = pki.leaf(&["*.wild.test"]);
        write(&dir.0, "a.pem", &a);
        write(&dir.0, "a.key", &ak);
        write(&dir.0, "w.pem", &w);
        write(&dir.0, "w.key", &wk);
        write(&dir.0, "ca.pem", &pki.ca_pem());
        Self { dir, pki }
    }

    fn path(&self, name: &str) -> String {
        self.dir.0.join(name).display().to_string()
    }

    /// The `[listeners.tls]` table body.
    fn tls_table(&self, extra: &str) -> String {
        format!(
            "certificates = [{{ cert = \"{}\", key = \"{}\" }}, {{ cert = \"{}\", key = \"{}\" }}]\n{extra}",
            self.path("a.pem"),
            self.path("a.key"),
            self.path("w.pem"),
            self.path("w.key")
        )
    }
}

/// The test config (see `common::config`) with its listener `main` on TLS: `tls` is the body of
/// its `[listeners.tls]` table, `listener_extra` more keys of the listener.
fn tls_config(driver: &str, origin: &Origin, tls: &str, listener_extra: &str) -> String {
    let listener = format!("name = \"main\"\naddress = \"127.0.0.1:0\"\n{listener_extra}\n[listeners.tls]\n{tls}\n");
    config(driver, origin.addr(), "", "").replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener)
}

/// A gateway with one TLS listener `main` in front of `origin`.
fn tls_gateway(driver: &str, origin: &Origin, certs: &Certs, tls_extra: &str, listener_extra: &str) -> TestGateway {
    TestGateway::start(&tls_config(driver, origin, &certs.tls_table(tls_extra), listener_extra))
}

fn opts(alpn: &[&[u8]]) -> ClientOpts {
    ClientOpts { alpn: alpn.iter().map(|a| a.to_vec()).collect(), ..ClientOpts::default() }
}

#[test]
fn https_http1_proxies_with_sni_certificates() {
    each_driver(|d| {
        let o = origin();
        let certs = Certs::new("sni");
        let gw = tls_gateway(d, &o, &certs, "", "");
        let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
        // Exact name, wildcard, and an unknown name served the default (first) certificate.
        let s = tls_connect(gw.addr, "a.test", cfg.clone()).unwrap();
        assert_eq!(server_names(&s), vec!["a.test"], "{d}");
        let s = tls_connect(gw.addr, "x.wild.test", cfg.clone()).unwrap();
        assert_eq!(server_names(&s), vec!["*.wild.test"], "{d}");
        assert!(
            tls_connect(gw.addr, "a.b.wild.test", cfg.clone()).is_err(),
            "two labels are not covered: default cert fails verification"
        );
        let r = tls_exchange(gw.addr, "a.test", cfg, b"GET /bytes/100 HTTP/1.1\r\nhost: a.test\r\n\r\n");
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(r.body, loadtests::origin::pattern(100));
        let seen = o.received();
        let req = seen.last().unwrap();
        assert_eq!(req.header("x-forwarded-proto"), Some("https"));
        assert!(gw.total("tls_handshakes") >= 3, "{d}");
    });
}

#[test]
fn unknown_sni_can_be_refused() {
    let o = origin();
    let certs = Certs::new("refuse");
    let gw = tls_gateway("io_uring", &o, &certs, "unknown_sni = \"refuse\"", "");
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[]));
    assert!(tls_connect(gw.addr, "other.test", cfg.clone()).is_err());
    assert!(tls_connect(gw.addr, "a.test", cfg).is_ok());
    assert!(wait_until(std::time::Duration::from_secs(2), || gw.total("tls_failed_unknown_sni") == 1));
}

#[test]
fn tls12_client_refused_when_minimum_is_13_and_legacy_hello_refused() {
    let o = origin();
    let certs = Certs::new("versions");
    let gw = tls_gateway("io_uring", &o, &certs, "min_version = \"1.3\"", "");
    let cfg = client_config(&certs.pki.ca_pem(), &ClientOpts { tls12_only: true, ..ClientOpts::default() });
    assert!(tls_connect(gw.addr, "a.test", cfg).is_err());
    // A TLS 1.0 ClientHello (no supported_versions extension) gets a fatal alert, never a session.
    let mut s = connect(gw.addr);
    s.write_all(&legacy_client_hello(0x0301)).unwrap();
    let mut resp = [0u8; 7];
    use std::io::Read;
    let n = s.read(&mut resp).unwrap_or(0);
    assert!(n == 0 || resp[0] == 0x15, "an alert record or a close, got {:?}", &resp[..n]);
    let ok = wait_until(std::time::Duration::from_secs(2), || gw.total("tls_failed_protocol_version") >= 2);
    assert!(ok, "{}", gw.stats()["totals"]);
}

/// A minimal ClientHello as a TLS 1.0/1.1-only client sends it.
fn legacy_client_hello(version: u16) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&[7u8; 32]); // random
    body.push(0); // session id
    let suites: [u16; 4] = [0xc013, 0xc014, 0x002f, 0x0035];
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend_from_slice(&s.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]); // compression: null
    body.extend_from_slice(&0u16.to_be_bytes()); // no extensions
    let mut hs = vec![1u8];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn mtls_required_forwards_the_verified_identity_and_strips_forgeries() {
    let o = origin();
    let certs = Certs::new("mtls");
    let extra = format!("client_auth = {{ ca = \"{}\", mode = \"required\" }}", certs.path("ca.pem"));
    let gw = tls_gateway("io_uring", &o, &certs, &extra, "");
    let ca = certs.pki.ca_pem();
    // No client certificate: no session.
    let anon = client_config(&ca, &opts(&[]));
    let failed = match tls_connect(gw.addr, "a.test", anon) {
        Err(_) => true,
        // TLS 1.3: the client learns of the refusal on its first read.
        Ok(mut s) => {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nhost: a.test\r\n\r\n");
            let mut b = [0u8; 1];
            !matches!(std::io::Read::read(&mut s, &mut b), Ok(1))
        }
    };
    assert!(failed, "a client without a certificate is refused");
    let client = certs.pki.client("svc-a", Some("spiffe://example.org/ns/prod/sa/svc-a"));
    let cfg = client_config(&ca, &ClientOpts { cert: Some(client), ..ClientOpts::default() });
    let r = tls_exchange(
        gw.addr,
        "a.test",
        cfg,
        b"GET /headers HTTP/1.1\r\nhost: a.test\r\nx-client-identity: forged\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let seen = o.received();
    let req = seen.last().unwrap();
    assert_eq!(req.header_count("x-client-identity"), 1);
    let id = req.header("x-client-identity").unwrap();
    assert!(id.contains("URI=spiffe://example.org/ns/prod/sa/svc-a"), "{id}");
    assert!(!id.contains("forged"));
}

#[test]
fn mtls_optional_serves_anonymous_clients_without_identity() {
    let o = origin();
    let certs = Certs::new("mtls-opt");
    let extra = format!("client_auth = {{ ca = \"{}\", mode = \"optional\" }}", certs.path("ca.pem"));
    let gw = tls_gateway("io_uring", &o, &certs, &extra, "");
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[]));
    let r = tls_exchange(
        gw.addr,
        "a.test",
        cfg,
        b"GET /headers HTTP/1.1\r\nhost: a.test\r\nx-client-identity: forged\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let seen = o.received();
    assert_eq!(seen.last().unwrap().header("x-client-identity"), None, "forged identity stripped");
}

#[test]
fn certificate_reload_serves_new_connections_and_keeps_old_ones() {
    let o = origin();
    let certs = Certs::new("reload");
    let dir = certs.dir.0.clone();
    let cfg_path = dir.join("gateway.toml");
    let tls = format!("certificates = [{{ cert = \"{}\", key = \"{}\" }}]", certs.path("a.pem"), certs.path("a.key"));
    std::fs::write(&cfg_path, tls_config("io_uring", &o, &tls, "")).unwrap();
    let gw = gateway::Gateway::start_from_file(&cfg_path).unwrap();
    let addr = gw.listener_addr("main").unwrap();
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
    let mut old = tls_connect(addr, "a.test", cfg.clone()).unwrap();
    assert_eq!(server_names(&old), vec!["a.test"]);

    // A new certificate (more names) in the same files: new connections get it.
    let (chain, key) = certs.pki.leaf(&["a.test", "b.test"]);
    write(&dir, "a.pem", &chain);
    write(&dir, "a.key", &key);
    gw.reload("test").expect("reload with the new certificate");
    let s = tls_connect(addr, "a.test", cfg.clone()).unwrap();
    assert_eq!(server_names(&s), vec!["a.test", "b.test"]);
    // The old connection still works.
    old.write_all(b"GET /bytes/5 HTTP/1.1\r\nhost: a.test\r\n\r\n").unwrap();
    let mut r = std::io::BufReader::new(&mut old);
    assert_eq!(read_response(&mut r, false).unwrap().status, 200);

    // A broken certificate file: the reload fails, the last good certificate stays.
    write(&dir, "a.pem", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    let err = gw.reload("test").map(|_| ()).expect_err("a broken certificate is refused");
    assert!(err.contains("a.pem"), "{err}");
    let s = tls_connect(addr, "b.test", cfg).unwrap();
    assert_eq!(server_names(&s), vec!["a.test", "b.test"]);
    gw.shutdown();
}

#[test]
fn alpn_picks_h2_or_http1_and_sessions_resume() {
    let o = origin();
    let certs = Certs::new("alpn");
    let gw = tls_gateway("io_uring", &o, &certs, "", "");
    let ca = certs.pki.ca_pem();
    let both = client_config(&ca, &opts(&[b"h2", b"http/1.1"]));
    let s = tls_connect(gw.addr, "a.test", both.clone()).unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]));
    let h1 = client_config(&ca, &opts(&[b"http/1.1"]));
    let s = tls_connect(gw.addr, "a.test", h1.clone()).unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    // The same client config resumes its earlier session (TLS 1.3 ticket).
    let r = tls_exchange(gw.addr, "a.test", h1.clone(), b"GET /bytes/1 HTTP/1.1\r\nhost: a.test\r\n\r\n");
    assert_eq!(r.status, 200);
    let s = tls_connect(gw.addr, "a.test", h1).unwrap();
    assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    assert!(wait_until(std::time::Duration::from_secs(2), || gw.total("tls_resumptions") >= 1));
}

/// Gateways reading the same `session_ticket_keys` files resume each other's sessions (a
/// successor after an upgrade, other hosts behind one address), over TLS 1.3 and 1.2; one with
/// other keys makes a full handshake; after a rotation (a new first file, the old one kept) the
/// old sessions still resume. The server-side session cache is off, so only tickets resume.
#[test]
fn sessions_resume_across_gateways_sharing_ticket_keys() {
    let o = origin();
    let certs = Certs::new("tickets");
    let key = |name: &str, seed: u8, len: usize| {
        let bytes: Vec<u8> = (0..len).map(|i| seed.wrapping_mul(7).wrapping_add(i as u8)).collect();
        let path = certs.dir.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let (current, next) = (key("current.key", 1, 80), key("next.key", 2, 48));
    let keys = |files: &[&str]| {
        let list = files.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ");
        format!("session_cache = 0\nsession_ticket_keys = [{list}]")
    };
    each_driver(|d| {
        let a = tls_gateway(d, &o, &certs, &keys(&[&current]), "");
        let b = tls_gateway(d, &o, &certs, &keys(&[&current]), "");
        let other = tls_gateway(d, &o, &certs, &keys(&[&next]), "");
        let rotated = tls_gateway(d, &o, &certs, &keys(&[&next, &current]), "");
        for tls12_only in [false, true] {
            let what = format!("{d}, {}", if tls12_only { "TLS 1.2" } else { "TLS 1.3" });
            let options = ClientOpts { tls12_only, ..opts(&[b"http/1.1"]) };
            let get = b"GET /bytes/1 HTTP/1.1\r\nhost: a.test\r\n\r\n";
            // A full handshake with `a`; the exchange reads its tickets.
            let cfg = client_config(&certs.pki.ca_pem(), &options);
            assert_eq!(tls_exchange(a.addr, "a.test", cfg.clone(), get).status, 200, "{what}");
            let s = tls_connect(b.addr, "a.test", cfg.clone()).unwrap();
            assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed), "{what}: b resumes a's session");
            let cfg = client_config(&certs.pki.ca_pem(), &options);
            assert_eq!(tls_exchange(a.addr, "a.test", cfg.clone(), get).status, 200, "{what}");
            let s = tls_connect(other.addr, "a.test", cfg.clone()).unwrap();
            assert_eq!(
                s.conn.handshake_kind(),
                Some(rustls::HandshakeKind::Full),
                "{what}: other keys, a full handshake"
            );
            let cfg = client_config(&certs.pki.ca_pem(), &options);
            assert_eq!(tls_exchange(a.addr, "a.test", cfg.clone(), get).status, 200, "{what}");
            let r = tls_exchange(rotated.addr, "a.test", cfg.clone(), get);
            assert_eq!(r.status, 200, "{what}");
            let s = tls_connect(rotated.addr, "a.test", cfg).unwrap();
            assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed), "{what}: after a rotation");
        }
        assert!(wait_until(std::time::Duration::from_secs(2), || b.total("tls_resumptions") >= 2), "{d}");
    });
}

/// A ticket key file rewritten in place is read on the next reload, as a renewed certificate is:
/// tickets of the old key no longer resume, those of the new one do.
#[test]
fn a_rewritten_ticket_key_file_is_read_on_reload() {
    let o = origin();
    let certs = Certs::new("tickets-reload");
    let dir = certs.dir.0.clone();
    let key = dir.join("ticket.key");
    std::fs::write(&key, [1u8; 80]).unwrap();
    let cfg_path = dir.join("gateway.toml");
    let tls = certs.tls_table(&format!("session_cache = 0\nsession_ticket_keys = [\"{}\"]", key.display()));
    std::fs::write(&cfg_path, tls_config("io_uring", &o, &tls, "")).unwrap();
    let gw = gateway::Gateway::start_from_file(&cfg_path).unwrap();
    let addr = gw.listener_addr("main").unwrap();
    let get = b"GET /bytes/1 HTTP/1.1\r\nhost: a.test\r\n\r\n";
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
    assert_eq!(tls_exchange(addr, "a.test", cfg.clone(), get).status, 200);
    std::fs::write(&key, [2u8; 80]).unwrap();
    gw.reload("test").expect("reload with the new key");
    let s = tls_connect(addr, "a.test", cfg.clone()).unwrap();
    assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Full), "the old key is gone");
    drop(s);
    assert_eq!(tls_exchange(addr, "a.test", cfg.clone(), get).status, 200);
    let s = tls_connect(addr, "a.test", cfg).unwrap();
    assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed), "sealed with the new key");
    drop(s);
    gw.shutdown();
}

/// A session ticket key file of the wrong size stops the start (or a reload) with the file named.
#[test]
fn a_session_ticket_key_file_of_the_wrong_size_is_refused() {
    let o = origin();
    let certs = Certs::new("tickets-bad");
    let path = certs.dir.0.join("short.key");
    std::fs::write(&path, [7u8; 32]).unwrap();
    let tls = certs.tls_table(&format!("session_ticket_keys = [\"{}\"]", path.display()));
    let config = gateway_config::parse(&tls_config("io_uring", &o, &tls, ""), "<test>").unwrap();
    let err = gateway::Gateway::start(config).map(|_| ()).expect_err("a 32-byte key file is refused").to_string();
    assert!(err.contains("short.key") && err.contains("48 or 80"), "{err}");
}

#[test]
fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    let o = origin();
    let certs = Certs::new("hs-timeout");
    let gw = tls_gateway("io_uring", &o, &certs, "handshake_timeout = \"300ms\"", "");
    let mut silent = connect(gw.addr);
    // Half a ClientHello, then nothing.
    silent.write_all(&[0x16, 0x03, 0x01, 0x01, 0x00, 0x01]).unwrap();
    let started = std::time::Instant::now();
    let mut b = [0u8; 64];
    let n = std::io::Read::read(&mut silent, &mut b).unwrap_or(0);
    assert_eq!(n, 0, "closed without a reply");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(wait_until(std::time::Duration::from_secs(2), || gw.total("tls_failed_timeout") == 1));
    // Others are served meanwhile and after.
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[]));
    let r = tls_exchange(gw.addr, "a.test", cfg, b"GET /bytes/1 HTTP/1.1\r\nhost: a.test\r\n\r\n");
    assert_eq!(r.status, 200);
}

#[test]
fn renewed_certificate_files_are_picked_up_without_a_reload_command() {
    let o = origin();
    let certs = Certs::new("poll");
    let dir = certs.dir.0.clone();
    let cfg_path = dir.join("gateway.toml");
    let text = tls_config("io_uring", &o, "certificates = [{ cert = \"a.pem\", key = \"a.key\" }]", "");
    std::fs::write(&cfg_path, text).unwrap();
    let gw = gateway::Gateway::start_from_file(&cfg_path).unwrap();
    let addr = gw.listener_addr("main").unwrap();
    let cfg = client_config(&certs.pki.ca_pem(), &opts(&[]));
    assert_eq!(server_names(&tls_connect(addr, "a.test", cfg.clone()).unwrap()), vec!["a.test"]);
    let (chain, key) = certs.pki.leaf(&["a.test", "c.test"]);
    write(&dir, "a.key", &key);
    write(&dir, "a.pem", &chain);
    let renewed = wait_until(std::time::Duration::from_secs(10), || {
        tls_connect(addr, "a.test", cfg.clone()).map(|s| server_names(&s).len() == 2).unwrap_or(false)
    });
    assert!(renewed, "the renewed certificate (relative paths, written in place) is served");
    gw.shutdown();
}

#[test]
fn routes_can_match_the_client_identity() {
    let o = origin();
    let certs = Certs::new("id-route");
    let extra = format!("client_auth = {{ ca = \"{}\", mode = \"optional\" }}", certs.path("ca.pem"));
    let routes = r#"
[[routes]]
name = "prod-only"
match = { path_prefix = "/admin", client_identity = "spiffe://example.org/ns/prod/*" }
direct_response = { status = 200, body = "admin for prod" }

[[routes]]
name = "admin-denied"
match = { path_prefix = "/admin" }
direct_response = { status = 403, body = "no" }
"#;
    let base = config("io_uring", o.addr(), "", routes);
    let listener =
        format!("name = \"main\"\naddress = \"127.0.0.1:0\"\n[listeners.tls]\n{}\n", certs.tls_table(&extra));
    let gw = TestGateway::start(&base.replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener));
    let ca = certs.pki.ca_pem();
    let req = b"GET /admin/x HTTP/1.1\r\nhost: a.test\r\n\r\n";
    let prod = certs.pki.client("svc", Some("spiffe://example.org/ns/prod/sa/svc"));
    let cfg = client_config(&ca, &ClientOpts { cert: Some(prod), ..ClientOpts::default() });
    assert_eq!(tls_exchange(gw.addr, "a.test", cfg, req).status, 200);
    let dev = certs.pki.client("svc", Some("spiffe://example.org/ns/dev/sa/svc"));
    let cfg = client_config(&ca, &ClientOpts { cert: Some(dev), ..ClientOpts::default() });
    assert_eq!(tls_exchange(gw.addr, "a.test", cfg, req).status, 403);
    let anon = client_config(&ca, &opts(&[]));
    assert_eq!(tls_exchange(gw.addr, "a.test", anon, req).status, 403, "no certificate, no identity");
}

/// The served count of priority class `class` on the admin port's metrics.
fn served(gw: &TestGateway, class: &str) -> u64 {
    let admin = gw.gw.as_ref().unwrap().admin_addr().unwrap();
    let text = get(admin, "/metrics").text();
    let prefix = format!("gateway_priority_requests_total{{priority=\"{class}\",outcome=\"served\"");
    text.lines().filter(|l| l.starts_with(&prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
}

#[test]
fn a_trusted_client_identity_may_raise_its_priority() {
    let o = origin();
    let certs = Certs::new("trusted-id");
    let extra = format!("client_auth = {{ ca = \"{}\", mode = \"optional\" }}", certs.path("ca.pem"));
    let base = config("io_uring", o.addr(), "", "")
        .replace("admin = false", "admin = { address = \"127.0.0.1:0\" }")
        .replace(
            "[[routes]]",
            "[overload]\npriority_header = \"x-gateway-priority\"\ntrusted_identities = [\"spiffe://example.org/ns/ops/*\"]\n\n[[routes]]",
        );
    let listener =
        format!("name = \"main\"\naddress = \"127.0.0.1:0\"\n\n[listeners.tls]\n{}\n", certs.tls_table(&extra));
    let gw = TestGateway::start(&base.replacen("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener, 1));
    let ca = certs.pki.ca_pem();
    let claim = b"GET /headers HTTP/1.1\r\nhost: a.test\r\nx-gateway-priority: critical\r\n\r\n";
    // A trusted identity (mTLS) may raise its class wherever it connects from ...
    let ops = certs.pki.client("ops", Some("spiffe://example.org/ns/ops/sa/runner"));
    let cfg = client_config(&ca, &ClientOpts { cert: Some(ops), ..ClientOpts::default() });
    assert_eq!(tls_exchange(gw.addr, "a.test", cfg, claim).status, 200);
    assert_eq!((served(&gw, "critical"), served(&gw, "normal")), (1, 0));
    // ... another identity and an anonymous client may not; the header never reaches the origin.
    let prod = certs.pki.client("svc", Some("spiffe://example.org/ns/prod/sa/svc"));
    let cfg = client_config(&ca, &ClientOpts { cert: Some(prod), ..ClientOpts::default() });
    assert_eq!(tls_exchange(gw.addr, "a.test", cfg, claim).status, 200);
    let anon = client_config(&ca, &opts(&[]));
    assert_eq!(tls_exchange(gw.addr, "a.test", anon, claim).status, 200);
    assert_eq!((served(&gw, "critical"), served(&gw, "normal")), (1, 2));
    assert!(o.received().iter().all(|r| r.header("x-gateway-priority").is_none()));
}

/// A client offering the suites in `suites` order, trusting `ca`, TLS `version` only.
fn ordered_client(
    ca: &str,
    suites: Vec<rustls::SupportedCipherSuite>,
    version: &'static rustls::SupportedProtocolVersion,
) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
    let provider =
        rustls::crypto::CryptoProvider { cipher_suites: suites, ..rustls::crypto::aws_lc_rs::default_provider() };
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    std::sync::Arc::new(config)
}

#[test]
fn the_server_picks_the_cipher_suite_whatever_the_client_order() {
    use rustls::crypto::aws_lc_rs::cipher_suite as cs;
    each_driver(|d| {
        let o = origin();
        let certs = Certs::new("suites");
        let gw = tls_gateway(d, &o, &certs, "", "");
        let ca = certs.pki.ca_pem();
        let cases = [
            (
                vec![cs::TLS13_CHACHA20_POLY1305_SHA256, cs::TLS13_AES_128_GCM_SHA256, cs::TLS13_AES_256_GCM_SHA384],
                &rustls::version::TLS13,
                cs::TLS13_AES_256_GCM_SHA384,
            ),
            (
                vec![
                    cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                    cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                    cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                ],
                &rustls::version::TLS12,
                cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ),
            // The server's preference among what the client offers.
            (
                vec![cs::TLS13_CHACHA20_POLY1305_SHA256, cs::TLS13_AES_128_GCM_SHA256],
                &rustls::version::TLS13,
                cs::TLS13_AES_128_GCM_SHA256,
            ),
        ];
        for (offered, version, expected) in cases {
            let mut s = tls_connect(gw.addr, "a.test", ordered_client(&ca, offered, version)).unwrap();
            let chosen = s.conn.negotiated_cipher_suite().map(|c| c.suite());
            assert_eq!(chosen, Some(expected.suite()), "{d}: {version:?}");
            // And the connection serves.
            s.write_all(b"GET /bytes/3 HTTP/1.1\r\nhost: a.test\r\nconnection: close\r\n\r\n").unwrap();
            let resp = read_response(&mut std::io::BufReader::new(s), false).unwrap();
            assert_eq!(resp.status, 200);
        }
    });
}

/// HTTP/1.1 over TLS after the handshake (on io_uring the connection goes back to completion
/// mode: `runtime::uring_tls`): a large body each way, requests pipelined in one write, a key
/// update from the client, ends with close_notify, and a damaged record, which closes its own
/// connection only.
#[test]
fn http1_over_tls_carries_bodies_pipelines_and_key_updates_and_refuses_damaged_records() {
    use std::io::{BufReader, Read};
    each_driver(|d| {
        let o = origin();
        let certs = Certs::new("h1io");
        let gw = tls_gateway(d, &o, &certs, "", "");
        let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
        let mut r = BufReader::new(tls_connect(gw.addr, "a.test", cfg.clone()).unwrap());
        // A 1 MB body echoed back.
        let body = loadtests::origin::pattern(1_000_000);
        let head = format!("POST /echo HTTP/1.1\r\nhost: a.test\r\ncontent-length: {}\r\n\r\n", body.len());
        r.get_mut().write_all(head.as_bytes()).unwrap();
        r.get_mut().write_all(&body).unwrap();
        r.get_mut().flush().unwrap();
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, 200, "{d}");
        assert!(resp.body == body, "{d}: the echoed body differs ({} bytes)", resp.body.len());
        // Two requests in one write, answered in order on the same connection.
        r.get_mut()
            .write_all(
                b"GET /bytes/10 HTTP/1.1\r\nhost: a.test\r\n\r\nGET /bytes/40000 HTTP/1.1\r\nhost: a.test\r\n\r\n",
            )
            .unwrap();
        r.get_mut().flush().unwrap();
        for n in [10, 40_000] {
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!((resp.status, resp.body.len()), (200, n), "{d}");
            assert!(resp.body == loadtests::origin::pattern(n), "{d}");
        }
        // The client renews its keys (and asks the gateway to renew its own): the connection
        // goes on.
        r.get_mut().conn.refresh_traffic_keys().unwrap();
        r.get_mut().write_all(b"GET /bytes/5 HTTP/1.1\r\nhost: a.test\r\n\r\n").unwrap();
        r.get_mut().flush().unwrap();
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(5)), "{d}");
        // close_notify: the gateway answers with its own, then its end of stream.
        r.get_mut().conn.send_close_notify();
        r.get_mut().flush().unwrap();
        let mut rest = Vec::new();
        assert_eq!(r.read_to_end(&mut rest).unwrap(), 0, "{d}: a clean end after close_notify");

        // A damaged application-data record: that connection fails, the gateway serves on.
        let mut s = tls_connect(gw.addr, "a.test", cfg.clone()).unwrap();
        let mut record = vec![0x17, 0x03, 0x03, 0x00, 0x40];
        record.extend((0..0x40u8).map(|i| i.wrapping_mul(37)));
        s.sock.write_all(&record).unwrap();
        let mut got = Vec::new();
        let err = s.read_to_end(&mut got).expect_err("a damaged record must fail its connection");
        assert!(got.is_empty(), "{d}: nothing served on a damaged record");
        // The gateway says why before it closes: the record did not authenticate.
        let alert = err.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
        assert_eq!(alert, Some(&rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)), "{d}: {err}");
        let r = tls_exchange(gw.addr, "a.test", cfg, b"GET /bytes/100 HTTP/1.1\r\nhost: a.test\r\n\r\n");
        assert_eq!((r.status, r.body), (200, loadtests::origin::pattern(100)), "{d}");
    });
}

/// `text` (a [`config`]) with its listener serving TLS with `certs`.
fn with_tls_listener(text: String, certs: &Certs) -> String {
    let listener = format!("name = \"main\"\naddress = \"127.0.0.1:0\"\n\n[listeners.tls]\n{}\n", certs.tls_table(""));
    text.replace("name = \"main\"\naddress = \"127.0.0.1:0\"\n", &listener)
}

/// An idle HTTP/1.1 connection over TLS is parked on io_uring (its session kept beside the
/// socket) and served again when the client comes back: after a request, after a key update
/// that carries no request, with two requests in one write; its idle timeout closes it with
/// close_notify. On epoll TLS connections wait as tasks, and behave the same.
#[test]
fn idle_tls_connections_park_on_io_uring_and_come_back_whole() {
    use std::io::{BufReader, Read};
    use std::time::Duration;
    each_driver(|d| {
        let o = origin();
        let certs = Certs::new("tlspark");
        let text = with_tls_listener(config(d, o.addr(), "[server.timeouts]\nidle = \"2s\"", ""), &certs);
        let gw = TestGateway::start(&text);
        let expect_parked = u64::from(d == "io_uring");
        let parked = |n: u64| wait_until(Duration::from_secs(5), || gw.total("connections_parked") == n);
        let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
        let mut r = BufReader::new(tls_connect(gw.addr, "a.test", cfg.clone()).unwrap());
        let get = |r: &mut BufReader<TlsConn>, n: usize, what: &str| {
            r.get_mut().write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a.test\r\n\r\n").as_bytes()).unwrap();
            r.get_mut().flush().unwrap();
            let resp = read_response(r, false).unwrap_or_else(|e| panic!("{d}: {what}: {e}"));
            assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(n)), "{d}: {what}");
        };
        get(&mut r, 7, "first request");
        for round in 0..2 {
            if expect_parked == 1 {
                assert!(parked(1), "{d}: parked after request {round}");
            } else {
                std::thread::sleep(Duration::from_millis(500));
                assert_eq!(gw.total("connections_parked"), 0, "{d}: TLS in poll mode waits as a task");
            }
            assert_eq!(gw.total("connections_active"), 1, "{d}");
            get(&mut r, 100 + round, "a request to the parked connection");
        }
        // A key update alone wakes the parked connection; the request after it is answered.
        assert!(parked(expect_parked), "{d}");
        r.get_mut().conn.refresh_traffic_keys().unwrap();
        r.get_mut().flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        get(&mut r, 3, "the request after a key update");
        // Two requests in one write to a parked connection: both answered, in order.
        assert!(parked(expect_parked), "{d}");
        r.get_mut()
            .write_all(
                b"GET /bytes/10 HTTP/1.1\r\nhost: a.test\r\n\r\nGET /bytes/20000 HTTP/1.1\r\nhost: a.test\r\n\r\n",
            )
            .unwrap();
        r.get_mut().flush().unwrap();
        for n in [10, 20_000] {
            let resp = read_response(&mut r, false).unwrap();
            assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(n)), "{d}: pipelined {n}");
        }
        // The idle timeout (2 s) closes it, with close_notify: a clean end for the client.
        assert!(parked(expect_parked), "{d}");
        let started = std::time::Instant::now();
        let mut rest = Vec::new();
        assert_eq!(r.read_to_end(&mut rest).unwrap(), 0, "{d}: close_notify, then the end");
        let after = started.elapsed();
        assert!(after >= Duration::from_millis(1200), "{d}: closed after {after:?}, before the idle timeout");
        assert!(wait_until(Duration::from_secs(3), || gw.total("connections_active") == 0), "{d}: uncounted");
        assert_eq!(gw.total("connections_parked"), 0, "{d}");
        assert_eq!(o.requests(), 6, "{d}");
    });
}

/// After two requests a TLS connection on io_uring waits for the next one in a receive, as a
/// plain one does (`downstream::h1::armed_wait`): what it brings is ciphertext for the session.
/// Requests sent at delays around the park time (the receive cancelled as they come) are all
/// answered; so is a request whose record is split by the park time, and one after a key
/// update; a damaged record in that receive fails the connection with its alert. The same
/// sequence on epoll, where TLS waits in poll mode.
#[test]
fn a_busy_tls_connections_next_request_is_received_whole_around_the_park() {
    use std::io::{BufReader, Read};
    use std::time::Duration;
    each_driver(|d| {
        let o = origin();
        let certs = Certs::new("tlsarmed");
        let text = with_tls_listener(config(d, o.addr(), "", ""), &certs);
        let gw = TestGateway::start(&text);
        let cfg = client_config(&certs.pki.ca_pem(), &opts(&[b"http/1.1"]));
        let mut r = BufReader::new(tls_connect(gw.addr, "a.test", cfg.clone()).unwrap());
        let sent = std::cell::Cell::new(0);
        let get = |r: &mut BufReader<TlsConn>, n: usize, what: &str| {
            r.get_mut().write_all(format!("GET /bytes/{n} HTTP/1.1\r\nhost: a.test\r\n\r\n").as_bytes()).unwrap();
            r.get_mut().flush().unwrap();
            let resp = read_response(r, false).unwrap_or_else(|e| panic!("{d}: {what}: {e}"));
            assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(n)), "{d}: {what}");
            sent.set(sent.get() + 1);
        };
        get(&mut r, 1, "first");
        get(&mut r, 2, "second");
        for delay in [150usize, 190, 200, 205, 210, 220, 230, 250, 300, 450] {
            std::thread::sleep(Duration::from_millis(delay as u64));
            get(&mut r, delay, &format!("after {delay} ms"));
        }
        // The client renews its keys while the connection waits; the next request is answered.
        get(&mut r, 3, "before the key update");
        r.get_mut().conn.refresh_traffic_keys().unwrap();
        r.get_mut().flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        get(&mut r, 4, "after the key update");
        // One request's record in two parts: the first completes the receive, the rest comes
        // after the park time.
        get(&mut r, 5, "before the split one");
        r.get_mut().conn.writer().write_all(b"GET /bytes/6 HTTP/1.1\r\nhost: a.test\r\n\r\n").unwrap();
        let mut record = Vec::new();
        r.get_mut().conn.write_tls(&mut record).unwrap();
        let (first, rest) = record.split_at(7);
        r.get_mut().sock.write_all(first).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        r.get_mut().sock.write_all(rest).unwrap();
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(6)), "{d}: the split record");
        sent.set(sent.get() + 1);
        assert_eq!(o.requests(), sent.get(), "{d}");
        // A damaged record where the next request should be: the connection fails with the
        // record's alert, nothing is forwarded, and the gateway serves on.
        get(&mut r, 7, "before the damaged record");
        let mut damaged = vec![0x17, 0x03, 0x03, 0x00, 0x40];
        damaged.extend((0..0x40u8).map(|i| i.wrapping_mul(37)));
        r.get_mut().sock.write_all(&damaged).unwrap();
        let mut got = Vec::new();
        let err = r.read_to_end(&mut got).expect_err("a damaged record must fail its connection");
        assert!(got.is_empty(), "{d}: nothing served on a damaged record");
        let alert = err.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
        assert_eq!(alert, Some(&rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)), "{d}: {err}");
        assert_eq!(o.requests(), sent.get(), "{d}: nothing forwarded for the damaged record");
        let resp = tls_exchange(gw.addr, "a.test", cfg, b"GET /bytes/8 HTTP/1.1\r\nhost: a.test\r\n\r\n");
        assert_eq!((resp.status, resp.body), (200, loadtests::origin::pattern(8)), "{d}");
    });
}
