//! Listener protocols and TLS, `[server.http2]`, cluster protocol and TLS, route websocket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::clusters::with_cluster;
use super::{assert_one, errors, valid, with_listener, LISTENER};
use crate::model::{CertificateFiles, ClientAuth, ClientAuthMode, Protocol, TlsVersion, UnknownSni};
use crate::model::{UpstreamProtocol, UpstreamTls};

/// A TLS listener on lines 1-4 (`[listeners.tls]` on line 4), its TLS keys from line 5 on.
fn with_tls(keys: &str) -> String {
    format!("{LISTENER}[listeners.tls]\n{keys}")
}

const CERT: &str = "certificates = [{ cert = \"a.pem\", key = \"a.key\" }]\n";

#[test]
fn protocol_defaults_and_order() {
    let plain = valid(LISTENER).listeners.remove(0);
    assert_eq!((plain.protocols, plain.tls), (vec![Protocol::Http1], None));
    let tls = valid(&with_tls(CERT)).listeners.remove(0);
    assert_eq!(tls.protocols, [Protocol::H2, Protocol::Http1]);
    let text = format!("{LISTENER}protocols = [\"http/1.1\", \"h2\"]\n");
    assert_eq!(valid(&text).listeners[0].protocols, [Protocol::Http1, Protocol::H2]);
    let text = format!("{LISTENER}protocols = [\"h2\"]\n");
    assert_eq!(valid(&text).listeners[0].protocols, [Protocol::H2]);
    assert_eq!(Protocol::H2.alpn(), b"h2");
    assert_eq!(Protocol::Http1.alpn(), b"http/1.1");
}

#[test]
fn bad_protocols() {
    let bad = |list: &str| format!("{LISTENER}protocols = {list}\n");
    assert_one(&bad("[]"), "listeners[0].protocols", Some(4), "protocols is empty");
    assert_one(&bad("[\"h3\"]"), "listeners[0].protocols[0]", Some(4), "unknown protocol \"h3\"");
    assert_one(&bad("[\"h2\", \"HTTP/1.1\"]"), "listeners[0].protocols[1]", Some(4), "write \"http/1.1\"");
    assert_one(&bad("[\"h2c\"]"), "listeners[0].protocols[0]", Some(4), "cleartext HTTP/2");
    assert_one(
        &bad("[\"h2\", \"http/1.1\", \"h2\"]"),
        "listeners[0].protocols[2]",
        Some(4),
        "duplicate protocol \"h2\" (already protocols[0])",
    );
}

#[test]
fn tls_defaults() {
    let tls = valid(&with_tls(CERT)).listeners.remove(0).tls.unwrap();
    assert_eq!(tls.certificates, [CertificateFiles { cert: "a.pem".into(), key: "a.key".into(), names: Vec::new() }]);
    assert_eq!((tls.unknown_sni, tls.min_version), (UnknownSni::Default, TlsVersion::Tls12));
    assert_eq!(tls.handshake_timeout, Duration::from_secs(10));
    assert_eq!((tls.session_tickets, tls.session_cache), (true, 4096));
    assert_eq!((tls.client_auth, tls.identity_header.as_str()), (None, "x-client-identity"));
}

#[test]
fn tls_every_key() {
    let text = with_tls(
        "certificates = [\n  { cert = \"/a.pem\", key = \"/a.key\", names = [\"A.example\", \"*.example.com\"] },\n  \
         { cert = \"b.pem\", key = \"b.key\" },\n]\nunknown_sni = \"refuse\"\nmin_version = \"1.3\"\n\
         handshake_timeout = \"3s\"\nsession_tickets = false\nsession_cache = 0\n\
         client_auth = { ca = \"ca.pem\", mode = \"optional\" }\nidentity_header = \"x-peer\"\n",
    );
    let tls = valid(&text).listeners.remove(0).tls.unwrap();
    assert_eq!(tls.certificates[0].names, ["a.example", "*.example.com"]);
    assert_eq!(tls.certificates[1].cert, PathBuf::from("b.pem"));
    assert_eq!((tls.unknown_sni, tls.min_version), (UnknownSni::Refuse, TlsVersion::Tls13));
    assert_eq!(tls.handshake_timeout, Duration::from_secs(3));
    assert_eq!((tls.session_tickets, tls.session_cache), (false, 0));
    assert_eq!(tls.client_auth, Some(ClientAuth { ca: "ca.pem".into(), mode: ClientAuthMode::Optional }));
    assert_eq!(tls.identity_header, "x-peer");
    let text = with_tls(&format!("{CERT}client_auth = {{ ca = \"ca.pem\" }}\n"));
    let auth = valid(&text).listeners.remove(0).tls.unwrap().client_auth.unwrap();
    assert_eq!(auth.mode, ClientAuthMode::Required);
}

