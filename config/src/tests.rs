//! Whole-file tests: the public API, several problems at once, the shipped example configs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::time::Duration;

use super::*;

const MINIMAL: &str = "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n";

#[test]
fn defaults_of_a_minimal_file() {
    let config = parse(MINIMAL, "<string>").unwrap();
    let expected = Server {
        workers: Workers::Auto,
        io_driver: IoDriver::Auto,
        admin: Some(Admin { address: "127.0.0.1:9901".parse().unwrap(), token: None, per_worker_metrics: false }),
        drain_timeout: Duration::from_secs(30),
        drain_delay: Duration::ZERO,
        log_level: "info".to_owned(),
        via: "gateway".to_owned(),
        server_header: None,
        watch: true,
        deadline_header: None,
        upgrade_socket: None,
        hosts_file: None,
        user: None,
        group: None,
        access_log: None,
        limits: Limits {
            max_request_line_bytes: 8192,
            max_header_bytes: 65536,
            max_headers: 100,
            max_body_bytes: 16 * 1024 * 1024,
            max_response_header_bytes: 65536,
            max_connections_per_worker: 4096,
        },
        timeouts: Timeouts {
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            body_io: Duration::from_secs(30),
        },
        http2: Http2 {
            max_concurrent_streams: 100,
            max_header_list_bytes: 16384,
            initial_stream_window_bytes: 262_144,
            initial_connection_window_bytes: 1_048_576,
            max_frame_bytes: 16384,
            flood_window: Duration::from_secs(10),
            max_resets: 200,
            max_control_frames: 200,
            max_empty_frames: 100,
            stall_timeout: Duration::from_secs(5),
        },
    };
    assert_eq!(config.server, expected);
    assert_eq!(
        config.listeners,
        [Listener {
            name: "l".to_owned(),
            address: "127.0.0.1:8080".parse().unwrap(),
            backlog: 1024,
            protocols: vec![Protocol::Http1],
            tls: None,
            proxy_protocol: ProxyProtocol::Off,
            proxy_protocol_timeout: Duration::from_secs(5),
            trusted_proxies: Vec::new(),
            forwarded: false,
        }]
    );
    assert!(config.routes.is_empty() && config.clusters.is_empty());
    assert_eq!(
        config.overload,
        Overload {
            enabled: true,
            classes: ["critical", "high", "normal", "sheddable"].map(str::to_owned).to_vec(),
            default_class: 2,
            priority_header: None,
            trusted_sources: Vec::new(),
            trusted_identities: Vec::new(),
            queue_wait_factor: 0.9,
            first_class_reserve: true,
            queue_delay_target: Duration::from_millis(5),
            queue_delay_interval: Duration::from_millis(100),
        }
    );
}

#[test]
fn defaults_of_a_minimal_route_and_cluster() {
    let text = format!("{MINIMAL}[[routes]]\nname = \"r\"\ncluster = \"c\"\n[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\n");
    let config = parse(&text, "<string>").unwrap();
    let route = &config.routes[0];
    assert_eq!((route.priority, &route.rate_limit), (config.overload.default_class, &None));
    assert_eq!(config.overload.classes[route.priority], "normal");
    let gateway_config_retry = match &route.action {
        crate::model::Action::Proxy(p) => p.retry.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        gateway_config_retry,
        crate::model::RetryPolicy {
            retry_on: crate::model::RetryOn::CONNECT_FAILURE
                .union(crate::model::RetryOn::REFUSED_STREAM)
                .union(crate::model::RetryOn::RESET),
            num_retries: 2,
            per_try_timeout: None,
            retriable_status_codes: Vec::new(),
            backoff_base: Duration::from_millis(25),
            backoff_max: Duration::from_millis(250),
            max_replay_bytes: 65536,
        }
    );
    let cluster = &config.clusters[0];
    assert_eq!(cluster.retry_budget, crate::model::RetryBudget { percent: 20.0, min_concurrent: 3 });
    assert_eq!(cluster.caps, Caps { max_connections: 1024, max_pending: 1024, max_requests: 1024, max_retries: 64 });
    assert_eq!(
        cluster.adaptive_concurrency,
        AdaptiveConcurrency {
            enabled: false,
            initial_limit: 16,
            min_limit: 2,
            tolerance: 0.05,
            probe_interval: Duration::from_secs(10),
        }
    );
}

#[test]
fn three_mistakes_in_three_sections_are_three_errors() {
    let text = r#"[server]
workers = 2
drain_timeout = "30"

[[listeners]]
name = "public"
address = "0.0.0.0:8080"

[[routes]]
name = "api"
match = { path_prefix = "/v1" }
cluster = "apii"

[[clusters]]
name = "api"
endpoints = ["127.0.0.1:9000"]
balancer = "p2c"
conect_timeout = "3s"
"#;
    let errors = parse(text, "gateway.toml").unwrap_err();
    assert_eq!(errors.source, "gateway.toml");
    assert_eq!(
        errors.to_string(),
        "gateway.toml:3: server.drain_timeout: invalid duration \"30\": expected an integer followed by ms, s, m or h (e.g. \"250ms\", \"10s\", \"2m\", \"1h\")\n\
         gateway.toml:12: routes[0].cluster: unknown cluster \"apii\" (known: api)\n\
         gateway.toml:18: clusters[0].conect_timeout: unknown field `conect_timeout`, expected one of `name`, `endpoints`, `dns_refresh`, `balancer`, `connect_timeout`, `pool`, `caps`, `adaptive_concurrency`, `retry_budget`, `protocol`, `tls`, `health_check`, `outlier_detection`, `all_unhealthy`, `hash_key`"
    );
    let lines: Vec<Option<usize>> = errors.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [Some(3), Some(12), Some(18)]);
}

