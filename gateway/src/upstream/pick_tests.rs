//! `ClusterState::pick_with` over every balancer: eligibility (active health and outlier
//! ejection), `avoid`, `all_unhealthy`, and the outcomes `InFlight::record` feeds back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::*;
use std::sync::atomic::Ordering::Relaxed;

const BALANCERS: [&str; 4] = ["p2c", "round_robin", "peak_ewma", "maglev\"\nhash_key = \"client_ip"];

fn cluster(registry: &HealthRegistry, n: usize, keys: &str) -> Rc<ClusterState> {
    let endpoints: Vec<String> = (0..n).map(|i| format!("\"127.0.0.1:{}\"", 9000 + i)).collect();
    let text = format!(
        "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\nendpoints = [{}]\n{keys}\n",
        endpoints.join(", ")
    );
    let config = gateway_config::parse(&text, "<test>").unwrap();
    let policy = crate::admission::policy(&config);
    Rc::new(ClusterState::new(&config.clusters[0], policy, registry, Arc::default()))
}

fn mark_unhealthy(registry: &HealthRegistry, i: usize) {
    let h = registry.endpoint("c", format!("127.0.0.1:{}", 9000 + i).parse().unwrap());
    h.record(false, None, 1, 1);
}

fn picks(c: &Rc<ClusterState>, rng: &XorShift, hints: impl Fn(u64) -> PickHints, n: usize) -> Vec<usize> {
    (0..n as u64).filter_map(|k| c.pick_with(rng, hints(k)).map(|f| f.index())).collect()
}

#[test]
fn no_balancer_picks_an_unhealthy_or_ejected_endpoint() {
    for balancer in BALANCERS {
        let registry = HealthRegistry::default();
        let c =
            cluster(&registry, 4, &format!("balancer = \"{balancer}\"\noutlier_detection = {{ consecutive_5xx = 1 }}"));
        let rng = XorShift::new(17);
        mark_unhealthy(&registry, 1);
        // A 5xx on endpoint 2 ejects it (floor(4 x 50%) = 2 may be ejected).
        let f = loop {
            let f = c.pick_with(&rng, PickHints::default()).unwrap();
            if f.index() == 2 {
                break f;
            }
        };
        f.record(Outcome::Response(503));
        drop(f);
        let hash = |k: u64| PickHints { hash: Some(hashkey::mix64(k)), avoid: None, shy: Shy::default() };
        let got = picks(&c, &rng, hash, 400);
        assert_eq!(got.len(), 400, "{balancer}");
        assert!(got.iter().all(|&i| i == 0 || i == 3), "{balancer}: {got:?}");
        assert!(got.contains(&0) && got.contains(&3), "{balancer}");
        // `avoid` is honoured while another eligible endpoint exists.
        let away = picks(&c, &rng, |k| PickHints { hash: Some(k), avoid: Some(0), shy: Shy::default() }, 50);
        assert!(away.iter().all(|&i| i == 3), "{balancer}: {away:?}");
    }
}

#[test]
fn all_unhealthy_fails_or_panics() {
    for balancer in BALANCERS {
        let registry = HealthRegistry::default();
        let fail = cluster(&registry, 2, &format!("balancer = \"{balancer}\""));
        mark_unhealthy(&registry, 0);
        mark_unhealthy(&registry, 1);
        let rng = XorShift::new(5);
        assert!(
            fail.pick_with(&rng, PickHints { hash: Some(1), avoid: None, shy: Shy::default() }).is_none(),
            "{balancer}"
        );
        let panic = cluster(&registry, 2, &format!("balancer = \"{balancer}\"\nall_unhealthy = \"panic\""));
        let got =
            picks(&panic, &rng, |k| PickHints { hash: Some(hashkey::mix64(k)), avoid: None, shy: Shy::default() }, 100);
        assert_eq!(got.len(), 100, "{balancer}");
        assert_eq!(panic.metrics.panic_picks(), 100, "{balancer}");
        assert!(!panic.panic.get(), "the panic flag is cleared after the pick");
    }
}