#[test]
fn session_ticket_keys_are_files_and_need_tickets() {
    let text = with_tls(&format!("{CERT}session_ticket_keys = [\"/k/now.key\", \"prev.key\"]\n"));
    let tls = valid(&text).listeners.remove(0).tls.unwrap();
    assert_eq!(tls.session_ticket_keys, [PathBuf::from("/k/now.key"), PathBuf::from("prev.key")]);
    assert!(valid(&with_tls(CERT)).listeners.remove(0).tls.unwrap().session_ticket_keys.is_empty());
    assert_one(
        &with_tls(&format!("{CERT}session_tickets = false\nsession_ticket_keys = [\"k\"]\n")),
        "listeners[0].tls.session_ticket_keys",
        Some(7),
        "need session_tickets = true",
    );
    let nine = (0..9).map(|i| format!("\"k{i}\"")).collect::<Vec<_>>().join(", ");
    assert_one(
        &with_tls(&format!("{CERT}session_ticket_keys = [{nine}]\n")),
        "listeners[0].tls.session_ticket_keys",
        Some(6),
        "at most 8 files",
    );
    assert_one(
        &with_tls(&format!("{CERT}session_ticket_keys = [\"\"]\n")),
        "listeners[0].tls.session_ticket_keys[0]",
        Some(6),
        "file path is empty",
    );
}

#[test]
fn bad_tls() {
    assert_one(&with_tls(""), "listeners[0].tls.certificates", Some(4), "at least one certificate");
    assert_one(&with_tls("certificates = []\n"), "listeners[0].tls.certificates", Some(5), "at least one certificate");
    let cert_with =
        |names: &str| with_tls(&format!("certificates = [{{ cert = \"a\", key = \"b\", names = {names} }}]\n"));
    let at = "listeners[0].tls.certificates[0].names";
    assert_one(&cert_with("[]"), at, Some(5), "names is empty");
    for (bad, needle) in [
        ("\"*.com\"", "at least two labels"),
        ("\"a.*.example.com\"", "leading label"),
        ("\"*.*.example.com\"", "leading label"),
        ("\"example.com.\"", "trailing dot"),
        ("\"10.1.2.3\"", "IP address"),
    ] {
        assert_one(&cert_with(&format!("[{bad}]")), &format!("{at}[0]"), Some(5), needle);
    }
    assert_one(
        &cert_with("[\"a.example\", \"A.example\"]"),
        &format!("{at}[1]"),
        Some(5),
        "\"a.example\" is already served by this certificate",
    );
    let two = with_tls(
        "certificates = [\n{ cert = \"a\", key = \"b\", names = [\"x.example\"] },\n\
         { cert = \"c\", key = \"d\", names = [\"x.example\"] },\n]\n",
    );
    assert_one(&two, "listeners[0].tls.certificates[1].names[0]", Some(7), "already served by certificates[0]");
    assert_one(
        &with_tls("certificates = [{ cert = \"\", key = \"k\" }]\n"),
        "listeners[0].tls.certificates[0].cert",
        Some(5),
        "file path is empty",
    );
    assert_one(
        &with_tls("certificates = [{ cert = \"c\" }]\n"),
        "listeners[0].tls.certificates[0]",
        Some(5),
        "missing field `key`",
    );
    let one =
        |keys: &str, path: &str, needle: &str| assert_one(&with_tls(&format!("{CERT}{keys}")), path, Some(6), needle);
    one("unknown_sni = \"drop\"\n", "listeners[0].tls.unknown_sni", "expected one of \"default\", \"refuse\"");
    one("min_version = \"1.1\"\n", "listeners[0].tls.min_version", "expected one of \"1.2\", \"1.3\"");
    one("min_version = 1.3\n", "listeners[0].tls.min_version", "invalid type");
    one("handshake_timeout = \"0s\"\n", "listeners[0].tls.handshake_timeout", "greater than zero");
    one("handshake_timeout = 10\n", "listeners[0].tls.handshake_timeout", "needs a unit");
    one("session_cache = -1\n", "listeners[0].tls.session_cache", "got -1");
    one("client_auth = { ca = \"ca.pem\", mode = \"maybe\" }\n", "listeners[0].tls.client_auth.mode", "\"optional\"");
    one("client_auth = { mode = \"required\" }\n", "listeners[0].tls.client_auth", "missing field `ca`");
    one("identity_header = \"X-Client\"\n", "listeners[0].tls.identity_header", "lower-case token");
    one("identity_header = \"x client\"\n", "listeners[0].tls.identity_header", "invalid header name");
    one("identity_header = \"host\"\n", "listeners[0].tls.identity_header", "connection or framing header");
    one("ciphers = []\n", "listeners[0].tls.ciphers", "unknown field `ciphers`");
}

