//! `routes[].retry` and `clusters[].retry_budget`.

use std::time::Duration;

use super::routes::with_route;
use super::{assert_one, valid};
use crate::model::{Action, RetryOn, RetryPolicy};

/// A proxy route to "api" (`cluster` on line 9) with `retry = { <inner> }` on line 10.
fn with_retry(inner: &str) -> String {
    with_route(&format!("cluster = \"api\"\nretry = {{ {inner} }}\n"))
}

fn policy(text: &str) -> RetryPolicy {
    match valid(text).routes.remove(0).action {
        Action::Proxy(p) => p.retry,
        other => panic!("{other:?}"),
    }
}

#[test]
fn conditions_counts_and_backoff() {
    let p = policy(&with_retry(
        "retry_on = [\"5xx\", \"retriable-status-codes\", \"reset\"], num_retries = 3, \
         per_try_timeout = \"500ms\", retriable_status_codes = [503, 503, 599], \
         backoff = { base = \"10ms\", max = \"1s\" }, max_replay_bytes = \"1MiB\"",
    ));
    assert!(p.retry_on.contains(RetryOn::SERVER_ERROR) && p.retry_on.contains(RetryOn::RESET));
    assert!(!p.retry_on.contains(RetryOn::CONNECT_FAILURE));
    assert!(p.retry_on.covers_connect_failure(), "5xx covers connect failures");
    assert_eq!((p.num_retries, p.per_try_timeout), (3, Some(Duration::from_millis(500))));
    assert_eq!(p.retriable_status_codes, vec![503, 599]);
    assert_eq!(
        (p.backoff_base, p.backoff_max, p.max_replay_bytes),
        (Duration::from_millis(10), Duration::from_secs(1), 1 << 20)
    );
    // Backoff caps double up to the max.
    let caps: Vec<u128> = (0..8).map(|k| p.backoff_cap(k).as_millis()).collect();
    assert_eq!(caps, vec![10, 20, 40, 80, 160, 320, 640, 1000]);
    // Empty list: never retried on anything.
    assert_eq!(policy(&with_retry("retry_on = []")).retry_on, RetryOn::empty());
}

#[test]
fn status_coverage() {
    let on = RetryOn::GATEWAY_ERROR;
    assert!(on.covers_status(502, &[]) && on.covers_status(504, &[]) && !on.covers_status(500, &[]));
    assert!(on.covers_reset() && on.covers_connect_failure() && on.covers_refused_stream());
    let listed = RetryOn::RETRIABLE_STATUS_CODES;
    assert!(listed.covers_status(500, &[500]) && !listed.covers_status(503, &[500]));
    assert!(!listed.covers_reset() && !listed.covers_connect_failure());
    let d = crate::defaults::RETRY_ON;
    assert!(d.covers_connect_failure() && d.covers_reset() && d.covers_refused_stream());
    assert!(!d.covers_status(500, &[]) && !d.covers_status(502, &[]) && !d.covers_status(503, &[]));
    assert!(d.after_send() && RetryOn::RESET.after_send() && !RetryOn::CONNECT_FAILURE.after_send());
}

#[test]
fn bad_values_are_reported_where_they_are() {
    assert_one(
        &with_retry("retry_on = [\"connect_failure\"]"),
        "routes[0].retry.retry_on[0]",
        Some(10),
        "unknown retry condition \"connect_failure\" (known: connect-failure,",
    );
    assert_one(&with_retry("num_retries = 11"), "routes[0].retry.num_retries", Some(10), "between 0 and 10");
    assert_one(
        &with_retry("per_try_timeout = \"20s\""),
        "routes[0].retry.per_try_timeout",
        Some(10),
        "longer than the route timeout (15s)",
    );
    assert_one(
        &with_retry("per_try_timeout = \"0s\""),
        "routes[0].retry.per_try_timeout",
        Some(10),
        "greater than zero",
    );
    assert_one(
        &with_retry("retry_on = [\"retriable-status-codes\"]"),
        "routes[0].retry.retriable_status_codes",
        Some(10),
        "list the statuses",
    );
    assert_one(
        &with_retry("retry_on = [\"retriable-status-codes\"], retriable_status_codes = [429]"),
        "routes[0].retry.retriable_status_codes[0]",
        Some(10),
        "only 5xx statuses",
    );
    assert_one(
        &with_retry("retriable_status_codes = [503]"),
        "routes[0].retry.retriable_status_codes",
        Some(10),
        "only applies with",
    );
    assert_one(
        &with_retry("backoff = { base = \"1s\", max = \"100ms\" }"),
        "routes[0].retry.backoff.max",
        Some(10),
        "must not be below base (1s)",
    );
    assert_one(&with_retry("max_replay_bytes = \"1GiB\""), "routes[0].retry.max_replay_bytes", Some(10), "at most");
    assert_one(&with_retry("tries = 3"), "routes[0].retry.tries", Some(10), "unknown field `tries`");
}

#[test]
fn retry_needs_a_cluster_and_budgets_are_bounded() {
    let text = super::with_listener(
        "[[routes]]\nname = \"r\"\ndirect_response = { body = \"x\" }\nretry = { num_retries = 1 }\n",
    );
    assert_one(&text, "routes[0].retry", Some(7), "only applies to routes with a `cluster`");
    let cluster = |extra: &str| {
        super::with_listener(&format!("[[clusters]]\nname = \"c\"\nendpoints = [\"127.0.0.1:1\"]\n{extra}"))
    };
    let c = valid(&cluster("retry_budget = { percent = 50, min_concurrent = 0 }\n")).clusters.remove(0);
    assert_eq!((c.retry_budget.percent, c.retry_budget.min_concurrent), (50.0, 0));
    assert_one(
        &cluster("retry_budget = { percent = 120 }\n"),
        "clusters[0].retry_budget.percent",
        Some(7),
        "between 0 and 100",
    );
    assert_one(
        &cluster("retry_budget = { min_concurrent = 5 }\ncaps = { max_retries = 2 }\n"),
        "clusters[0].retry_budget.min_concurrent",
        Some(7),
        "exceeds caps.max_retries (2)",
    );
    // A small max_retries lowers the default floor with it.
    assert_eq!(valid(&cluster("caps = { max_retries = 1 }\n")).clusters[0].retry_budget.min_concurrent, 1);
}

#[test]
fn deadline_header_is_a_plain_header() {
    let server = |v: &str| super::with_listener(&format!("[server]\ndeadline_header = {v:?}\n"));
    assert_eq!(valid(&server("X-Deadline-Ms")).server.deadline_header.as_deref(), Some("x-deadline-ms"));
    assert_one(&server("grpc-timeout"), "server.deadline_header", Some(5), "always honoured");
    assert_one(&server("content-length"), "server.deadline_header", Some(5), "cannot carry a deadline");
    assert_one(&server("bad header"), "server.deadline_header", Some(5), "invalid header name");
}
