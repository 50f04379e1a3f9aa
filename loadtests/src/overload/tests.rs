use std::time::Duration;

use super::*;
use crate::capacity::{CapacityConfig, CapacityOrigin, Mode};

fn origin(capacity: usize, service_ms: u64) -> CapacityOrigin {
    let cfg =
        CapacityConfig { capacity, service: Duration::from_millis(service_ms), halve_after: None, mode: Mode::Pool };
    CapacityOrigin::spawn("127.0.0.1:0", cfg).unwrap()
}

fn load(origin: &CapacityOrigin, rate: f64, duration_ms: u64, timeout_ms: u64, workers: usize) -> LoadConfig {
    LoadConfig {
        target: origin.addr(),
        host: origin.addr().to_string(),
        rate,
        duration: Duration::from_millis(duration_ms),
        mix: "a=1,b=3".parse().unwrap(),
        timeout: Duration::from_millis(timeout_ms),
        arrivals: Arrivals::Uniform,
        seed: 1,
        workers,
        split_at: Some(Duration::from_millis(duration_ms / 2)),
    }
}

#[test]
fn parses_targets() {
    let (addr, host) = parse_target("http://127.0.0.1:8080").unwrap();
    assert_eq!((addr.to_string(), host.as_str()), ("127.0.0.1:8080".to_string(), "127.0.0.1:8080"));
    let (addr, host) = parse_target("http://127.0.0.1/ignored").unwrap();
    assert_eq!((addr.port(), host.as_str()), (80, "127.0.0.1"));
    assert!(parse_target("https://127.0.0.1:1").is_err());
    assert!(parse_target("http://").is_err());
}

#[test]
fn below_capacity_everything_succeeds_with_the_service_time() {
    let origin = origin(4, 20);
    let report = run(&load(&origin, 100.0, 1000, 2000, 64)).unwrap();
    assert_eq!(report.total.offered, 100);
    assert_eq!(report.total.succeeded, 100, "{:?}", report.total);
    assert_eq!(report.generator.overloaded, 0);
    let p50 = report.total.ok_ms.p50.unwrap();
    assert!((20.0..60.0).contains(&p50), "p50 {p50}");
    // The mix is about 1:3 and the classes add up.
    let (a, b) = (&report.classes["a"], &report.classes["b"]);
    assert_eq!(a.offered + b.offered, 100);
    assert!((10..=40).contains(&a.offered), "{}", a.offered);
    // Two phases of 50 scheduled requests each.
    assert_eq!(report.phases.len(), 2);
    assert_eq!(report.phases[0].total.offered, 50);
    assert_eq!(report.phases[1].total.offered, 50);
    let offered: u64 = report.series.classes.values().flat_map(|c| c.offered.iter()).sum();
    assert_eq!(offered, 100);
    // The origin counts a request once its response is written, which can trail the client's
    // read of it by a moment on a loaded machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while origin.stats().served < 100 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(origin.stats().served, 100);
    // LIFO worker reuse: far fewer connections than requests.
    assert!(report.generator.connections_opened < 20, "{}", report.generator.connections_opened);
}

#[test]
fn latency_counts_from_the_schedule_and_timeouts_are_counted() {
    // Capacity 50 req/s, offered 200 req/s: the origin's queue grows, answers come ever later.
    let origin = origin(1, 20);
    let report = run(&load(&origin, 200.0, 1000, 300, 256)).unwrap();
    let t = &report.total;
    assert_eq!(report.generator.overloaded, 0);
    assert_eq!(t.offered, 200);
    assert!(t.timed_out > 100, "{t:?}");
    assert_eq!(t.succeeded + t.timed_out + t.errors, 200, "{t:?}");
    assert!(t.max_ms.unwrap() <= 300.0, "{t:?}");
    assert!(t.ok_ms.max.unwrap() > 100.0, "queueing shows in the latency: {t:?}");
}

#[test]
fn too_few_workers_is_reported_as_generator_overload() {
    let origin = origin(1, 100);
    let report = run(&load(&origin, 50.0, 400, 1000, 1)).unwrap();
    assert_eq!(report.total.offered, 20);
    assert!(report.generator.overloaded >= 10, "{:?}", report.generator);
    assert_eq!(report.total.generator_overloaded, report.generator.overloaded);
}

#[test]
fn poisson_arrivals_average_the_rate() {
    let origin = origin(8, 1);
    let mut cfg = load(&origin, 400.0, 1000, 1000, 64);
    cfg.arrivals = Arrivals::Poisson;
    let report = run(&cfg).unwrap();
    assert!((320..=480).contains(&report.total.offered), "{}", report.total.offered);
    assert_eq!(report.total.succeeded, report.total.offered);
}

#[test]
fn refuses_a_zero_rate() {
    let origin = origin(1, 1);
    assert!(run(&load(&origin, 0.0, 100, 100, 1)).is_err());
}