#[test]
fn relative_paths_follow_the_config_file() {
    let text = with_tls(
        "certificates = [{ cert = \"certs/a.pem\", key = \"/abs/a.key\" }]\nclient_auth = { ca = \"ca.pem\" }\n\
         [[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\ntls = { sni = \"up.example\", ca = \"up/ca.pem\" }\n",
    );
    let config = crate::parse_file(&text, Path::new("/etc/gw/gateway.toml")).unwrap();
    let tls = config.listeners[0].tls.as_ref().unwrap();
    assert_eq!(tls.certificates[0].cert, Path::new("/etc/gw/certs/a.pem"));
    assert_eq!(tls.certificates[0].key, Path::new("/abs/a.key"));
    assert_eq!(tls.client_auth.as_ref().unwrap().ca, Path::new("/etc/gw/ca.pem"));
    assert_eq!(config.clusters[0].tls.as_ref().unwrap().ca, Path::new("/etc/gw/up/ca.pem"));
    // `parse` keeps them as written.
    let config = crate::parse(&text, "<string>").unwrap();
    assert_eq!(config.listeners[0].tls.as_ref().unwrap().certificates[0].cert, Path::new("certs/a.pem"));
}

#[test]
fn http2_settings() {
    let http2 = valid(LISTENER).server.http2;
    assert_eq!((http2.max_concurrent_streams, http2.max_frame_bytes), (100, 16384));
    let text = with_listener(
        "[server.http2]\nmax_concurrent_streams = 10000\nmax_header_list_bytes = \"32KiB\"\n\
         initial_stream_window_bytes = 65535\ninitial_connection_window_bytes = 2147483647\n\
         max_frame_bytes = 16777215\nflood_window = \"1s\"\nmax_resets = 1\nmax_control_frames = 50\n\
         max_empty_frames = 10\nstall_timeout = \"250ms\"\n",
    );
    let http2 = valid(&text).server.http2;
    assert_eq!(http2.max_concurrent_streams, 10000);
    assert_eq!(http2.max_header_list_bytes, 32768);
    assert_eq!((http2.initial_stream_window_bytes, http2.initial_connection_window_bytes), (65535, 2_147_483_647));
    assert_eq!((http2.max_frame_bytes, http2.flood_window), (16_777_215, Duration::from_secs(1)));
    assert_eq!((http2.max_resets, http2.max_control_frames, http2.max_empty_frames), (1, 50, 10));
    assert_eq!(http2.stall_timeout, Duration::from_millis(250));
}

#[test]
fn bad_http2_settings() {
    for (key, value, needle) in [
        ("max_concurrent_streams", "0", "between 1 and 10000, got 0"),
        ("max_concurrent_streams", "10001", "got 10001"),
        ("max_header_list_bytes", "100", "between 1024 and 16777216 bytes, got 100"),
        ("initial_stream_window_bytes", "65534", "between 65535 and 2147483647 bytes"),
        ("initial_connection_window_bytes", "\"2GiB\"", "got 2147483648"),
        ("max_frame_bytes", "16383", "between 16384 and 16777215 bytes"),
        ("max_frame_bytes", "\"16MiB\"", "got 16777216"),
        ("max_frame_bytes", "\"big\"", "invalid size"),
        ("flood_window", "\"0s\"", "greater than zero"),
        ("max_resets", "0", "between 1 and 1000000"),
        ("max_control_frames", "-5", "got -5"),
        ("max_empty_frames", "1000001", "got 1000001"),
        ("stall_timeout", "\"50ms\"", "between 100ms and server.timeouts.body_io (30s), got 50ms"),
        ("stall_timeout", "\"31s\"", "got 31s"),
        ("stall_timeout", "5", "needs a unit"),
        ("max_streams", "1", "unknown field `max_streams`"),
    ] {
        let text = with_listener(&format!("[server.http2]\n{key} = {value}\n"));
        assert_one(&text, &format!("server.http2.{key}"), Some(5), needle);
    }
}