#[test]
fn maglev_clusters_built_apart_agree_and_skip_only_the_ineligible() {
    let keys = "balancer = \"maglev\"\nhash_key = \"header:x-user\"";
    let (ra, rb) = (HealthRegistry::default(), HealthRegistry::default());
    let (a, b) = (cluster(&ra, 5, keys), cluster(&rb, 5, keys));
    let rng = XorShift::new(1);
    let hints = |k: u64| PickHints { hash: Some(hashkey::mix64(k)), avoid: None, shy: Shy::default() };
    let before = picks(&a, &rng, hints, 2000);
    assert_eq!(before, picks(&b, &rng, hints, 2000));
    mark_unhealthy(&rb, 3);
    let after = picks(&b, &rng, hints, 2000);
    for (x, y) in before.iter().zip(&after) {
        assert!(*y != 3 && (x == y || *x == 3), "{x} -> {y}");
    }
}

#[test]
fn peak_ewma_learns_from_recorded_outcomes() {
    let registry = HealthRegistry::default();
    let c = cluster(&registry, 2, "balancer = \"peak_ewma\"");
    let rng = XorShift::new(9);
    // Endpoint 0 fails (counted as a slow try); endpoint 1 answers.
    for _ in 0..20 {
        let f = c.pick_with(&rng, PickHints::default()).unwrap();
        f.record(if f.index() == 0 { Outcome::ConnectFailure } else { Outcome::Response(200) });
    }
    let got = picks(&c, &rng, |_| PickHints::default(), 100);
    assert!(got.iter().filter(|&&i| i == 1).count() >= 95, "{got:?}");
}

#[test]
fn a_rebuilt_cluster_state_keeps_ejections_by_address() {
    let registry = HealthRegistry::default();
    let metrics: Arc<ClusterMetrics> = Arc::default();
    let build = |n: usize| {
        let endpoints: Vec<String> = (0..n).map(|i| format!("\"127.0.0.1:{}\"", 9000 + i)).collect();
        let text = format!(
            "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\nendpoints = [{}]\n\
             outlier_detection = {{ consecutive_gateway_errors = 1 }}\n",
            endpoints.join(", ")
        );
        let config = gateway_config::parse(&text, "<test>").unwrap();
        Rc::new(ClusterState::new(
            &config.clusters[0],
            crate::admission::policy(&config),
            &registry,
            Arc::clone(&metrics),
        ))
    };
    let old = build(3);
    let rng = XorShift::new(3);
    let f = loop {
        let f = old.pick_with(&rng, PickHints::default()).unwrap();
        if f.index() == 1 {
            break f;
        }
    };
    f.record(Outcome::Reset);
    drop(f);
    assert_eq!(metrics.ejected(), 1);
    // floor(3 x 50%) = 1 ejected already: a reset on endpoint 2 leaves it in, suspect.
    record_on(&old, &rng, 2, Outcome::Reset);
    assert!(!old.endpoints[2].outlier.is_ejected() && old.endpoints[2].gauge.suspect_until_ms.load(Relaxed) != 0);
    // A reload adds an endpoint: the settings differ, the state is rebuilt and takes over.
    let new = build(4);
    new.take_over(&old);
    drop(old);
    assert_eq!(metrics.ejected(), 1, "the gauge counts the ejection once");
    assert!(new.endpoints[1].outlier.is_ejected() && new.endpoints[1].outlier.times_ejected() == 1);
    let got = picks(&new, &rng, |_| PickHints::default(), 200);
    assert!(!got.contains(&1) && got.contains(&3), "{got:?}");
    // The suspicion carries over too, and what /clusters shows of it.
    assert_ne!(new.endpoints[2].gauge.suspect_until_ms.load(Relaxed), 0);
    let careful = picks(&new, &rng, |_| PickHints { shy: Shy::ALL, ..PickHints::default() }, 200);
    assert!(!careful.contains(&1) && !careful.contains(&2), "{careful:?}");
}

proptest::proptest! {
    /// Neither new balancer ever picks an ineligible endpoint; peak-EWMA finds one whenever one
    /// exists (maglev may give up after its probes, and the cluster then falls back to p2c).
    #[test]
    fn new_balancers_never_pick_an_ineligible_endpoint(
        spec in proptest::collection::vec((proptest::bool::ANY, 0u64..50), 1..10),
        seed in proptest::num::u64::ANY,
    ) {
        let registry = HealthRegistry::default();
        let c = cluster(&registry, spec.len(), "balancer = \"peak_ewma\"");
        let m = maglev::Maglev::new(c.settings.endpoints.iter().map(|e| (e.name.as_str(), e.weight)));
        let now = std::time::Instant::now();
        for (i, (healthy, ms)) in spec.iter().enumerate() {
            if !healthy {
                mark_unhealthy(&registry, i);
            }
            c.endpoints[i].ewma.observe(std::time::Duration::from_millis(*ms), now, std::time::Duration::from_secs(10));
        }
        let rng = XorShift::new(seed);
        let any = spec.iter().any(|s| s.0);
        for k in 0..20 {
            match ewma::pick(&c.endpoints, &rng, now, std::time::Duration::from_secs(10)) {
                Some(i) => proptest::prop_assert!(spec[i].0),
                None => proptest::prop_assert!(!any),
            }
            if let Some(i) = m.pick(&c.endpoints, hashkey::mix64(seed ^ k)) {
                proptest::prop_assert!(spec[i].0);
            }
        }
    }
}