#[test]
fn syntax_error_is_fatal_with_its_line() {
    let text = format!("{MINIMAL}[server]\nworkers = = 2\n");
    let errors = parse(&text, "g.toml").unwrap_err();
    assert_eq!(errors.errors.len(), 1);
    assert_eq!(errors.errors[0].line, Some(5));
    assert!(errors.to_string().starts_with("g.toml:5: invalid TOML: "), "{errors}");
}

#[test]
fn load_reports_unreadable_files() {
    let missing = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-file.toml");
    let errors = load(&missing).unwrap_err();
    assert_eq!(errors.source, missing.display().to_string());
    assert_eq!(errors.errors.len(), 1);
    let error = &errors.errors[0];
    assert_eq!((error.path.as_str(), error.line), ("", None));
    assert!(error.message.starts_with("cannot read file: "), "{}", error.message);
}

#[test]
fn summary() {
    let config = parse(MINIMAL, "<string>").unwrap();
    assert_eq!(config.summary(), "1 listener, 0 routes, 0 clusters (0 endpoints), workers auto, io_driver auto");
    let text = format!(
        "[server]\nworkers = 4\nio_driver = \"epoll\"\n{MINIMAL}[[listeners]]\nname = \"m\"\naddress = \"127.0.0.1:8081\"\n\
         [[routes]]\nname = \"a\"\ncluster = \"c\"\n[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n"
    );
    assert_eq!(
        parse(&text, "<string>").unwrap().summary(),
        "2 listeners, 1 route, 1 cluster (2 endpoints), workers 4, io_driver epoll"
    );
}

/// The configs shipped under packaging/examples are valid, so they never rot.
#[test]
fn example_configs_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/examples");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Err(errors) = load(&path) {
                panic!("{errors}");
            }
            checked.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    checked.sort();
    assert!(
        checked.contains(&"quickstart.toml".to_owned()) && checked.contains(&"full.toml".to_owned()),
        "{checked:?}"
    );
}

#[test]
fn quickstart_is_what_the_readme_promises() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/examples");
    let config = load(&dir.join("quickstart.toml")).unwrap();
    assert_eq!(config.listeners[0].name, "quickstart");
    assert_eq!(config.listeners[0].address.to_string(), "127.0.0.1:8080");
    assert_eq!(config.server.admin.as_ref().unwrap().address.to_string(), "127.0.0.1:9901");
    let home = config.routes.iter().find(|r| r.matcher.path == Some(PathMatch::Exact("/".to_owned()))).unwrap();
    assert!(matches!(&home.action, Action::Direct(d) if d.status == 200 && d.body == "hello from gateway\n"));
    let origin =
        config.routes.iter().find(|r| r.matcher.path == Some(PathMatch::Prefix("/origin".to_owned()))).unwrap();
    let Action::Proxy(proxy) = &origin.action else { panic!("{:?}", origin.action) };
    let cluster = &config.clusters[proxy.cluster];
    assert_eq!(cluster.name, "local-origin");
    assert_eq!(cluster.endpoints[0].address.to_string(), "127.0.0.1:9000");
}

