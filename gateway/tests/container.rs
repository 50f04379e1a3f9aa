//! `packaging/container/Containerfile` agrees with the Kubernetes manifests (user, binary, the
//! preStop hook it must be able to run), and, where a container builder runs, builds and runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn containerfile() -> String {
    std::fs::read_to_string(repo().join("packaging/container/Containerfile")).unwrap()
}

/// The instructions of the final stage (after the last `FROM`), continuation lines joined.
fn final_stage(text: &str) -> Vec<String> {
    let joined = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
    let joined = joined.replace("\\\n", " ");
    let lines: Vec<String> = joined.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    lines[last_from..].to_vec()
}

fn instruction<'a>(stage: &'a [String], name: &str) -> Vec<&'a str> {
    stage.iter().filter_map(|l| l.strip_prefix(name).map(str::trim)).collect()
}

fn daemonset() -> String {
    std::fs::read_to_string(repo().join("packaging/k8s/daemonset.yaml")).unwrap()
}

#[test]
fn the_image_runs_what_the_daemonset_expects() {
    let stage = final_stage(&containerfile());
    let entrypoint = instruction(&stage, "ENTRYPOINT ");
    assert_eq!(entrypoint, [r#"["/usr/bin/gateway"]"#], "the binary itself, no shell or init in front");
    assert_eq!(instruction(&stage, "USER "), ["65532:65532"]);
    let ds = daemonset();
    assert!(ds.contains("runAsUser: 65532") && ds.contains("runAsGroup: 65532"), "the DaemonSet runs the image's user");
    // The file capability is set in the final stage (a COPY from another stage drops it).
    let runs = instruction(&stage, "RUN ").join("\n");
    assert!(runs.contains("setcap cap_net_bind_service=+ep /usr/bin/gateway"), "{runs}");
    assert!(runs.contains("ca-certificates"), "CA certificates for upstream TLS");
    assert!(runs.contains("/etc/gateway/config") && runs.contains("/etc/gateway/tls"), "{runs}");
    // The preStop hook is the image's binary, not a shell (the image has no curl).
    assert!(
        ds.contains(
            r#"command: ["/usr/bin/gateway", "drain", "--config", "/etc/gateway/config/gateway.toml", "--wait"]"#
        ),
        "preStop runs `gateway drain --wait`"
    );
    assert!(!runs.contains("curl"), "no HTTP client needed in the image");
}

#[test]
fn the_default_configuration_in_the_image_is_valid() {
    let text = containerfile();
    let copied = text
        .lines()
        .find_map(|l| l.strip_prefix("COPY packaging/"))
        .map(|rest| rest.split_whitespace().collect::<Vec<_>>())
        .unwrap();
    assert_eq!(copied[1], "/etc/gateway/config/gateway.toml");
    let source = repo().join("packaging").join(copied[0]);
    gateway_config::load(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
}

/// A builder that can build here: podman, buildah, or docker with a daemon.
fn builder() -> Option<(&'static str, Vec<&'static str>)> {
    let works =
        |cmd: &str, args: &[&str]| Command::new(cmd).args(args).output().map(|o| o.status.success()).unwrap_or(false);
    if works("podman", &["info"]) {
        return Some(("podman", vec!["build"]));
    }
    if works("buildah", &["info"]) {
        return Some(("buildah", vec!["build"]));
    }
    if works("docker", &["info"]) {
        return Some(("docker", vec!["build"]));
    }
    None
}

#[test]
#[ignore = "builds the release binary inside a container (minutes, pulls base images): run with --ignored where podman, buildah or a docker daemon runs"]
fn the_image_builds_and_checks_its_configuration() {
    let Some((tool, build)) = builder() else {
        eprintln!("SKIPPED: no container builder here (podman, buildah, or docker with a running daemon)");
        return;
    };
    let tag = format!("gateway-test:{}", std::process::id());
    let status = Command::new(tool)
        .args(&build)
        .args(["-f", "packaging/container/Containerfile", "-t", &tag, "."])
        .current_dir(repo())
        .status()
        .unwrap();
    assert!(status.success(), "{tool} build failed");
    // buildah builds but does not run; podman and docker run the binary in the image.
    let runner = if tool == "buildah" { "podman" } else { tool };
    let out = Command::new(runner)
        .args(["run", "--rm", &tag, "check", "--config", "/etc/gateway/config/gateway.toml"])
        .output();
    if let Ok(out) = out {
        assert!(out.status.success(), "gateway check in the image: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("ok:"));
    }
    let _ = Command::new(runner).args(["rmi", &tag]).status();
}
