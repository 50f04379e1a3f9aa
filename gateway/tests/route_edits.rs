//! End-to-end: a route's header edits in both directions (`request_headers`,
//! `response_headers`: set, add, remove, variables) and path rewrites (`rewrite`), for HTTP/1.1
//! and HTTP/2 (h2c) clients, on both I/O drivers; the gateway's own answers are not edited.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use common::clients::{h2_connect, h2_request, runtime};
use common::*;

const ROUTES: &str = r#"
[[routes]]
name = "api"
match = { path_prefix = "/api/" }
cluster = "origin"
rewrite = { prefix = "/" }
request_headers = { set = { "x-env" = "prod", "x-client" = "${client_ip} via ${route}/${cluster}", "user-agent" = "edge" }, add = { "x-tag" = "a" }, remove = ["x-debug", "cookie"] }
response_headers = { set = { "x-frame-options" = "DENY", "x-request" = "${request_id}" }, add = { "x-served-by" = "${route}" }, remove = ["x-origin-conn"] }

[[routes]]
name = "fixed"
match = { path_prefix = "/fixed" }
cluster = "origin"
rewrite = { path = "/bytes/3" }
response_headers = { set = { "x-fixed" = "1" } }

[[routes]]
name = "limited"
match = { path = "/limited" }
cluster = "origin"
rate_limit = { rate = 0.01, burst = 1 }
response_headers = { set = { "x-edited" = "yes" } }
"#;

fn start(driver: &str, origin: &Origin) -> TestGateway {
    let text = config(driver, origin.addr(), "", ROUTES).replace(
        "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
        "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
    );
    TestGateway::start(&text)
}

#[test]
fn http1_requests_and_responses_are_edited_and_prefixes_rewritten() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let r = exchange(
            gw.addr,
            b"GET /api/bytes/5?q=1 HTTP/1.1\r\nhost: a\r\nx-env: dev\r\nx-tag: mine\r\nx-debug: 1\r\n\
              cookie: s=1\r\nuser-agent: curl\r\nx-request-id: rid-7\r\n\r\n",
        );
        assert_eq!(r.status, 200, "{d}");
        assert_eq!(r.body.len(), 5, "{d}: /api/bytes/5 reached the origin as /bytes/5");
        let seen = o.received().pop().unwrap();
        assert_eq!(seen.target, "/bytes/5?q=1", "{d}");
        assert_eq!(seen.header("x-env"), Some("prod"), "{d}: set replaces");
        assert_eq!(seen.header_count("x-env"), 1);
        assert_eq!(seen.header("user-agent"), Some("edge"), "{d}");
        assert_eq!(seen.header("x-client"), Some("127.0.0.1 via api/origin"), "{d}");
        assert_eq!(seen.header_count("x-tag"), 2, "{d}: add keeps the client's");
        assert_eq!((seen.header("x-debug"), seen.header("cookie")), (None, None), "{d}: removed");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{d}");
        assert_eq!(r.header("x-request"), Some("rid-7"), "{d}");
        assert_eq!(r.header("x-served-by"), Some("api"), "{d}");
        assert_eq!(r.header("x-origin-conn"), None, "{d}: removed from the response");
        // A whole-path rewrite keeps the query.
        let r = exchange(gw.addr, b"GET /fixed/anything?z=9 HTTP/1.1\r\nhost: a\r\n\r\n");
        assert_eq!((r.status, r.body.len(), r.header("x-fixed")), (200, 3, Some("1")), "{d}");
        assert_eq!(o.received().pop().unwrap().target, "/bytes/3?z=9");
        // Routes without edits send the upstream's fields untouched.
        let r = exchange(gw.addr, b"GET /bytes/2 HTTP/1.1\r\nhost: a\r\nx-debug: 1\r\n\r\n");
        assert!(r.header("x-origin-conn").is_some() && r.header("x-frame-options").is_none(), "{d}");
        assert_eq!(o.received().pop().unwrap().header("x-debug"), Some("1"));
        // The gateway's own refusal is not edited; the relayed response is.
        assert_eq!(exchange(gw.addr, b"GET /limited HTTP/1.1\r\nhost: a\r\n\r\n").header("x-edited"), Some("yes"));
        let refused = exchange(gw.addr, b"GET /limited HTTP/1.1\r\nhost: a\r\n\r\n");
        assert_eq!((refused.status, refused.header("x-edited")), (429, None), "{d}");
    });
}

