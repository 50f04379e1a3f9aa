//! `[server]`, `[[listeners]]` and whole-document shape.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::{assert_one, errors, valid, with_listener, LISTENER};
use crate::model::{IoDriver, Workers};

#[test]
fn workers() {
    let text = with_listener("[server]\nworkers = 8\n");
    assert_eq!(valid(&text).server.workers, Workers::Fixed(NonZeroUsize::new(8).unwrap()));
    let text = with_listener("[server]\nworkers = \"auto\"\n");
    assert_eq!(valid(&text).server.workers, Workers::Auto);
    for bad in ["0", "1025", "-1", "\"4\"", "\"many\""] {
        let text = with_listener(&format!("[server]\nworkers = {bad}\n"));
        assert_one(&text, "server.workers", Some(5), "\"auto\" or an integer from 1 to 1024");
    }
    let text = with_listener("[server]\nworkers = 1.5\n");
    assert_one(&text, "server.workers", Some(5), "expected an integer or a string");
}

#[test]
fn io_driver() {
    let text = with_listener("[server]\nio_driver = \"epoll\"\n");
    assert_eq!(valid(&text).server.io_driver, IoDriver::Epoll);
    let text = with_listener("[server]\nio_driver = \"io_uring\"\n");
    assert_eq!(valid(&text).server.io_driver, IoDriver::IoUring);
    let text = with_listener("[server]\nio_driver = \"uring\"\n");
    assert_one(
        &text,
        "server.io_driver",
        Some(5),
        "unknown value \"uring\" (expected one of \"auto\", \"io_uring\", \"epoll\")",
    );
}

#[test]
fn admin_forms() {
    assert!(valid(&with_listener("[server]\nadmin = false\n")).server.admin.is_none());
    let admin = valid(&with_listener("[server]\nadmin = true\n")).server.admin.unwrap();
    assert_eq!(admin.address.to_string(), "127.0.0.1:9901");
    let text = with_listener("[server.admin]\naddress = \"[::1]:9000\"\n");
    let admin = valid(&text).server.admin.unwrap();
    assert_eq!((admin.address.to_string(), admin.token), ("[::1]:9000".to_owned(), None));
    let text = with_listener("[server]\nadmin = { address = \"0.0.0.0:9901\", token = \"s3cret\" }\n");
    assert_eq!(valid(&text).server.admin.unwrap().token.as_deref(), Some("s3cret"));
}

#[test]
fn admin_not_loopback_needs_token() {
    let text = with_listener("[server]\nadmin = { address = \"0.0.0.0:9901\" }\n");
    assert_one(
        &text,
        "server.admin.address",
        Some(5),
        "admin address 0.0.0.0:9901 is not loopback: set server.admin.token",
    );
}

#[test]
fn bad_admin() {
    let text = with_listener("[server]\nadmin = { address = \"localhost:9901\" }\n");
    assert_one(&text, "server.admin.address", Some(5), "expected ip:port");
    let text = with_listener("[server]\nadmin = { token = \"a b\" }\n");
    assert_one(&text, "server.admin.token", Some(5), "printable ASCII");
    let text = with_listener("[server]\nadmin = { adress = \"127.0.0.1:1\" }\n");
    assert_one(&text, "server.admin.adress", Some(5), "unknown field `adress`");
    let text = with_listener("[server]\nadmin = \"off\"\n");
    assert_one(&text, "server.admin", Some(5), "expected false, true or a table");
    let text = with_listener("[server]\nadmin = { address = \"127.0.0.1:8080\" }\n");
    assert_one(&text, "server.admin.address", Some(5), "overlaps listener \"l\"");
}

#[test]
fn scalar_settings() {
    let text =
        with_listener("[server]\ndrain_timeout = \"2m\"\nlog_level = \"gateway=debug,info\"\nvia = \"edge-1\"\n");
    let server = valid(&text).server;
    assert_eq!(server.drain_timeout, Duration::from_secs(120));
    assert_eq!(server.log_level, "gateway=debug,info");
    assert_eq!(server.via, "edge-1");
    let text = with_listener("[server]\ndrain_timeout = 30\n");
    assert_one(&text, "server.drain_timeout", Some(5), "a duration needs a unit: write it as a string such as \"30s\"");
    let text = with_listener("[server]\nlog_level = \"\"\n");
    assert_one(&text, "server.log_level", Some(5), "non-empty tracing filter");
    let text = with_listener("[server]\nvia = \"my gateway\"\n");
    assert_one(&text, "server.via", Some(5), "must be a token");
}

