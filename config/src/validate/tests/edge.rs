//! `listeners[].proxy_protocol`, `proxy_protocol_timeout`, `trusted_proxies`, `forwarded`.

use std::time::Duration;

use super::{assert_one, errors, valid};
use crate::model::ProxyProtocol;

/// A listener (lines 1-3) with `extra` from line 4 on.
fn listener(extra: &str) -> String {
    format!("[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n{extra}")
}

#[test]
fn proxy_protocol_and_trusted_proxies() {
    let l = valid(&listener("")).listeners.remove(0);
    assert_eq!(
        (l.proxy_protocol, l.proxy_protocol_timeout, l.trusted_proxies.len(), l.forwarded),
        (ProxyProtocol::Off, Duration::from_secs(5), 0, false)
    );
    let text = listener(
        "proxy_protocol = \"v2\"\nproxy_protocol_timeout = \"2s\"\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n\
         forwarded = true\n",
    );
    let l = valid(&text).listeners.remove(0);
    assert_eq!(
        (l.proxy_protocol, l.proxy_protocol_timeout, l.forwarded),
        (ProxyProtocol::V2, Duration::from_secs(2), true)
    );
    assert!(l.trusted_proxies[0].contains("10.9.8.7".parse().unwrap()));
    assert!(l.trusted_proxies[1].contains("::1".parse().unwrap()));
    for (value, expected) in [("off", ProxyProtocol::Off), ("v1", ProxyProtocol::V1), ("any", ProxyProtocol::Any)] {
        let l = valid(&listener(&format!("proxy_protocol = \"{value}\"\n"))).listeners.remove(0);
        assert_eq!(l.proxy_protocol, expected);
    }
    let text = listener("proxy_protocol = \"optional\"\ntrusted_proxies = [\"10.0.0.0/8\"]\n");
    assert_eq!(valid(&text).listeners[0].proxy_protocol, ProxyProtocol::Optional);
}

#[test]
fn bad_proxy_protocol_keys() {
    assert_one(
        &listener("proxy_protocol = \"v3\"\n"),
        "listeners[0].proxy_protocol",
        Some(4),
        "unknown proxy_protocol",
    );
    assert_one(
        &listener("proxy_protocol = \"optional\"\n"),
        "listeners[0].proxy_protocol",
        Some(4),
        "needs trusted_proxies",
    );
    assert_one(
        &listener("proxy_protocol_timeout = \"5ms\"\n"),
        "listeners[0].proxy_protocol_timeout",
        Some(4),
        "between 10ms and 60s",
    );
    assert_one(
        &listener("proxy_protocol_timeout = 5\n"),
        "listeners[0].proxy_protocol_timeout",
        Some(4),
        "needs a unit",
    );
    assert_one(
        &listener("trusted_proxies = [\"10.0.0.0/8\", \"10.0.0.300\"]\n"),
        "listeners[0].trusted_proxies[1]",
        Some(4),
        "",
    );
    assert_eq!(errors(&listener("forwarded = \"yes\"\n")).len(), 1);
}

mod routes {
    use super::super::routes::with_route;
    use super::super::{assert_one, errors, valid};
    use crate::model::{Part, Rewrite, Template, Var};

    const PROXY: &str = "match = { path_prefix = \"/api/\" }\ncluster = \"api\"\n";

