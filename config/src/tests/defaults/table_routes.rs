//! The table of `super::table`, continued: routes and clusters.

use super::table::{dur, e, json_name, list, or_none, q, Entry, Given, G};
use crate::model::*;

const RATE: Given = Given { route: "cluster = \"c\"\nrate_limit = { rate = 250 }", ..G };
const RETRY: Given = Given { route: "cluster = \"c\"\nretry = {}", ..G };
const HSTS: Given = Given { route: "cluster = \"c\"\nhsts = { max_age = \"1d\" }", ..G };
const REDIRECT: Given = Given { route: "redirect = { scheme = \"https\" }", ..G };
const DIRECT: Given = Given { route: "direct_response = {}", ..G };
const MIRROR: Given = Given {
    route: "cluster = \"c\"\nmirror = { cluster = \"m\" }",
    extra: "[[clusters]]\nname = \"m\"\nendpoints = [\"127.0.0.1:2\"]",
    ..G
};
const POOL: Given = Given { cluster: "pool = {}", ..G };
const CAPS: Given = Given { cluster: "caps = {}", ..G };
const BUDGET: Given = Given { cluster: "retry_budget = {}", ..G };
const ADAPTIVE: Given = Given { cluster: "adaptive_concurrency = {}", ..G };
const OUTLIER: Given = Given { cluster: "outlier_detection = {}", ..G };
const HEALTH: Given = Given { cluster: "health_check = { path = \"/h\" }", ..G };

