//! Host-name endpoints: every address, `dns_refresh`, `server.hosts_file`.

use std::path::PathBuf;

use super::{assert_one, errors, valid, LISTENER};

/// A hosts file with `content` in a fresh temp directory (removed by the caller).
fn hosts(test: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gw-config-dns-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hosts");
    std::fs::write(&file, content).unwrap();
    file
}

/// `[server]` with `hosts_file` on lines 1-2, the listener on 3-5, the cluster from line 6.
fn config(file: &std::path::Path, cluster: &str) -> String {
    format!("[server]\nhosts_file = \"{}\"\n{LISTENER}[[clusters]]\nname = \"c\"\n{cluster}", file.display())
}

#[test]
fn a_name_yields_every_address_with_its_weight() {
    let file = hosts("every", "127.0.0.3 svc.test\n127.0.0.2 svc.test\n");
    let c = valid(&config(&file, "endpoints = [{ address = \"svc.test:81\", weight = 4 }, \"10.0.0.1:80\"]\n"));
    let cluster = &c.clusters[0];
    let got: Vec<(String, String, u32)> =
        cluster.endpoints.iter().map(|e| (e.name.clone(), e.address.to_string(), e.weight)).collect();
    let want = [
        ("svc.test:81".to_owned(), "127.0.0.2:81".to_owned(), 4),
        ("svc.test:81".to_owned(), "127.0.0.3:81".to_owned(), 4),
        ("10.0.0.1:80".to_owned(), "10.0.0.1:80".to_owned(), 1),
    ];
    assert_eq!(got, want);
    assert_eq!(cluster.configured.len(), 2);
    assert!(cluster.configured[0].is_name && !cluster.configured[1].is_name);
    assert_eq!(cluster.dns_refresh, Some(std::time::Duration::from_secs(5)), "the default with a name");
    assert_eq!(c.server.hosts_file.as_deref(), Some(file.as_path()));
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn dns_refresh_rules() {
    let file = hosts("refresh", "127.0.0.2 svc.test\n");
    let c = valid(&config(&file, "endpoints = [\"svc.test:80\"]\ndns_refresh = \"250ms\"\n"));
    assert_eq!(c.clusters[0].dns_refresh, Some(std::time::Duration::from_millis(250)));
    let literal = valid(&config(&file, "endpoints = [\"127.0.0.1:80\"]\n"));
    assert_eq!(literal.clusters[0].dns_refresh, None, "IP literals are never re-resolved");
    assert_one(
        &config(&file, "endpoints = [\"svc.test:80\"]\ndns_refresh = \"10ms\"\n"),
        "clusters[0].dns_refresh",
        Some(9),
        "between 100ms and 1h",
    );
    assert_one(
        &config(&file, "endpoints = [\"127.0.0.1:80\"]\ndns_refresh = \"5s\"\n"),
        "clusters[0].dns_refresh",
        Some(9),
        "every endpoint here is an IP address",
    );
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn an_address_twice_is_refused() {
    let file = hosts("twice", "127.0.0.2 a.test\n127.0.0.3 a.test\n");
    assert_one(
        &config(&file, "endpoints = [\"a.test:80\", \"127.0.0.3:80\"]\n"),
        "clusters[0].endpoints[1]",
        Some(8),
        "resolves to 127.0.0.3:80, like endpoints[1] (\"a.test:80\")",
    );
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn hosts_file_must_be_readable() {
    let missing = std::env::temp_dir().join(format!("gw-config-dns-{}-missing/hosts", std::process::id()));
    let text = config(&missing, "endpoints = [\"127.0.0.1:80\"]\n");
    assert_one(&text, "server.hosts_file", Some(2), "cannot read");
    // A name then fails too, with the reason.
    let text = config(&missing, "endpoints = [\"svc.test:80\"]\n");
    let found = errors(&text);
    assert!(found
        .iter()
        .any(|(path, _, m)| path == "clusters[0].endpoints[0]" && m.contains("cannot read hosts_file")));
}
