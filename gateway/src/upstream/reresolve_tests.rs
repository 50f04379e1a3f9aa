//! A new endpoint set shares kept endpoints by address and retires the others.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use gateway_config::{Cluster, Endpoint};

use super::super::balancer::XorShift;
use super::super::health::HealthRegistry;
use super::super::{ClusterState, Outcome, PickHints};
use super::same_but_endpoints;
use crate::stats::metrics::ClusterMetrics;

fn settings(ports: &[u16]) -> Cluster {
    let endpoints: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let text = format!(
        "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\nendpoints = [{}]\n\
         outlier_detection = {{ consecutive_gateway_errors = 1, max_ejection_percent = 100 }}\n",
        endpoints.join(", ")
    );
    gateway_config::parse(&text, "<test>").unwrap().clusters.remove(0)
}

/// `base` with its endpoints replaced by `ports` (as the resolver would publish them).
fn moved(base: &Cluster, ports: &[u16]) -> Cluster {
    let endpoints = ports
        .iter()
        .map(|p| Endpoint { name: "svc.test:80".into(), address: SocketAddr::from(([127, 0, 0, 1], *p)), weight: 1 })
        .collect();
    Cluster { endpoints, ..base.clone() }
}

fn state(c: &Cluster, registry: &HealthRegistry, metrics: &Arc<ClusterMetrics>) -> Rc<ClusterState> {
    let listener = "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n";
    let policy = crate::admission::policy(&gateway_config::parse(listener, "<test>").unwrap());
    Rc::new(ClusterState::new(c, policy, registry, Arc::clone(metrics)))
}

fn eject(c: &Rc<ClusterState>, index: usize) {
    let rng = XorShift::new(5);
    let f = (0..1000).map(|_| c.pick_with(&rng, PickHints::default()).unwrap()).find(|f| f.index() == index).unwrap();
    f.record(Outcome::ConnectFailure);
}

#[test]
fn only_an_endpoint_change_is_carried_by_address() {
    let base = settings(&[9001, 9002]);
    assert!(same_but_endpoints(&base, &moved(&base, &[9002, 9003])));
    assert!(!same_but_endpoints(&base, &base), "nothing changed");
    let other = Cluster { connect_timeout: std::time::Duration::from_secs(9), ..moved(&base, &[9002]) };
    assert!(!same_but_endpoints(&base, &other), "a setting changed too: a reload's rebuild");
}

#[test]
fn kept_addresses_keep_their_state_and_gone_ones_retire() {
    let registry = HealthRegistry::default();
    let metrics = Arc::new(ClusterMetrics::default());
    let base = settings(&[9001, 9002, 9003]);
    let old = state(&base, &registry, &metrics);
    eject(&old, 1);
    eject(&old, 2);
    assert_eq!(metrics.ejected(), 2);
    let rng = XorShift::new(9);
    let in_flight = old.pick_with(&rng, PickHints::default()).unwrap();
    assert_eq!(in_flight.index(), 0);

    // 9002 stays (ejected), 9003 leaves (ejected), 9004 is new.
    let next = Rc::new(ClusterState::with_endpoints(&old, &moved(&base, &[9001, 9002, 9004]), &registry));
    assert!(Rc::ptr_eq(&next.endpoints[0], &old.endpoints[0]) && Rc::ptr_eq(&next.endpoints[1], &old.endpoints[1]));
    assert!(!Rc::ptr_eq(&next.endpoints[2], &old.endpoints[2]));
    assert_eq!(next.endpoints[0].outstanding.get(), 1, "the request in flight counts on the kept endpoint");
    assert!(next.endpoints[1].outlier.is_ejected(), "a kept endpoint stays ejected");
    assert!(old.endpoints[2].is_retired() && !old.endpoints[2].outlier.is_ejected());
    assert!(!next.endpoints.iter().any(|e| e.is_retired()));
    assert!(Rc::ptr_eq(&next.limiter, &old.limiter), "admission carries over whole");
    assert_eq!(metrics.ejected(), 1, "the gone endpoint's ejection left the gauge");
    drop(in_flight);
    assert_eq!(next.endpoints[0].outstanding.get(), 0);
    drop(old);
    assert_eq!(metrics.ejected(), 1, "the predecessor leaves the shared count to its successor");
    let picked: Vec<usize> = (0..100).map(|_| next.pick_with(&rng, PickHints::default()).unwrap().index()).collect();
    assert!(!picked.contains(&1) && picked.contains(&0) && picked.contains(&2), "{picked:?}");
    drop(next);
    assert_eq!(metrics.ejected(), 0);
}
