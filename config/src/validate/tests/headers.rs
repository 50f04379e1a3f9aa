//! `server.server_header` and `routes[].hsts`.

use std::time::Duration;

use super::routes::with_route;
use super::{assert_one, errors, valid, with_listener};

#[test]
fn server_header() {
    assert_eq!(valid(&with_listener("")).server.server_header, None);
    let text = with_listener("[server]\nserver_header = \"edge/1\"\n");
    assert_eq!(valid(&text).server.server_header.as_deref(), Some("edge/1"));
    let text = with_listener("[server]\nserver_header = \"\"\n");
    assert_eq!(valid(&text).server.server_header.as_deref(), Some(""));
    for bad in ["\"a\\r\\nx-injected: 1\"", "\" edge\"", "\"edge\\t\"", "\"caf\u{e9}\""] {
        let text = with_listener(&format!("[server]\nserver_header = {bad}\n"));
        assert_one(&text, "server.server_header", Some(5), "must be printable ASCII");
    }
}

#[test]
fn hsts() {
    let cluster = "cluster = \"api\"\n";
    let route = valid(&with_route(&format!("{cluster}hsts = {{ max_age = \"365d\", include_subdomains = true }}\n")))
        .routes
        .remove(0);
    let hsts = route.hsts.unwrap();
    assert_eq!((hsts.max_age, hsts.include_subdomains, hsts.preload), (Duration::from_secs(31_536_000), true, false));
    assert_eq!(hsts.value, "max-age=31536000; includeSubDomains");
    let text =
        with_route(&format!("{cluster}hsts = {{ max_age = \"730d\", include_subdomains = true, preload = true }}\n"));
    assert_eq!(valid(&text).routes[0].hsts.as_ref().unwrap().value, "max-age=63072000; includeSubDomains; preload");
    // Direct responses and redirects may set it too.
    let text = with_route("direct_response = { status = 200 }\nhsts = { max_age = \"1h\" }\n");
    assert_eq!(valid(&text).routes[0].hsts.as_ref().unwrap().value, "max-age=3600");
    for (bad, needle) in [
        ("{ max_age = \"0s\" }", "must be greater than zero"),
        ("{ max_age = 60 }", "needs a unit"),
        ("{ max_age = \"1y\" }", "expected an integer followed by s, m, h or d"),
        ("{ max_age = \"3651d\" }", "too large"),
    ] {
        assert_one(&with_route(&format!("{cluster}hsts = {bad}\n")), "routes[0].hsts.max_age", Some(10), needle);
    }
    let text =
        with_route(&format!("{cluster}hsts = {{ max_age = \"30d\", include_subdomains = true, preload = true }}\n"));
    assert_one(&text, "routes[0].hsts.max_age", Some(10), "at least one year");
    let text = with_route(&format!("{cluster}hsts = {{ max_age = \"365d\", preload = true }}\n"));
    assert_one(&text, "routes[0].hsts.include_subdomains", Some(10), "requires include_subdomains = true");
    let text = with_route(&format!("{cluster}hsts = {{ include_subdomains = true }}\n"));
    assert!(
        errors(&text).iter().any(|(path, _, m)| path.starts_with("routes[0]") && m.contains("max_age")),
        "{:?}",
        errors(&text)
    );
}