#[test]
fn limits() {
    let text = with_listener(
        "[server.limits]\nmax_request_line_bytes = \"4KiB\"\nmax_header_bytes = 32768\n\
         max_headers = 256\nmax_body_bytes = \"1GiB\"\nmax_response_header_bytes = \"512B\"\n\
         max_connections_per_worker = 1\n",
    );
    let limits = valid(&text).server.limits;
    assert_eq!(limits.max_request_line_bytes, 4096);
    assert_eq!(limits.max_header_bytes, 32768);
    assert_eq!(limits.max_headers, 256);
    assert_eq!(limits.max_body_bytes, 1 << 30);
    assert_eq!(limits.max_response_header_bytes, 512);
    assert_eq!(limits.max_connections_per_worker, 1);
}

#[test]
fn bad_limits() {
    let cases = [
        ("max_body_bytes = 0", "max_body_bytes", "greater than zero"),
        ("max_body_bytes = -5", "max_body_bytes", "greater than zero"),
        ("max_header_bytes = \"0KiB\"", "max_header_bytes", "greater than zero"),
        ("max_response_header_bytes = \"64KB\"", "max_response_header_bytes", "binary units"),
        ("max_body_bytes = \"99999999999GiB\"", "max_body_bytes", "too large"),
        ("max_headers = 0", "max_headers", "between 1 and 256, got 0"),
        ("max_headers = 257", "max_headers", "between 1 and 256, got 257"),
        ("max_connections_per_worker = 0", "max_connections_per_worker", "between 1 and"),
        ("max_request_line_bytes = 65537", "max_request_line_bytes", "must not exceed max_header_bytes (65536)"),
        ("max_header_bytes = 8191", "max_header_bytes", "max_request_line_bytes (8192) must not exceed"),
        ("max_header_bytes = true", "max_header_bytes", "expected an integer or a string"),
    ];
    for (line, key, needle) in cases {
        let text = with_listener(&format!("[server.limits]\n{line}\n"));
        assert_one(&text, &format!("server.limits.{key}"), Some(5), needle);
    }
}

#[test]
fn timeouts() {
    let text = with_listener("[server.timeouts]\nheader_read = \"250ms\"\nidle = \"1h\"\nbody_io = \"5s\"\n");
    let t = valid(&text).server.timeouts;
    assert_eq!(
        (t.header_read, t.idle, t.body_io),
        (Duration::from_millis(250), Duration::from_secs(3600), Duration::from_secs(5))
    );
    for (value, needle) in [
        ("\"0s\"", "greater than zero"),
        ("\"25h\"", "at most 24h"),
        ("\"10 s\"", "invalid duration"),
        ("\"1.5s\"", "invalid duration"),
        ("\"-1s\"", "invalid duration"),
    ] {
        let text = with_listener(&format!("[server.timeouts]\nidle = {value}\n"));
        assert_one(&text, "server.timeouts.idle", Some(5), needle);
    }
    let text = with_listener("[server.timeouts]\nidel = \"1s\"\n");
    assert_one(
        &text,
        "server.timeouts.idel",
        Some(5),
        "unknown field `idel`, expected one of `header_read`, `idle`, `body_io`",
    );
}

#[test]
fn listeners() {
    let text = "[[listeners]]\nname = \"a\"\naddress = \"[::]:8080\"\nbacklog = 16\n\
                [[listeners]]\nname = \"b\"\naddress = \"127.0.0.1:0\"\n\
                [[listeners]]\nname = \"c\"\naddress = \"127.0.0.1:0\"\n";
    let config = valid(text);
    assert_eq!(config.listeners.len(), 3);
    assert_eq!(config.listeners[0].backlog, 16);
    assert_eq!(config.listeners[1].backlog, 1024);
    assert_eq!(config.listeners[0].address.to_string(), "[::]:8080");
}

