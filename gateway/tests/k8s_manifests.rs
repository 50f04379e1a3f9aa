//! The Kubernetes manifests under `packaging/k8s` stay consistent with the gateway: every YAML
//! document parses and has an expected kind, the ConfigMap's gateway.toml is a valid
//! configuration, and the DaemonSet's probes, drain timing and security settings agree with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_norway::Value;

#[test]
fn every_document_parses_and_has_an_expected_kind() {
    let docs = all_documents();
    let kinds: Vec<(String, String)> =
        docs.iter().map(|(file, doc)| (file.clone(), str_at(doc, &["kind"]).to_owned())).collect();
    for (file, kind) in &kinds {
        assert!(
            ["Namespace", "ConfigMap", "Secret", "DaemonSet", "PodDisruptionBudget", "Kustomization", "Service"]
                .contains(&kind.as_str()),
            "{file}: unexpected kind {kind}"
        );
    }
    for expected in ["Namespace", "ConfigMap", "Secret", "DaemonSet", "PodDisruptionBudget", "Kustomization", "Service"]
    {
        assert_eq!(kinds.iter().filter(|(_, k)| k == expected).count(), 1, "one {expected} in {kinds:?}");
    }
    for (file, doc) in &docs {
        if str_at(doc, &["kind"]) != "Kustomization" {
            assert_eq!(str_at(doc, &["metadata", "namespace"]).is_empty(), file == "namespace.yaml", "{file}");
        }
        if str_at(doc, &["kind"]) == "Service" {
            // The example is the application's, in its own namespace.
            assert_eq!(str_at(doc, &["metadata", "namespace"]), "web", "{file}");
        }
    }
}

#[test]
fn kustomization_lists_every_resource_but_the_example_secret() {
    let kustomization = single("Kustomization");
    let listed: Vec<&str> = seq_at(&kustomization, &["resources"]).iter().map(|v| v.as_str().unwrap()).collect();
    for file in yaml_files() {
        let name = file.file_name().unwrap().to_str().unwrap();
        let expected = !matches!(name, "kustomization.yaml" | "secret-example.yaml" | "headless-service-example.yaml");
        assert_eq!(listed.contains(&name), expected, "{name} in kustomization resources {listed:?}");
    }
    for name in &listed {
        assert!(k8s_dir().join(name).is_file(), "{name} listed but missing");
    }
}

#[test]
fn configmap_holds_a_valid_gateway_config() {
    let config = gateway_config();
    let admin = config.server.admin.as_ref().expect("admin enabled");
    assert_eq!(admin.address.port(), ADMIN_PORT);
    assert!(admin.address.ip().is_unspecified(), "admin reachable by kubelet and load balancers on the node address");
    assert!(admin.token.is_some(), "non-loopback admin needs a token");
    // The pod starts as the non-root runAsUser: a server.user naming another user is refused.
    assert_eq!((config.server.user.as_deref(), config.server.group.as_deref()), (None, None));
    let ports: Vec<u16> = config.listeners.iter().map(|l| l.address.port()).collect();
    assert_eq!(ports, [80, 443]);
    let tls = config.listeners[1].tls.as_ref().expect("443 speaks TLS");
    for cert in &tls.certificates {
        assert!(cert.cert.starts_with(TLS_MOUNT) && cert.key.starts_with(TLS_MOUNT), "{cert:?}");
    }
}