    #[test]
    fn header_edits_compile_once_with_variables() {
        let text = with_route(&format!(
            "{PROXY}request_headers = {{ set = {{ \"X-Env\" = \"prod\", \"x-who\" = \"ip=${{client_ip}};${{route}}\" }}, \
             add = {{ \"x-tag\" = \"a\" }}, remove = [\"X-Debug\"] }}\n\
             response_headers = {{ remove = [\"x-powered-by\"] }}\nrewrite = {{ prefix = \"/\" }}\n"
        ));
        let route = valid(&text).routes.remove(0);
        let req = route.request_headers.unwrap();
        assert_eq!(req.set[0], ("x-env".to_owned(), Template(vec![Part::Text("prod".into())])));
        assert_eq!(
            req.set[1].1,
            Template(vec![
                Part::Text("ip=".into()),
                Part::Var(Var::ClientIp),
                Part::Text(";".into()),
                Part::Var(Var::Route)
            ])
        );
        assert_eq!((req.add.len(), req.remove.as_slice()), (1, &["x-debug".to_owned()][..]));
        assert_eq!(route.response_headers.unwrap().remove, ["x-powered-by"]);
        assert_eq!(route.rewrite, Some(Rewrite::Prefix("/".into())));
        let text = with_route("cluster = \"api\"\nrewrite = { path = \"/x/y\" }\nrequest_headers = {}\n");
        let route = valid(&text).routes.remove(0);
        assert_eq!((route.rewrite, route.request_headers), (Some(Rewrite::Path("/x/y".into())), None));
    }

    #[test]
    fn bad_header_edits_are_refused_with_their_key() {
        for (edit, key, needle) in [
            (
                "request_headers = { set = { \"content-length\" = \"1\" } }",
                "request_headers.set.content-length",
                "frames bodies",
            ),
            (
                "request_headers = { add = { \"Connection\" = \"close\" } }",
                "request_headers.add.Connection",
                "hop-by-hop",
            ),
            ("request_headers = { remove = [\"x-forwarded-for\"] }", "request_headers.remove[0]", "set by the gateway"),
            ("request_headers = { set = { \"host\" = \"x\" } }", "request_headers.set.host", "authority"),
            ("request_headers = { set = { \"x a\" = \"1\" } }", "request_headers.set.\"x a\"", "valid field name"),
            (
                "request_headers = { set = { \"x-a\" = \"a\\r\\nb: 1\" } }",
                "request_headers.set.x-a",
                "control characters",
            ),
            ("request_headers = { set = { \"x-a\" = \" a\" } }", "request_headers.set.x-a", "whitespace"),
            (
                "request_headers = { set = { \"x-a\" = \"${nope}\" } }",
                "request_headers.set.x-a",
                "unknown variable ${nope}",
            ),
            ("request_headers = { set = { \"x-a\" = \"${route\" } }", "request_headers.set.x-a", "closing"),
            (
                "request_headers = { set = { \"x-a\" = \"1\" }, remove = [\"X-A\"] }",
                "request_headers.remove[0]",
                "both set and removed",
            ),
            ("response_headers = { set = { \"server\" = \"x\" } }", "response_headers.set.server", "server_header"),
            (
                "response_headers = { add = { \"transfer-encoding\" = \"chunked\" } }",
                "response_headers.add.transfer-encoding",
                "frames",
            ),
            ("rewrite = { prefix = \"/v2\" }\nmatch = { path = \"/exact\" }", "rewrite.prefix", "needs one"),
            ("rewrite = { path = \"v2\" }", "rewrite.path", "must start with '/'"),
            ("rewrite = { path = \"/a?b\" }", "rewrite.path", "without '?'"),
            ("rewrite = { prefix = \"/a\", path = \"/b\" }", "rewrite", "exactly one"),
        ] {
            let errs = errors(&with_route(&format!("cluster = \"api\"\n{edit}\n")));
            assert_eq!(errs.len(), 1, "{edit}: {errs:#?}");
            assert_eq!(errs[0].0, format!("routes[0].{key}"), "{edit}");
            assert!(errs[0].2.contains(needle), "{edit}: {}", errs[0].2);
        }
        assert_one(
            &with_route("direct_response = { status = 200 }\nresponse_headers = { set = { \"x-a\" = \"1\" } }\n"),
            "routes[0].response_headers",
            Some(10),
            "only applies to routes with a `cluster`",
        );
        assert_one(
            &with_route("direct_response = { status = 200 }\nrewrite = { path = \"/\" }\n"),
            "routes[0].rewrite",
            Some(10),
            "only applies",
        );
    }
}
