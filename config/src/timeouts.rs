//! The arithmetic of retries and timeouts, per route: the worst case of all tries (each try's
//! timeout, plus the longest backoffs) against the route timeout. `gateway check` prints it as a
//! table and fails when a route's tries cannot fit; `gateway run` logs a warning instead.
//!
//! A try retried only on `connect-failure` / `refused-stream` ends within the cluster's connect
//! timeout (nothing was sent), so those tries count for `min(connect_timeout, per-try timeout)`.
//! Without `per_try_timeout`, a try that a timeout would have retried (`reset` in `retry_on`,
//! the default) is cut by the adaptive per-try timeout, at most half the route timeout, and the
//! last try has what remains (shown as "adaptive", at most the cap): they always fit. Without
//! either, tries share the route timeout: each is cut to what remains, so they always fit, but
//! a slow first try leaves nothing for a retry (shown as "shared"). An
//! incoming deadline (`grpc-timeout`, `server.deadline_header`) can only shorten all of this;
//! each try is cut to what remains of it at run time.

use std::fmt::Write as _;

use crate::units::show_duration;
use std::time::Duration;

use crate::model::{Action, Config, RetryOn, RetryPolicy};

/// One proxying route's retry and timeout budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteBudget {
    pub route: String,
    pub timeout: Duration,
    /// First try plus retries.
    pub tries: u32,
    /// `None`: tries share the route timeout.
    pub per_try: Option<Duration>,
    /// Without `per_try_timeout`: the cap of the adaptive per-try timeout (`None`: shared).
    pub adaptive: Option<Duration>,
    /// The longest total backoff between tries.
    pub backoff: Duration,
    /// The longest the tries can take together (`None` when they share the route timeout).
    pub worst: Option<Duration>,
}

impl RouteBudget {
    /// Whether every try can run to its own timeout within the route timeout.
    pub fn fits(&self) -> bool {
        self.worst.is_none_or(|w| w <= self.timeout)
    }

    /// Why it does not fit, with what to change.
    pub fn problem(&self) -> Option<String> {
        let worst = self.worst.filter(|_| !self.fits())?;
        Some(format!(
            "route {:?}: {} tries of up to {} plus {} of backoff need {}, more than its timeout {}: \
             lower retry.num_retries or retry.per_try_timeout, or raise timeout",
            self.route,
            self.tries,
            show_duration(self.per_try.unwrap_or(self.timeout)),
            show_duration(self.backoff),
            show_duration(worst),
            show_duration(self.timeout),
        ))
    }
}

/// The budget of every proxying route, in route order.
pub fn budgets(config: &Config) -> Vec<RouteBudget> {
    config
        .routes
        .iter()
        .filter_map(|route| {
            let Action::Proxy(p) = &route.action else { return None };
            let retry = &p.retry;
            let retries = if retry.retry_on.is_empty() { 0 } else { retry.num_retries };
            let backoff = (0..retries).map(|k| retry.backoff_cap(k)).sum();
            let connect = config.clusters.get(p.cluster).map_or(p.timeout, |c| c.connect_timeout);
            let worst = retry.per_try_timeout.map(|per_try| {
                // Only failures detected at connect time are retried: those tries are short.
                let retried_try = if quick_only(retry.retry_on) { per_try.min(connect) } else { per_try };
                retried_try.saturating_mul(retries).saturating_add(per_try).saturating_add(backoff)
            });
            Some(RouteBudget {
                route: route.name.clone(),
                timeout: p.timeout,
                tries: 1 + retries,
                per_try: retry.per_try_timeout,
                adaptive: retry.adaptive().then(|| RetryPolicy::adaptive_cap(p.timeout)),
                backoff,
                worst,
            })
        })
        .collect()
}

/// Retried only on failures that happen before anything is sent.
fn quick_only(on: RetryOn) -> bool {
    !on.after_send()
}