#[test]
fn http2_requests_and_responses_are_edited_and_prefixes_rewritten() {
    each_driver(|d| {
        let o = origin();
        let gw = start(d, &o);
        let resp = runtime().block_on(async {
            let mut c = h2_connect(gw.addr, None).await;
            let req = http::Request::builder()
                .uri("http://a.test/api/bytes/7")
                .header("x-env", "dev")
                .header("x-tag", "mine")
                .header("x-debug", "1")
                .header("cookie", "a=1")
                .header("cookie", "b=2")
                .body(())
                .unwrap();
            h2_request(&mut c, req, None).await.unwrap()
        });
        assert_eq!((resp.status, resp.body.len()), (200, 7), "{d}");
        assert_eq!(resp.headers.get("x-frame-options").unwrap(), "DENY", "{d}");
        assert_eq!(resp.headers.get("x-served-by").unwrap(), "api", "{d}");
        assert!(resp.headers.get("x-request").is_some_and(|v| !v.is_empty()), "{d}: the generated id");
        assert!(resp.headers.get("x-origin-conn").is_none(), "{d}");
        let seen = o.received().pop().unwrap();
        assert_eq!(seen.target, "/bytes/7", "{d}");
        assert_eq!((seen.header("x-env"), seen.header_count("x-env")), (Some("prod"), 1), "{d}");
        assert_eq!(seen.header("x-client"), Some("127.0.0.1 via api/origin"), "{d}");
        assert_eq!(seen.header_count("x-tag"), 2, "{d}");
        assert_eq!((seen.header("x-debug"), seen.header("cookie")), (None, None), "{d}");
        assert_eq!(seen.header("x-request-id"), resp.headers.get("x-request").map(|v| v.to_str().unwrap()));
    });
}

#[test]
fn edits_and_rewrites_reach_an_http2_upstream_from_both_client_protocols() {
    use common::h2origin::H2Origin;
    each_driver(|d| {
        let origin = H2Origin::start(None);
        let text = config(d, origin.addr, "", ROUTES)
            .replace(
                "name = \"main\"\naddress = \"127.0.0.1:0\"\n",
                "name = \"main\"\naddress = \"127.0.0.1:0\"\nprotocols = [\"http/1.1\", \"h2\"]\n",
            )
            .replace("connect_timeout = \"1s\"\n", "connect_timeout = \"1s\"\nprotocol = \"h2\"\n");
        let gw = TestGateway::start(&text);
        let r = exchange(gw.addr, b"GET /api/bytes/4?k=v HTTP/1.1\r\nhost: a\r\nx-env: dev\r\nx-debug: 1\r\n\r\n");
        assert_eq!((r.status, r.body.len()), (200, 4), "{d}");
        assert_eq!((r.header("x-frame-options"), r.header("x-served-by")), (Some("DENY"), Some("api")), "{d}");
        let h2 = runtime().block_on(async {
            let mut c = h2_connect(gw.addr, None).await;
            let req = http::Request::builder()
                .uri("http://a.test/api/bytes/6")
                .header("x-tag", "mine")
                .header("cookie", "a=1")
                .body(())
                .unwrap();
            h2_request(&mut c, req, None).await.unwrap()
        });
        assert_eq!((h2.status, h2.body.len()), (200, 6), "{d}");
        assert_eq!(h2.headers.get("x-frame-options").unwrap(), "DENY", "{d}");
        let seen = origin.seen();
        let (first, second) = (&seen[seen.len() - 2], &seen[seen.len() - 1]);
        assert_eq!((first.path.as_str(), second.path.as_str()), ("/bytes/4?k=v", "/bytes/6"), "{d}");
        assert_eq!(first.headers.get_all("x-env").iter().collect::<Vec<_>>(), ["prod"], "{d}");
        assert!(first.headers.get("x-debug").is_none(), "{d}");
        assert_eq!(first.headers.get("x-client").unwrap(), "127.0.0.1 via api/origin", "{d}");
        assert_eq!(second.headers.get_all("x-tag").iter().collect::<Vec<_>>(), ["mine", "a"], "{d}");
        assert!(second.headers.get("cookie").is_none(), "{d}");
    });
}