#[test]
fn daemonset_runs_on_the_host_network_with_probes_on_the_admin_port() {
    let ds = single("DaemonSet");
    let pod = at(&ds, &["spec", "template", "spec"]);
    assert_eq!(at(pod, &["hostNetwork"]).as_bool(), Some(true));
    assert_eq!(str_at(pod, &["dnsPolicy"]), "ClusterFirstWithHostNet");
    assert_eq!(str_at(&ds, &["spec", "updateStrategy", "type"]), "RollingUpdate");
    assert_eq!(at(&ds, &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"]).as_u64(), Some(1));
    assert_eq!(at(&ds, &["spec", "updateStrategy", "rollingUpdate", "maxSurge"]).as_u64(), Some(0));

    let container = gateway_container(&ds);
    let ports: BTreeMap<&str, u64> = seq_at(container, &["ports"])
        .iter()
        .map(|p| (str_at(p, &["name"]), at(p, &["containerPort"]).as_u64().unwrap()))
        .collect();
    for (probe, path) in [("readinessProbe", "/ready"), ("livenessProbe", "/healthz")] {
        assert_eq!(str_at(container, &[probe, "httpGet", "path"]), path, "{probe}");
        let port = at(container, &[probe, "httpGet", "port"]);
        let port = port.as_u64().or_else(|| port.as_str().and_then(|name| ports.get(name).copied()));
        assert_eq!(port, Some(u64::from(ADMIN_PORT)), "{probe} on the admin port of the ConfigMap's config");
    }

    let args: Vec<&str> = seq_at(container, &["args"]).iter().map(|a| a.as_str().unwrap()).collect();
    let config_path = Path::new(args[args.iter().position(|a| *a == "--config").unwrap() + 1]);
    let mounts = seq_at(container, &["volumeMounts"]);
    let config_mount = mounts.iter().find(|m| config_path.parent() == Some(Path::new(str_at(m, &["mountPath"]))));
    let config_mount = config_mount.expect("the --config file's directory is a volume mount");
    assert!(at(config_mount, &["subPath"]).is_null(), "subPath mounts never update");
    let config_volume = volume(pod, str_at(config_mount, &["name"]));
    assert_eq!(str_at(config_volume, &["configMap", "name"]), str_at(&single("ConfigMap"), &["metadata", "name"]));
    let key = config_path.file_name().unwrap().to_str().unwrap();
    assert!(!at(&single("ConfigMap"), &["data", key]).is_null(), "ConfigMap has {key}");

    let tls_mount = mounts.iter().find(|m| str_at(m, &["mountPath"]) == TLS_MOUNT).expect("TLS Secret mount");
    let secret = single("Secret");
    assert_eq!(str_at(&secret, &["type"]), "kubernetes.io/tls");
    assert_eq!(
        str_at(volume(pod, str_at(tls_mount, &["name"])), &["secret", "secretName"]),
        str_at(&secret, &["metadata", "name"])
    );
}

#[test]
fn daemonset_outlasts_the_drain_timeout() {
    let ds = single("DaemonSet");
    let grace =
        Duration::from_secs(at(&ds, &["spec", "template", "spec", "terminationGracePeriodSeconds"]).as_u64().unwrap());
    let drain_timeout = gateway_config().server.drain_timeout;
    assert!(
        grace > drain_timeout,
        "terminationGracePeriodSeconds {grace:?} must exceed drain_timeout {drain_timeout:?}"
    );

    // The hook is the gateway binary itself (the image has no shell or HTTP client):
    // `gateway drain --wait` on the same configuration file, which waits at most drain_timeout
    // plus 5 s for the exit.
    let container = gateway_container(&ds);
    let hook: Vec<&str> =
        seq_at(container, &["lifecycle", "preStop", "exec", "command"]).iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(hook.first().copied(), Some(IMAGE_BINARY), "{hook:?}");
    assert_eq!(hook.get(1).copied(), Some("drain"), "{hook:?}");
    assert!(hook.contains(&"--wait"), "{hook:?}");
    let args: Vec<&str> = seq_at(container, &["args"]).iter().map(|a| a.as_str().unwrap()).collect();
    let config_of = |argv: &[&str]| argv.iter().position(|a| *a == "--config").map(|i| argv[i + 1].to_owned());
    assert_eq!(config_of(&hook), config_of(&args), "the hook drains the gateway of the same config");
    let waits = drain_timeout + Duration::from_secs(5);
    assert!(waits < grace, "preStop waits up to {waits:?}: grace {grace:?}");
}

/// Where `packaging/container/Containerfile` installs the binary (its ENTRYPOINT).
const IMAGE_BINARY: &str = "/usr/bin/gateway";

#[test]
fn daemonset_is_unprivileged_and_guaranteed() {
    let ds = single("DaemonSet");
    let pod = at(&ds, &["spec", "template", "spec"]);
    let container = gateway_container(&ds);
    let security = at(container, &["securityContext"]);
    assert_ne!(at(security, &["privileged"]).as_bool(), Some(true));
    assert_eq!(at(security, &["allowPrivilegeEscalation"]).as_bool(), Some(false));
    assert_eq!(at(security, &["readOnlyRootFilesystem"]).as_bool(), Some(true));
    assert_eq!(strings(at(security, &["capabilities", "drop"])), ["ALL"]);
    assert_eq!(strings(at(security, &["capabilities", "add"])), ["NET_BIND_SERVICE"]);
    assert_eq!(at(pod, &["securityContext", "runAsNonRoot"]).as_bool(), Some(true));
    assert!(at(pod, &["securityContext", "runAsUser"]).as_u64().unwrap() > 0);
    let seccomp = at(pod, &["securityContext", "seccompProfile"]);
    match str_at(seccomp, &["type"]) {
        "RuntimeDefault" => {}
        "Localhost" => assert!(str_at(seccomp, &["localhostProfile"]).ends_with("seccomp-gateway.json")),
        other => panic!("seccomp profile {other}"),
    }

    let requests = at(container, &["resources", "requests"]);
    let limits = at(container, &["resources", "limits"]);
    assert_eq!(requests, limits, "Guaranteed QoS: requests equal limits");
    let cpu = at(limits, &["cpu"]);
    let cpu = cpu.as_u64().or_else(|| cpu.as_str().and_then(|s| s.parse().ok()));
    assert!(cpu.is_some_and(|n| n >= 1), "an integer CPU count gets exclusive cores from the static CPU manager");
    assert!(!at(limits, &["memory"]).is_null());
}

#[test]
fn pod_disruption_budget_selects_the_daemonset_pods() {
    let ds = single("DaemonSet");
    let pdb = single("PodDisruptionBudget");
    assert_eq!(at(&pdb, &["spec", "selector"]), at(&ds, &["spec", "selector"]));
    assert_eq!(at(&ds, &["spec", "selector", "matchLabels"]), at(&ds, &["spec", "template", "metadata", "labels"]));
}

#[test]
fn seccomp_profile_is_default_deny_and_allows_io_uring() {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Profile {
        default_action: String,
        architectures: Vec<String>,
        syscalls: Vec<Rule>,
    }
    #[derive(Deserialize)]
    struct Rule {
        names: Vec<String>,
        action: String,
        #[serde(default)]
        args: Vec<serde_json::Value>,
    }
    let text = std::fs::read_to_string(k8s_dir().join("seccomp-gateway.json")).unwrap();
    let profile: Profile = serde_json::from_str(&text).unwrap();
    assert_eq!(profile.default_action, "SCMP_ACT_ERRNO");
    assert!(profile.architectures.iter().any(|a| a == "SCMP_ARCH_X86_64"));
    assert!(profile.architectures.iter().any(|a| a == "SCMP_ARCH_AARCH64"));
    let allowed = |name: &str| {
        profile
            .syscalls
            .iter()
            .any(|r| r.action == "SCMP_ACT_ALLOW" && r.args.is_empty() && r.names.iter().any(|n| n == name))
    };
    // io_uring on top of what the gateway needs on epoll and to start.
    for name in ["io_uring_setup", "io_uring_enter", "io_uring_register", "epoll_wait", "accept4", "sched_setaffinity"]
    {
        assert!(allowed(name), "{name} allowed");
    }
    for name in ["mount", "unshare", "setns", "bpf", "kexec_load", "init_module", "reboot"] {
        assert!(
            !profile.syscalls.iter().any(|r| r.action == "SCMP_ACT_ALLOW" && r.names.iter().any(|n| n == name)),
            "{name}"
        );
    }
}

const ADMIN_PORT: u16 = 9901;
const TLS_MOUNT: &str = "/etc/gateway/tls";

fn k8s_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/k8s")
}

fn yaml_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(k8s_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    files
}

/// Every YAML document of every file, with its file name.
fn all_documents() -> Vec<(String, Value)> {
    let mut docs = Vec::new();
    for file in yaml_files() {
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_norway::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
            if !value.is_null() {
                docs.push((name.clone(), value));
            }
        }
    }
    docs
}