/// Records `outcome` on a try that the balancer sent to endpoint `index`.
fn record_on(c: &Rc<ClusterState>, rng: &XorShift, index: usize, outcome: Outcome) {
    let f = (0..10_000).map(|_| c.pick_with(rng, PickHints::default()).unwrap()).find(|f| f.index() == index).unwrap();
    f.record(outcome);
}

/// An endpoint whose last try ended in a gateway error is passed over, by every balancer while
/// one that is not suspect is eligible, by requests shy of that failure: a POST (shy of all)
/// after any; a GET on the default policy (shy of malformed answers only) after a malformed
/// answer but not after a reset, which it would be retried after. An answer clears it.
#[test]
fn shy_requests_pass_over_an_endpoint_whose_last_try_failed() {
    let with = |shy: Shy| move |k: u64| PickHints { hash: Some(hashkey::mix64(k)), avoid: None, shy };
    let (post, get) = (with(Shy::ALL), with(Shy { of_failures: false, of_malformed: true }));
    let bold = with(Shy::default());
    for balancer in BALANCERS {
        let registry = HealthRegistry::default();
        let c = cluster(&registry, 3, &format!("balancer = \"{balancer}\""));
        let rng = XorShift::new(5);
        for outcome in [Outcome::Reset, Outcome::Timeout, Outcome::ConnectFailure, Outcome::Protocol] {
            record_on(&c, &rng, 1, outcome);
            let got = picks(&c, &rng, post, 300);
            assert!(got.len() == 300 && !got.contains(&1), "{balancer} {outcome:?}: {got:?}");
            let gets = picks(&c, &rng, get, 300);
            assert_eq!(gets.contains(&1), outcome != Outcome::Protocol, "{balancer} {outcome:?}: {gets:?}");
            assert!(
                picks(&c, &rng, bold, 300).contains(&1),
                "{balancer}: requests retried after anything still go there"
            );
            // A response (any status below 500) ends the suspicion.
            record_on(&c, &rng, 1, Outcome::Response(404));
            assert!(picks(&c, &rng, post, 300).contains(&1), "{balancer} {outcome:?}: cleared by an answer");
        }
        // A 5xx answer is an answer: not suspect (consecutive_5xx counts it).
        record_on(&c, &rng, 2, Outcome::Response(503));
        assert!(picks(&c, &rng, post, 300).contains(&2), "{balancer}");
        assert!(c.metrics.suspects_passed_over() >= 5 * 50, "{balancer}: {}", c.metrics.suspects_passed_over());
    }
}

#[test]
fn shy_requests_still_get_an_endpoint_when_every_one_is_suspect_and_suspicion_ends() {
    let registry = HealthRegistry::default();
    // base_ejection_time is the window; two errors in a row stay below the default 3.
    let c =
        cluster(&registry, 2, "outlier_detection = { base_ejection_time = \"300ms\", max_ejection_time = \"300ms\" }");
    let rng = XorShift::new(3);
    let careful = |_| PickHints { shy: Shy::ALL, ..PickHints::default() };
    record_on(&c, &rng, 0, Outcome::Reset);
    record_on(&c, &rng, 1, Outcome::Reset);
    let got = picks(&c, &rng, careful, 100);
    assert!(got.len() == 100 && got.contains(&0) && got.contains(&1), "{got:?}");
    record_on(&c, &rng, 1, Outcome::Response(200));
    assert!(picks(&c, &rng, careful, 100).iter().all(|&i| i == 1));
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert!(picks(&c, &rng, careful, 100).contains(&0), "the window ended");
    // Outlier detection off: nothing is suspect.
    let off = cluster(&registry, 2, "outlier_detection = { enabled = false }");
    record_on(&off, &rng, 0, Outcome::Reset);
    assert!(picks(&off, &rng, careful, 100).contains(&0));
}