#[test]
fn bad_listeners() {
    assert_one("", "listeners", None, "no listeners");
    assert_one("listeners = []\n", "listeners", Some(1), "no listeners");
    assert_one("listeners = 5\n", "listeners", Some(1), "must be an array of tables");
    let bad = |extra: &str| format!("{LISTENER}{extra}");
    assert_one(&bad("backlog = 0\n"), "listeners[0].backlog", Some(4), "between 1 and 65535, got 0");
    assert_one(&bad("tls = { cert = \"a.pem\" }\n"), "listeners[0].tls.cert", Some(4), "unknown field `cert`");
    assert_one(&bad("protocols = \"h2\"\n"), "listeners[0].protocols", Some(4), "expected a sequence");
    assert_one(&bad("port = 80\n"), "listeners[0].port", Some(4), "unknown field `port`");
    let text = "[[listeners]]\nname = \"l\"\naddress = \"localhost:8080\"\n";
    assert_one(text, "listeners[0].address", Some(3), "invalid address \"localhost:8080\": expected ip:port");
    let text = "[[listeners]]\nname = \"my listener\"\naddress = \"127.0.0.1:1\"\n";
    assert_one(text, "listeners[0].name", Some(2), "invalid name \"my listener\"");
    let text = "[[listeners]]\naddress = \"127.0.0.1:1\"\n";
    assert_one(text, "listeners[0]", Some(1), "missing field `name`");
}

#[test]
fn listener_conflicts() {
    let text = format!("{LISTENER}[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8081\"\n");
    assert_one(&text, "listeners[1].name", Some(5), "duplicate name \"l\" (already used by listeners[0])");
    let text = format!("{LISTENER}[[listeners]]\nname = \"m\"\naddress = \"127.0.0.1:8080\"\n");
    assert_one(&text, "listeners[1].address", Some(6), "address 127.0.0.1:8080 overlaps listeners[0]");
    let text = format!("{LISTENER}[[listeners]]\nname = \"m\"\naddress = \"0.0.0.0:8080\"\n");
    assert_one(&text, "listeners[1].address", Some(6), "overlaps listeners[0] (127.0.0.1:8080)");
    let text = format!("{LISTENER}[[listeners]]\nname = \"m\"\naddress = \"[::]:8080\"\n");
    valid(&text);
}

#[test]
fn document_shape() {
    assert_one(&with_listener("[servr]\nworkers = 1\n"), "servr", Some(4), "unknown top-level key `servr`");
    assert_one(&format!("server = 1\n{LISTENER}"), "server", Some(1), "expected a [server] table");
    assert_one(&format!("[[server]]\nworkers = 1\n{LISTENER}"), "server", Some(1), "write [server], not [[server]]");
    let syntax = errors(&with_listener("[server\n"));
    assert_eq!(syntax.len(), 1);
    assert_eq!((syntax[0].0.as_str(), syntax[0].1), ("", Some(4)));
    assert!(syntax[0].2.starts_with("invalid TOML: "), "{}", syntax[0].2);
    let dup = errors(&with_listener("[server]\nvia = \"a\"\nvia = \"b\"\n"));
    assert_eq!((dup.len(), dup[0].1), (1, Some(6)), "{dup:?}");
}

#[test]
fn user_and_group() {
    let text = with_listener("[server]\nuser = \"nobody\"\ngroup = \"nogroup\"\n");
    let server = valid(&text).server;
    assert_eq!((server.user.as_deref(), server.group.as_deref()), (Some("nobody"), Some("nogroup")));
    let text = with_listener("[server]\nuser = \"gateway\"\n");
    assert_eq!(valid(&text).server.group, None);
    for bad in ["\"\"", "\"-x\"", "\"1000\"", "\"a b\"", "\"root:root\""] {
        let text = with_listener(&format!("[server]\nuser = {bad}\n"));
        assert_one(&text, "server.user", Some(5), "is not a user or group name");
    }
    let text = with_listener("[server]\ngroup = \"nogroup\"\n");
    assert_one(&text, "server.group", Some(5), "group needs server.user");
}