pub fn entries() -> Vec<Entry> {
    vec![
        e("routes[].timeout", G, |c| dur(proxy(c).timeout)),
        e("routes[].request_headers", G, |c| {
            let r = &c.routes[0];
            if r.request_headers.is_none() && r.response_headers.is_none() { "no edits" } else { "edits" }.to_owned()
        }),
        e("routes[].rewrite", G, |c| or_none(c.routes[0].rewrite.as_ref().map(|r| format!("{r:?}")))),
        e("routes[].rate_limit.burst", RATE, |c| {
            // The given rate is 250 requests per second.
            let burst = rate(c).burst;
            if burst == 250 {
                "one second's worth of rate, at least 1".to_owned()
            } else {
                burst.to_string()
            }
        }),
        e("routes[].rate_limit.key", RATE, |c| match &rate(c).key {
            RateLimitKey::Route => q("route"),
            RateLimitKey::ClientIp => q("client_ip"),
            RateLimitKey::Header(h) => q(&format!("header:{h}")),
        }),
        e("routes[].rate_limit.mode", RATE, |c| q(json_name(&rate(c).mode))),
        e(
            "routes[].rate_limit.max_delay",
            Given { route: "cluster = \"c\"\nrate_limit = { rate = 1, mode = \"delay\" }", ..G },
            |c| match rate(c).mode {
                RateLimitMode::Delay { max_delay } => dur(max_delay),
                RateLimitMode::Reject => "none".to_owned(),
            },
        ),
        e("routes[].rate_limit.scope", RATE, |c| q(json_name(&rate(c).scope))),
        e("routes[].rate_limit.max_keys", RATE, |c| rate(c).max_keys.to_string()),
        e("routes[].retry.retry_on", RETRY, |c| {
            let on = proxy(c).retry.retry_on;
            list(RetryOn::NAMES.iter().filter(|(_, f)| on.contains(*f)).map(|(n, _)| q(n)))
        }),
        e("routes[].retry.num_retries", RETRY, |c| proxy(c).retry.num_retries.to_string()),
        e("routes[].retry.per_try_timeout", RETRY, |c| {
            let r = &proxy(c).retry;
            match r.per_try_timeout {
                Some(t) => dur(t),
                None if r.adaptive() => "adaptive when a timeout is retried".to_owned(),
                None => "tries share the route timeout".to_owned(),
            }
        }),
        e("routes[].retry.backoff", RETRY, |c| {
            let r = &proxy(c).retry;
            format!("base {}, max {}", dur(r.backoff_base), dur(r.backoff_max))
        }),
        e("routes[].retry.max_replay_bytes", RETRY, |c| proxy(c).retry.max_replay_bytes.to_string()),
        e("routes[].hsts.include_subdomains", HSTS, |c| hsts(c).include_subdomains.to_string()),
        e("routes[].hsts.preload", HSTS, |c| hsts(c).preload.to_string()),
        e("routes[].redirect.status", REDIRECT, |c| redirect(c).status.to_string()),
        e("routes[].redirect.keep_query", REDIRECT, |c| redirect(c).keep_query.to_string()),
        e("routes[].direct_response.status", DIRECT, |c| direct(c).status.to_string()),
        e("routes[].direct_response.body", DIRECT, |c| {
            let body = &direct(c).body;
            if body.is_empty() {
                "empty".to_owned()
            } else {
                q(body)
            }
        }),
        e("routes[].priority", G, |c| {
            let p = c.routes[0].priority;
            if p == c.overload.default_class {
                "overload.default_class".to_owned()
            } else {
                p.to_string()
            }
        }),
        e("routes[].websocket", G, |c| c.routes[0].websocket.to_string()),
        e("routes[].sticky", Given { route: "split = [{ cluster = \"c\", weight = 1 }]", ..G }, |c| {
            match c.routes[0].split.as_ref().map(|s| &s.sticky) {
                Some(None) => "no sticky key".to_owned(),
                other => format!("{other:?}"),
            }
        }),
        e("routes[].mirror.percent", MIRROR, |c| mirror(c).percent.to_string()),
        e("routes[].mirror.max_in_flight", MIRROR, |c| mirror(c).max_in_flight.to_string()),
        e("routes[].mirror.methods", MIRROR, |c| list(mirror(c).methods.iter().map(|m| q(m)))),
        e("clusters[].balancer", G, |c| q(json_name(&c.clusters[0].balancer))),
        e("clusters[].connect_timeout", G, |c| dur(c.clusters[0].connect_timeout)),
        e("clusters[].dns_refresh", Given { endpoints: "[\"localhost:1\"]", ..G }, |c| {
            c.clusters[0].dns_refresh.map_or("none".to_owned(), dur)
        }),
        e("clusters[].pool.max_idle_per_endpoint", POOL, |c| c.clusters[0].pool.max_idle_per_endpoint.to_string()),
        e("clusters[].pool.idle_timeout", POOL, |c| dur(c.clusters[0].pool.idle_timeout)),
        e("clusters[].caps.max_connections", CAPS, |c| c.clusters[0].caps.max_connections.to_string()),
        e("clusters[].caps.max_pending", CAPS, |c| c.clusters[0].caps.max_pending.to_string()),
        e("clusters[].caps.max_requests", CAPS, |c| c.clusters[0].caps.max_requests.to_string()),
        e("clusters[].caps.max_retries", CAPS, |c| c.clusters[0].caps.max_retries.to_string()),
        e("clusters[].retry_budget.percent", BUDGET, |c| c.clusters[0].retry_budget.percent.to_string()),
        e("clusters[].retry_budget.min_concurrent", BUDGET, |c| c.clusters[0].retry_budget.min_concurrent.to_string()),
        // With a route that names a class (the default is conditional: see full.toml).
        e(
            "clusters[].adaptive_concurrency.enabled",
            Given { route: "cluster = \"c\"\npriority = \"critical\"", cluster: "adaptive_concurrency = {}", ..G },
            |c| adaptive(c).enabled.to_string(),
        ),
        e("clusters[].adaptive_concurrency.initial_limit", ADAPTIVE, |c| adaptive(c).initial_limit.to_string()),
        e("clusters[].adaptive_concurrency.min_limit", ADAPTIVE, |c| adaptive(c).min_limit.to_string()),
        e("clusters[].adaptive_concurrency.tolerance", ADAPTIVE, |c| adaptive(c).tolerance.to_string()),
        e("clusters[].adaptive_concurrency.probe_interval", ADAPTIVE, |c| dur(adaptive(c).probe_interval)),
        e("clusters[].all_unhealthy", G, |c| q(json_name(&c.clusters[0].all_unhealthy))),
        e("clusters[].outlier_detection", G, |c| {
            if c.clusters[0].outlier_detection.enabled { "on" } else { "off" }.to_owned()
        }),
        e("clusters[].outlier_detection.enabled", OUTLIER, |c| outlier(c).enabled.to_string()),
        e("clusters[].outlier_detection.consecutive_5xx", OUTLIER, |c| outlier(c).consecutive_5xx.to_string()),
        e("clusters[].outlier_detection.consecutive_gateway_errors", OUTLIER, |c| {
            outlier(c).consecutive_gateway_errors.to_string()
        }),
        e("clusters[].outlier_detection.base_ejection_time", OUTLIER, |c| dur(outlier(c).base_ejection_time)),
        e("clusters[].outlier_detection.max_ejection_time", OUTLIER, |c| dur(outlier(c).max_ejection_time)),
        e("clusters[].outlier_detection.max_ejection_percent", OUTLIER, |c| {
            outlier(c).max_ejection_percent.to_string()
        }),
        e("clusters[].health_check.interval", HEALTH, |c| dur(health(c).interval)),
        e("clusters[].health_check.timeout", HEALTH, |c| dur(health(c).timeout)),
        e("clusters[].health_check.healthy_threshold", HEALTH, |c| health(c).healthy_threshold.to_string()),
        e("clusters[].health_check.unhealthy_threshold", HEALTH, |c| health(c).unhealthy_threshold.to_string()),
        e("clusters[].health_check.expected_statuses", HEALTH, |c| {
            list(health(c).expected_statuses.iter().map(|r| {
                if r.start() == r.end() {
                    r.start().to_string()
                } else {
                    q(&format!("{}-{}", r.start(), r.end()))
                }
            }))
        }),
        e("clusters[].health_check.host", HEALTH, |c| {
            health(c).host.as_deref().map_or("the endpoint as written in `endpoints`".to_owned(), q)
        }),
        e("clusters[].protocol", G, |c| q(json_name(&c.clusters[0].protocol))),
        e("clusters[].tls", G, |c| c.clusters[0].tls.as_ref().map_or("plain TCP".to_owned(), |t| format!("{t:?}"))),
        e(
            "clusters[].tls.sni",
            Given { endpoints: "[\"localhost:1\"]", cluster: "tls = { ca = \"ca.pem\" }", ..G },
            |c| {
                let sni = c.clusters[0].tls.as_ref().map(|t| t.sni.as_str());
                if sni == Some("localhost") {
                    "the endpoints' host name".to_owned()
                } else {
                    or_none(sni.map(q))
                }
            },
        ),
    ]
}

