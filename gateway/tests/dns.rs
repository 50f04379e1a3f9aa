//! End-to-end: a cluster endpoint given as a host name follows its addresses without a reload.
//! The name lives in a hosts file (`server.hosts_file`) that the test rewrites; the origins
//! listen on distinct loopback addresses with one port, as a headless Service's pods do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::process::TempDir;
use common::*;

/// An HTTP/1.1 keep-alive origin answering `body`, counting the connections it accepted.
struct Named {
    accepted: Arc<AtomicUsize>,
    /// Connections the gateway closed.
    closed: Arc<AtomicUsize>,
}

fn named_origin(listener: TcpListener, body: &'static str) -> Named {
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (count, ended) = (Arc::clone(&accepted), Arc::clone(&closed));
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let ended = Arc::clone(&ended);
            std::thread::spawn(move || {
                serve(s, body);
                ended.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Named { accepted, closed }
}

fn serve(s: TcpStream, body: &str) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut discard = vec![0u8; length];
        if r.read_exact(&mut discard).is_err() {
            return;
        }
        let reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        if w.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Three listeners on 127.0.0.2, .3 and .4 with one port (tries a few ports).
fn bind_three() -> (u16, [TcpListener; 3]) {
    for _ in 0..50 {
        let a = TcpListener::bind("127.0.0.2:0").unwrap();
        let port = a.local_addr().unwrap().port();
        let (Ok(b), Ok(c)) = (TcpListener::bind(("127.0.0.3", port)), TcpListener::bind(("127.0.0.4", port))) else {
            continue;
        };
        return (port, [a, b, c]);
    }
    panic!("no port free on 127.0.0.2, .3 and .4 at once");
}

/// Replaces the hosts file at once (a reader never sees half of it).
fn write_hosts(dir: &TempDir, content: &str) {
    let tmp = dir.path("hosts.tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, dir.path("hosts")).unwrap();
}

fn admin_json(admin: SocketAddr, path: &str) -> serde_json::Value {
    serde_json::from_slice(&get(admin, path).body).expect("admin JSON")
}

/// The bodies of `n` requests, each on a new client connection.
fn bodies(addr: SocketAddr, n: usize) -> Vec<String> {
    (0..n).map(|_| get(addr, "/").text()).collect()
}

#[test]
fn a_host_name_endpoint_follows_its_addresses_without_a_reload() {
    let (port, [la, lb, lc]) = bind_three();
    let (a, b, c) = (named_origin(la, "A"), named_origin(lb, "B"), named_origin(lc, "C"));
    let dir = TempDir::new("dns");
    write_hosts(&dir, "# test names\n127.0.0.2 origin.test\n");
    let toml = format!(
        r#"
[server]
workers = 1
admin = {{ address = "127.0.0.1:0" }}
hosts_file = "{hosts}"
log_level = "warn"

[[listeners]]
name = "main"
address = "127.0.0.1:0"

[[routes]]
name = "default"
cluster = "origin"
timeout = "2s"

[[clusters]]
name = "origin"
endpoints = ["origin.test:{port}", "127.0.0.4:{port}"]
dns_refresh = "100ms"
balancer = "round_robin"
"#,
        hosts = dir.path("hosts").display()
    );
    let gw = TestGateway::start(&toml);
    let admin = gw.gw.as_ref().unwrap().admin_addr().unwrap();
    let version = admin_json(admin, "/config")["version"].as_u64().unwrap();
    let seen = bodies(gw.addr, 6);
    assert!(seen.iter().all(|s| s == "A" || s == "C") && seen.contains(&"A".into()), "{seen:?}");
    assert_eq!(a.accepted.load(Ordering::SeqCst), 1, "one pooled connection to A");

    // The name moves to B: traffic follows, without a reload.
    write_hosts(&dir, "127.0.0.3 origin.test\n");
    assert!(
        wait_until(Duration::from_secs(10), || bodies(gw.addr, 2).contains(&"B".into())),
        "traffic never reached B"
    );
    let seen = bodies(gw.addr, 6);
    assert!(seen.iter().all(|s| s == "B" || s == "C"), "A still served after it left the name: {seen:?}");
    assert!(
        wait_until(Duration::from_secs(5), || a.closed.load(Ordering::SeqCst) == 1),
        "A's idle pooled connection was not closed when A left the name"
    );
    let c_connections = c.accepted.load(Ordering::SeqCst);
    assert_eq!(c_connections, 1, "the IP endpoint kept its pooled connection");
    let b_connections = b.accepted.load(Ordering::SeqCst);
    assert_eq!(b_connections, 1);

    // Both A and B: every address of the name is an endpoint; B and C keep their connections.
    write_hosts(&dir, "127.0.0.3 origin.test\n127.0.0.2 origin.test\n");
    assert!(wait_until(Duration::from_secs(10), || bodies(gw.addr, 3).contains(&"A".into())), "A never came back");
    let seen = bodies(gw.addr, 9);
    for want in ["A", "B", "C"] {
        assert!(seen.contains(&want.into()), "{want} missing: {seen:?}");
    }
    assert_eq!(b.accepted.load(Ordering::SeqCst), b_connections, "B kept its pooled connection");
    assert_eq!(c.accepted.load(Ordering::SeqCst), c_connections, "C kept its pooled connection");
    assert_eq!(a.accepted.load(Ordering::SeqCst), 2, "A is a new endpoint: a new connection");
    let clusters = admin_json(admin, "/clusters");
    let cluster = &clusters["clusters"][0];
    let addresses: Vec<&str> =
        cluster["endpoints"].as_array().unwrap().iter().map(|e| e["address"].as_str().unwrap()).collect();
    let (ea, eb, ec) = (format!("127.0.0.2:{port}"), format!("127.0.0.3:{port}"), format!("127.0.0.4:{port}"));
    assert_eq!(addresses, [ea.as_str(), eb.as_str(), ec.as_str()], "{cluster}");
    assert_eq!(cluster["endpoints"][0]["name"], format!("origin.test:{port}"));

    // The name stops resolving to a usable address: the last good set stays, counted and shown.
    write_hosts(&dir, "0.0.0.0 origin.test\n");
    let failed = wait_until(Duration::from_secs(10), || {
        admin_json(admin, "/clusters")["clusters"][0]["dns"]["failures"].as_u64().unwrap_or(0) >= 2
    });
    assert!(failed, "{}", admin_json(admin, "/clusters"));
    let dns = admin_json(admin, "/clusters")["clusters"][0]["dns"].clone();
    let name = &dns["names"][0];
    assert!(name["last_error"].as_str().unwrap().contains("no usable address"), "{dns}");
    assert_eq!(name["in_use"], serde_json::json!([ea, eb]), "{dns}");
    assert!(name["last_success"].as_f64().is_some(), "{dns}");
    let seen = bodies(gw.addr, 9);
    for want in ["A", "B", "C"] {
        assert!(seen.contains(&want.into()), "the last good set stays: {want} missing: {seen:?}");
    }
    let metrics = String::from_utf8(get(admin, "/metrics").body).unwrap();
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gateway_dns_resolution_failures_total{cluster=\"origin\"} "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(failures.is_some_and(|n| n >= 2), "{metrics}");

    // Resolving again: back to A alone (the failure clears), and still no reload.
    write_hosts(&dir, "127.0.0.2 origin.test\n");
    assert!(
        wait_until(Duration::from_secs(10), || !bodies(gw.addr, 4).contains(&"B".into())),
        "B still served after it left the name"
    );
    let dns = admin_json(admin, "/clusters")["clusters"][0]["dns"].clone();
    assert!(dns["names"][0]["last_error"].is_null(), "{dns}");
    assert!(dns["changes"].as_u64().unwrap() >= 3, "{dns}");
    assert_eq!(admin_json(admin, "/config")["version"].as_u64().unwrap(), version, "no reload happened");
    assert_eq!(admin_json(admin, "/config")["reload"]["reloads_ok"], 0);
}

#[test]
fn a_name_that_does_not_resolve_at_load_is_an_error() {
    let dir = TempDir::new("dns-load");
    write_hosts(&dir, "0.0.0.0 nowhere.test\n");
    let toml = format!(
        "[server]\nhosts_file = \"{}\"\n[[listeners]]\nname = \"main\"\naddress = \"127.0.0.1:0\"\n\
         [[clusters]]\nname = \"c\"\nendpoints = [\"nowhere.test:80\"]\n",
        dir.path("hosts").display()
    );
    let errors = gateway_config::parse(&toml, "<test>").unwrap_err().to_string();
    assert!(errors.contains("clusters[0].endpoints[0]") && errors.contains("no usable address"), "{errors}");
}