/// The budgets as an aligned text table.
pub fn table(budgets: &[RouteBudget]) -> String {
    let rows: Vec<[String; 7]> = budgets
        .iter()
        .map(|b| {
            [
                b.route.clone(),
                show_duration(b.timeout),
                b.tries.to_string(),
                match (b.per_try, b.adaptive) {
                    (Some(t), _) => show_duration(t),
                    (None, Some(cap)) => format!("adaptive<={}", show_duration(cap)),
                    (None, None) => "shared".to_owned(),
                },
                show_duration(b.backoff),
                b.worst.map_or_else(|| "<= timeout".to_owned(), crate::units::show_duration),
                if b.fits() { "ok".to_owned() } else { "DOES NOT FIT".to_owned() },
            ]
        })
        .collect();
    let header = ["route", "timeout", "tries", "per-try", "backoff", "worst case", "verdict"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn config(routes: &str) -> Config {
        let text = format!(
            "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\n\
             endpoints = [\"127.0.0.1:9\"]\nconnect_timeout = \"200ms\"\n{routes}"
        );
        crate::parse(&text, "<t>").unwrap()
    }

    #[test]
    fn worst_cases_against_route_timeouts() {
        let c = config(
            "[[routes]]\nname = \"default\"\ncluster = \"c\"\n\
             [[routes]]\nname = \"fits\"\ncluster = \"c\"\ntimeout = \"2s\"\n\
             retry = { retry_on = [\"reset\"], num_retries = 2, per_try_timeout = \"600ms\" }\n\
             [[routes]]\nname = \"tight\"\ncluster = \"c\"\ntimeout = \"1s\"\n\
             retry = { retry_on = [\"5xx\"], num_retries = 2, per_try_timeout = \"500ms\" }\n\
             [[routes]]\nname = \"connect-only\"\ncluster = \"c\"\ntimeout = \"1s\"\n\
             retry = { retry_on = [\"connect-failure\"], num_retries = 3, per_try_timeout = \"800ms\" }\n\
             [[routes]]\nname = \"off\"\ncluster = \"c\"\ntimeout = \"1s\"\n\
             retry = { retry_on = [], per_try_timeout = \"1s\" }\n\
             [[routes]]\nname = \"not-on-timeouts\"\ncluster = \"c\"\n\
             retry = { retry_on = [\"connect-failure\"] }\n\
             [[routes]]\nname = \"home\"\ndirect_response = { body = \"x\" }\n",
        );
        let b = budgets(&c);
        assert_eq!(b.len(), 6, "direct responses have no budget");
        // Default: adaptive per-try timeouts, at most half the 15 s route timeout; the last try
        // has what remains.
        assert_eq!((b[0].tries, b[0].per_try, b[0].worst), (3, None, None));
        assert_eq!(b[0].adaptive, Some(Duration::from_millis(7500)));
        // A timeout is not retried: tries share the route timeout.
        assert_eq!((b[5].per_try, b[5].adaptive, b[5].worst), (None, None, None));
        assert!(b[0].fits());
        // 3 x 600ms + 25ms + 50ms = 1875ms <= 2s.
        assert_eq!(b[1].worst, Some(Duration::from_millis(1875)));
        assert!(b[1].fits());
        // 3 x 500ms + 75ms > 1s.
        assert_eq!(b[2].worst, Some(Duration::from_millis(1575)));
        assert!(!b[2].fits());
        assert!(b[2].problem().unwrap().contains(
            "route \"tight\": 3 tries of up to 500ms plus 75ms of backoff need 1575ms, more than its timeout 1s"
        ));
        // Retried tries end within the 200ms connect timeout: 3 x 200ms + 800ms + 175ms = 1575ms.
        assert_eq!(b[3].worst, Some(Duration::from_millis(1575)));
        // No conditions: one try.
        assert_eq!((b[4].tries, b[4].worst), (1, Some(Duration::from_secs(1))));
        let t = table(&b);
        assert!(
            t.starts_with("route            timeout  tries  per-try           backoff  worst case  verdict\n"),
            "{t}"
        );
        assert!(
            t.contains("tight            1s       3      500ms             75ms     1575ms      DOES NOT FIT\n"),
            "{t}"
        );
        assert!(t.contains("default          15s      3      adaptive<=7500ms  75ms     <= timeout  ok\n"), "{t}");
        assert!(t.contains("not-on-timeouts  15s      3      shared            75ms     <= timeout  ok\n"), "{t}");
    }
}