#[test]
fn cluster_protocol_and_tls() {
    let cluster = valid(&with_cluster("endpoints = [\"127.0.0.1:1\"]\n")).clusters.remove(0);
    assert_eq!((cluster.protocol, cluster.tls), (UpstreamProtocol::Http1, None));
    let text = with_cluster("endpoints = [\"127.0.0.1:1\"]\nprotocol = \"h2\"\n");
    assert_eq!(valid(&text).clusters[0].protocol, UpstreamProtocol::H2);
    let text = with_cluster(
        "endpoints = [\"127.0.0.1:1\"]\nprotocol = \"auto\"\ntls = { sni = \"API.example\", ca = \"/ca.pem\" }\n",
    );
    let cluster = valid(&text).clusters.remove(0);
    assert_eq!(cluster.protocol, UpstreamProtocol::Auto);
    assert_eq!(cluster.tls, Some(UpstreamTls { sni: "api.example".to_owned(), ca: "/ca.pem".into() }));
    // Without `sni`, the endpoints' shared host name.
    let text = with_cluster("endpoints = [\"localhost:1\", \"LOCALHOST:2\"]\ntls = { ca = \"/ca.pem\" }\n");
    assert_eq!(valid(&text).clusters[0].tls.as_ref().unwrap().sni, "localhost");
}

#[test]
fn bad_cluster_protocol_and_tls() {
    let ep = "endpoints = [\"127.0.0.1:1\"]\n";
    let one =
        |keys: &str, path: &str, needle: &str| assert_one(&with_cluster(&format!("{ep}{keys}")), path, Some(7), needle);
    one("protocol = \"auto\"\n", "clusters[0].protocol", "protocol \"auto\" lets ALPN choose, which needs TLS");
    one("protocol = \"h3\"\n", "clusters[0].protocol", "expected one of \"http/1.1\", \"h2\", \"auto\"");
    one("tls = { ca = \"/ca.pem\" }\n", "clusters[0].tls", "set tls.sni: endpoint \"127.0.0.1:1\" is an IP address");
    one("tls = { sni = \"10.0.0.1\", ca = \"/ca.pem\" }\n", "clusters[0].tls.sni", "SNI carries DNS names only");
    one("tls = { sni = \"a b\", ca = \"/ca.pem\" }\n", "clusters[0].tls.sni", "invalid sni");
    one("tls = { sni = \"a.example\" }\n", "clusters[0].tls", "missing field `ca`");
    one("tls = { sni = \"a.example\", ca = \"\" }\n", "clusters[0].tls.ca", "file path is empty");
    let text = with_cluster("endpoints = [\"localhost:1\", \"127.0.0.1:2\"]\ntls = { ca = \"/ca.pem\" }\n");
    assert_one(&text, "clusters[0].tls", Some(7), "is an IP address");
    let text = with_cluster("endpoints = [\"[::1]:1\"]\ntls = { ca = \"/ca.pem\" }\n");
    assert_one(&text, "clusters[0].tls", Some(7), "is an IP address");
}

#[test]
fn route_websocket() {
    let base = "[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\n";
    let text = with_listener(&format!("[[routes]]\nname = \"r\"\ncluster = \"c\"\n{base}"));
    assert!(!valid(&text).routes[0].websocket);
    let text = with_listener(&format!("[[routes]]\nname = \"r\"\ncluster = \"c\"\nwebsocket = true\n{base}"));
    assert!(valid(&text).routes[0].websocket);
    let text = with_listener("[[routes]]\nname = \"r\"\ndirect_response = { status = 200 }\nwebsocket = true\n");
    assert_one(&text, "routes[0].websocket", Some(7), "only applies to routes with a `cluster`");
    let text = with_listener("[[routes]]\nname = \"r\"\ncluster = \"c\"\nwebsocket = \"yes\"\n");
    assert!(errors(&format!("{text}{base}")).iter().any(|(path, _, _)| path == "routes[0].websocket"));
}

#[test]
fn stall_timeout_follows_a_shorter_body_io() {
    let text = with_listener("[server.timeouts]\nbody_io = \"2s\"\n");
    assert_eq!(valid(&text).server.http2.stall_timeout, Duration::from_secs(2));
    let text = with_listener("[server.timeouts]\nbody_io = \"2s\"\n[server.http2]\nstall_timeout = \"3s\"\n");
    assert_one(&text, "server.http2.stall_timeout", Some(7), "server.timeouts.body_io (2s), got 3s");
}
