//! `routes[].split`, `sticky`, `pin` and `mirror`.

use super::{assert_one, errors, valid, LISTENER};
use crate::model::{Action, Pin, StickyKey};

/// Listener on lines 1-3; clusters v1 (4-6), v2 (7-9), shadow (10-12), h2 (13-16);
/// `[[routes]]` on 17, its name on 18, then `route` from line 19 on.
fn with_route(route: &str) -> String {
    let cluster =
        |name: &str, port: u16| format!("[[clusters]]\nname = \"{name}\"\nendpoints = [\"127.0.0.1:{port}\"]\n");
    format!(
        "{LISTENER}{}{}{}{}protocol = \"h2\"\n[[routes]]\nname = \"r\"\n{route}",
        cluster("v1", 9001),
        cluster("v2", 9002),
        cluster("shadow", 9003),
        cluster("h2", 9004),
    )
}

const SPLIT: &str = "split = [{ cluster = \"v1\", weight = 90 }, { cluster = \"v2\", weight = 10 }]\n";

#[test]
fn split_sticky_and_pins() {
    let text = with_route(&format!(
        "{SPLIT}timeout = \"2s\"\nsticky = {{ header = \"X-User-Id\" }}\n\
         pin = [{{ header = \"X-Canary\", value = \"1\", cluster = \"v2\" }}, {{ header = \"x-shadow-test\", cluster = \"shadow\" }}]\n"
    ));
    let route = valid(&text).routes.remove(0);
    let Action::Proxy(proxy) = &route.action else { panic!("{:?}", route.action) };
    let split = route.split.expect("split");
    assert_eq!(proxy.cluster, 0, "the action is the first target");
    assert_eq!(&split.targets[0].action, proxy);
    let targets: Vec<(usize, u32)> = split.targets.iter().map(|t| (t.action.cluster, t.weight)).collect();
    assert_eq!(targets, [(0, 90), (1, 10), (2, 0)], "a pinned-only cluster is a target of weight 0");
    assert!(split.targets.iter().all(|t| t.action.timeout == proxy.timeout), "targets differ only in cluster");
    assert_eq!(split.sticky, Some(StickyKey::Header("x-user-id".to_owned())));
    assert_eq!(
        split.pins,
        [
            Pin { header: "x-canary".to_owned(), value: Some("1".to_owned()), target: 1 },
            Pin { header: "x-shadow-test".to_owned(), value: None, target: 2 },
        ]
    );
    assert_eq!(route.mirror, None);
}

#[test]
fn pins_on_a_single_cluster_route() {
    let text = with_route("cluster = \"v1\"\npin = [{ header = \"x-canary\", cluster = \"v2\" }]\n");
    let split = valid(&text).routes.remove(0).split.expect("split");
    let targets: Vec<(usize, u32)> = split.targets.iter().map(|t| (t.action.cluster, t.weight)).collect();
    assert_eq!(targets, [(0, 1), (1, 0)]);
    assert_eq!(split.pins[0].target, 1);
    let text = with_route("cluster = \"v1\"\n");
    assert_eq!(valid(&text).routes[0].split, None, "no split without split or pin");
    let text = with_route(
        "split = [{ cluster = \"v2\", weight = 0 }, { cluster = \"v1\", weight = 1 }]\nsticky = { cookie = \"uid\" }\n",
    );
    let route = valid(&text).routes.remove(0);
    assert!(matches!(route.action, Action::Proxy(ref p) if p.cluster == 1), "first target even at weight 0");
    assert_eq!(route.split.expect("split").sticky, Some(StickyKey::Cookie("uid".to_owned())));
}

#[test]
fn split_weights_and_clusters_are_checked() {
    let bad_weight = with_route("split = [{ cluster = \"v1\", weight = 10001 }, { cluster = \"v2\", weight = 1 }]\n");
    assert_one(&bad_weight, "routes[0].split[0].weight", Some(19), "must be between 0 and 10000, got 10001");
    let negative = with_route("split = [{ cluster = \"v1\", weight = -1 }, { cluster = \"v2\", weight = 1 }]\n");
    assert_one(&negative, "routes[0].split[0].weight", Some(19), "must be between 0 and 10000, got -1");
    let zero = with_route("split = [{ cluster = \"v1\", weight = 0 }, { cluster = \"v2\", weight = 0 }]\n");
    assert_one(&zero, "routes[0].split", Some(19), "every weight is 0");
    let dup = with_route("split = [{ cluster = \"v1\", weight = 1 }, { cluster = \"v1\", weight = 2 }]\n");
    assert_one(&dup, "routes[0].split[1].cluster", Some(19), "cluster \"v1\" is already split[0]");
    let unknown = with_route("split = [{ cluster = \"v1\", weight = 1 }, { cluster = \"v3\", weight = 2 }]\n");
    assert_one(&unknown, "routes[0].split[1].cluster", Some(19), "unknown cluster \"v3\" (known: v1, v2, shadow, h2)");
    assert_one(&with_route("split = []\n"), "routes[0].split", Some(19), "split is empty");
    let missing = with_route("split = [{ cluster = \"v1\" }]\n");
    let e = errors(&missing);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].2.contains("missing field `weight`"), "{e:#?}");
    let extra = with_route("split = [{ cluster = \"v1\", weight = 1, wieght = 2 }]\n");
    assert!(errors(&extra)[0].2.contains("unknown field `wieght`"), "{:#?}", errors(&extra));
}