fn single(kind: &str) -> Value {
    let mut found = all_documents().into_iter().filter(|(_, d)| str_at(d, &["kind"]) == kind);
    let (_, doc) = found.next().unwrap_or_else(|| panic!("no {kind}"));
    assert!(found.next().is_none(), "more than one {kind}");
    doc
}

/// The ConfigMap's gateway.toml, loaded with the example headless Service's name answered by a
/// hosts file (there is no cluster DNS here) with two pod addresses.
fn gateway_config() -> gateway_config::Config {
    let configmap = single("ConfigMap");
    let text = str_at(&configmap, &["data", "gateway.toml"]);
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let hosts = std::env::temp_dir().join(format!("gw-k8s-hosts-{}-{call}", std::process::id()));
    std::fs::write(&hosts, format!("10.244.1.7 {HEADLESS}\n10.244.2.9 {HEADLESS}\n")).unwrap();
    let text = text.replacen("[server]\n", &format!("[server]\nhosts_file = {:?}\n", hosts.display().to_string()), 1);
    let config = gateway_config::parse(&text, "configmap.yaml:gateway.toml").unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&hosts);
    config
}

/// The name of the headless Service in headless-service-example.yaml.
const HEADLESS: &str = "web-pods.web.svc.cluster.local";

#[test]
fn the_web_cluster_follows_the_pods_of_a_headless_service() {
    let service = single("Service");
    assert_eq!(str_at(&service, &["spec", "clusterIP"]), "None", "headless");
    let name = format!(
        "{}.{}.svc.cluster.local",
        str_at(&service, &["metadata", "name"]),
        str_at(&service, &["metadata", "namespace"])
    );
    assert_eq!(name, HEADLESS);
    let port = at(&seq_at(&service, &["spec", "ports"])[0], &["port"]).as_u64().unwrap();
    let config = gateway_config();
    let web = config.clusters.iter().find(|c| c.name == "web").expect("cluster web");
    assert_eq!(web.configured[0].name, format!("{HEADLESS}:{port}"));
    assert_eq!(web.dns_refresh, Some(Duration::from_secs(5)));
    let pods: Vec<String> = web.endpoints.iter().map(|e| e.address.to_string()).collect();
    assert_eq!(pods, ["10.244.1.7:8080", "10.244.2.9:8080"], "every pod is an endpoint");
}

fn gateway_container(ds: &Value) -> &Value {
    let containers = seq_at(ds, &["spec", "template", "spec", "containers"]);
    containers.iter().find(|c| str_at(c, &["name"]) == "gateway").expect("container gateway")
}

fn volume<'a>(pod: &'a Value, name: &str) -> &'a Value {
    seq_at(pod, &["volumes"]).iter().find(|v| str_at(v, &["name"]) == name).unwrap_or_else(|| panic!("volume {name}"))
}

/// The value at `path`, or `Null` when a key is missing.
fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    static NULL: Value = Value::Null;
    path.iter().try_fold(value, |v, key| v.get(*key)).unwrap_or(&NULL)
}

/// The string at `path`, or "" when it is missing or not a string.
fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    at(value, path).as_str().unwrap_or("")
}

fn seq_at<'a>(value: &'a Value, path: &[&str]) -> &'a [Value] {
    at(value, path).as_sequence().map(Vec::as_slice).unwrap_or_else(|| panic!("{path:?} is not a sequence"))
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_sequence().map(|s| s.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}