fn proxy(c: &Config) -> &ProxyAction {
    match &c.routes[0].action {
        Action::Proxy(p) => p,
        other => panic!("not a proxying route: {other:?}"),
    }
}

fn rate(c: &Config) -> &RateLimit {
    c.routes[0].rate_limit.as_ref().expect("a rate limit")
}

fn hsts(c: &Config) -> &Hsts {
    c.routes[0].hsts.as_ref().expect("hsts")
}

fn redirect(c: &Config) -> &Redirect {
    match &c.routes[0].action {
        Action::Redirect(r) => r,
        other => panic!("not a redirect: {other:?}"),
    }
}

fn direct(c: &Config) -> &DirectResponse {
    match &c.routes[0].action {
        Action::Direct(d) => d,
        other => panic!("not a direct response: {other:?}"),
    }
}

fn mirror(c: &Config) -> &Mirror {
    c.routes[0].mirror.as_ref().expect("a mirror")
}

fn adaptive(c: &Config) -> &AdaptiveConcurrency {
    &c.clusters[0].adaptive_concurrency
}

fn outlier(c: &Config) -> &OutlierDetection {
    &c.clusters[0].outlier_detection
}

fn health(c: &Config) -> &HealthCheck {
    c.clusters[0].health_check.as_ref().expect("a health check")
}