#[test]
fn split_is_an_action() {
    let both = with_route(&format!("cluster = \"v1\"\n{SPLIT}"));
    assert_one(&both, "routes[0].split", Some(20), "sets both `cluster` and `split`");
    let direct = with_route(&format!("{SPLIT}direct_response = {{}}\n"));
    assert_one(&direct, "routes[0].direct_response", Some(20), "sets both `split` and `direct_response`");
}

#[test]
fn sticky_and_pins_need_a_proxying_route() {
    let text = with_route("cluster = \"v1\"\nsticky = { header = \"x-user\" }\n");
    assert_one(&text, "routes[0].sticky", Some(20), "`sticky` only applies to routes with a `split`");
    let text = with_route("direct_response = {}\npin = [{ header = \"x\", cluster = \"v2\" }]\n");
    assert_one(&text, "routes[0].pin", Some(20), "`pin` only applies to routes with a `cluster` or `split`");
    let text = with_route("redirect = { scheme = \"https\" }\nmirror = { cluster = \"shadow\" }\n");
    assert_one(&text, "routes[0].mirror", Some(20), "`mirror` only applies to routes with a `cluster` or `split`");
    let both = with_route(&format!("{SPLIT}sticky = {{ header = \"x-user\", cookie = \"uid\" }}\n"));
    assert_one(&both, "routes[0].sticky.cookie", Some(20), "set one of `header` and `cookie`, not both");
    let none = with_route(&format!("{SPLIT}sticky = {{}}\n"));
    assert_one(&none, "routes[0].sticky", Some(20), "sticky needs a key");
    let bad = with_route(&format!("{SPLIT}sticky = {{ header = \"x user\" }}\n"));
    assert_one(&bad, "routes[0].sticky.header", Some(20), "invalid header name \"x user\"");
    let pin = with_route("cluster = \"v1\"\npin = [{ header = \"x canary\", cluster = \"v9\" }]\n");
    let e = errors(&pin);
    let paths: Vec<&str> = e.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(paths, ["routes[0].pin[0].header", "routes[0].pin[0].cluster"], "{e:#?}");
}

#[test]
fn mirror_defaults_and_settings() {
    let text = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\" }\n");
    let mirror = valid(&text).routes.remove(0).mirror.expect("mirror");
    assert_eq!((mirror.cluster, mirror.percent, mirror.max_in_flight), (2, 100.0, 16));
    assert_eq!(mirror.methods, ["GET", "HEAD", "OPTIONS"]);
    let text = with_route(&format!(
        "{SPLIT}mirror = {{ cluster = \"shadow\", percent = 12.5, max_in_flight = 4, methods = [\"GET\", \"POST\"] }}\n"
    ));
    let mirror = valid(&text).routes.remove(0).mirror.expect("mirror");
    assert_eq!((mirror.percent, mirror.max_in_flight), (12.5, 4));
    assert_eq!(mirror.methods, ["GET", "POST"]);
    let text = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", percent = 0 }\n");
    assert_eq!(valid(&text).routes[0].mirror.as_ref().map(|m| m.percent), Some(0.0));
}

#[test]
fn mirror_is_checked() {
    let own = with_route(&format!("{SPLIT}mirror = {{ cluster = \"v2\" }}\n"));
    assert_one(&own, "routes[0].mirror.cluster", Some(20), "cluster \"v2\" already serves this route");
    let pinned = with_route(
        "cluster = \"v1\"\npin = [{ header = \"x\", cluster = \"shadow\" }]\nmirror = { cluster = \"shadow\" }\n",
    );
    assert_one(&pinned, "routes[0].mirror.cluster", Some(21), "already serves this route");
    let h2 = with_route("cluster = \"v1\"\nmirror = { cluster = \"h2\" }\n");
    assert_one(
        &h2,
        "routes[0].mirror.cluster",
        Some(20),
        "cluster \"h2\" speaks \"h2\": a shadow cluster must use protocol = \"http/1.1\"",
    );
    let unknown = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadw\" }\n");
    assert_one(&unknown, "routes[0].mirror.cluster", Some(20), "unknown cluster \"shadw\"");
    let percent = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", percent = 100.5 }\n");
    assert_one(&percent, "routes[0].mirror.percent", Some(20), "percent must be from 0 to 100, got 100.5");
    let bound = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", max_in_flight = 0 }\n");
    assert_one(&bound, "routes[0].mirror.max_in_flight", Some(20), "must be between 1 and 10000, got 0");
    let lower = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", methods = [\"GET\", \"get\"] }\n");
    assert_one(&lower, "routes[0].mirror.methods[1]", Some(20), "write \"GET\", not \"get\"");
    let empty = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", methods = [] }\n");
    assert_one(&empty, "routes[0].mirror.methods", Some(20), "methods is empty");
    let extra = with_route("cluster = \"v1\"\nmirror = { cluster = \"shadow\", precent = 5 }\n");
    assert!(errors(&extra)[0].2.contains("unknown field `precent`"), "{:#?}", errors(&extra));
}