#[test]
fn full_example_sets_every_key() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/examples");
    let text = std::fs::read_to_string(dir.join("full.toml")).unwrap();
    for key in [
        "workers",
        "io_driver",
        "admin",
        "token",
        "drain_timeout",
        "log_level",
        "via",
        "watch",
        "format",
        "path",
        "buffer_lines",
        "max_request_line_bytes",
        "max_header_bytes",
        "max_headers",
        "max_body_bytes",
        "max_response_header_bytes",
        "max_connections_per_worker",
        "header_read",
        "idle",
        "body_io",
        "backlog",
        "host",
        "path_prefix",
        "path",
        "methods",
        "headers",
        "value",
        "cluster",
        "timeout",
        "direct_response",
        "status",
        "body",
        "redirect",
        "scheme",
        "port",
        "keep_query",
        "endpoints",
        "weight",
        "balancer",
        "connect_timeout",
        "dns_refresh",
        "hosts_file",
        "max_idle_per_endpoint",
        "idle_timeout",
        "enabled",
        "classes",
        "default_class",
        "priority_header",
        "trusted_sources",
        "trusted_identities",
        "queue_wait_factor",
        "queue_delay_target",
        "queue_delay_interval",
        "priority",
        "rate_limit",
        "rate",
        "burst",
        "key",
        "mode",
        "max_delay",
        "scope",
        "max_keys",
        "caps",
        "max_connections",
        "max_pending",
        "max_requests",
        "max_retries",
        "retry_budget",
        "percent",
        "min_concurrent",
        "retry",
        "retry_on",
        "num_retries",
        "per_try_timeout",
        "retriable_status_codes",
        "backoff",
        "base",
        "max",
        "max_replay_bytes",
        "deadline_header",
        "user",
        "group",
        "adaptive_concurrency",
        "initial_limit",
        "min_limit",
        "tolerance",
        "probe_interval",
        "protocols",
        "certificates",
        "cert",
        "names",
        "unknown_sni",
        "min_version",
        "handshake_timeout",
        "session_tickets",
        "session_cache",
        "client_auth",
        "ca",
        "identity_header",
        "max_concurrent_streams",
        "max_header_list_bytes",
        "initial_stream_window_bytes",
        "initial_connection_window_bytes",
        "max_frame_bytes",
        "flood_window",
        "max_resets",
        "max_control_frames",
        "max_empty_frames",
        "stall_timeout",
        "websocket",
        "protocol",
        "tls",
        "sni",
        "split",
        "sticky",
        "cookie",
        "pin",
        "mirror",
        "percent",
        "max_in_flight",
        "all_unhealthy",
        "outlier_detection",
        "consecutive_5xx",
        "consecutive_gateway_errors",
        "base_ejection_time",
        "max_ejection_time",
        "max_ejection_percent",
        "health_check",
        "interval",
        "healthy_threshold",
        "unhealthy_threshold",
        "expected_statuses",
        "hash_key",
        "server_header",
        "hsts",
        "max_age",
        "include_subdomains",
        "preload",
    ] {
        let set = text.lines().any(|line| {
            let line = line.trim_start();
            !line.starts_with('#')
                && (line.starts_with(&format!("{key} ="))
                    || line.contains(&format!(" {key} ="))
                    || line.contains(&format!("{{ {key} =")))
        });
        assert!(set, "full.toml does not set `{key}`");
    }
    let config = parse(&text, "full.toml").unwrap();
    assert!(config.routes.iter().any(|r| matches!(r.action, Action::Redirect(_))));
    assert!(config.clusters.iter().any(|c| c.balancer == Balancer::RoundRobin));
    assert!(config.clusters.iter().any(|c| c.balancer == Balancer::Maglev && c.hash_key.is_some()));
    assert!(config.clusters.iter().any(|c| c.health_check.is_some()));
    let overload = &config.overload;
    assert_eq!(overload.priority_header.as_deref(), Some("x-gateway-priority"));
    assert!(overload.trusted_sources.iter().any(|c| c.contains("10.1.2.3".parse().unwrap())));
    assert!(overload.trusted_sources.iter().any(|c| c.contains("::1".parse().unwrap())));
    let health = config.routes.iter().find(|r| r.name == "health").unwrap();
    assert_eq!(overload.classes[health.priority], "critical");
    let limit = config.routes.iter().find_map(|r| r.rate_limit.as_ref()).unwrap();
    assert_eq!(limit.key, RateLimitKey::Header("x-api-key".to_owned()));
    assert!(matches!(limit.mode, RateLimitMode::Delay { max_delay } if max_delay == Duration::from_millis(200)));
    let api = config.clusters.iter().find(|c| c.name == "api").unwrap();
    assert_eq!((api.caps.max_requests, api.adaptive_concurrency.initial_limit), (512, 32));
    let https = config.listeners.iter().find(|l| l.name == "https").unwrap();
    assert_eq!(https.protocols, [Protocol::H2, Protocol::Http1]);
    let tls = https.tls.as_ref().unwrap();
    assert_eq!(tls.certificates.len(), 2);
    assert_eq!(tls.client_auth.as_ref().unwrap().mode, ClientAuthMode::Optional);
    assert!(config.routes.iter().any(|r| r.websocket));
    let payments = config.clusters.iter().find(|c| c.name == "payments").unwrap();
    assert_eq!(payments.protocol, UpstreamProtocol::Auto);
    assert_eq!(payments.tls.as_ref().unwrap().sni, "payments.internal.example");
    let canary = config.routes.iter().find(|r| r.name == "shop-canary").unwrap();
    let split = canary.split.as_ref().unwrap();
    assert_eq!(split.targets.iter().map(|t| t.weight).collect::<Vec<_>>(), [95, 5]);
    assert_eq!(split.sticky, Some(crate::StickyKey::Cookie("uid".to_owned())));
    assert_eq!(split.pins.len(), 1);
    let mirror = canary.mirror.as_ref().unwrap();
    assert_eq!(config.clusters[mirror.cluster].name, "web-shadow");
    assert_eq!(config.server.server_header.as_deref(), Some("edge"));
    let api = config.routes.iter().find(|r| r.name == "api").unwrap();
    assert_eq!(api.hsts.as_ref().unwrap().value, "max-age=31536000; includeSubDomains");
}

mod defaults;
