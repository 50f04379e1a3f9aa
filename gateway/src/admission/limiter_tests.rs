use super::*;
use gateway_config::{AdaptiveConcurrency, Caps, PoolSettings};

fn cluster(max_requests: usize, max_pending: usize) -> Cluster {
    Cluster {
        name: "c".into(),
        endpoints: Vec::new(),
        configured: Vec::new(),
        dns_refresh: None,
        balancer: gateway_config::Balancer::P2c,
        pool: PoolSettings { max_idle_per_endpoint: 1, idle_timeout: Duration::from_secs(1) },
        connect_timeout: Duration::from_secs(1),
        caps: Caps { max_connections: 10, max_pending, max_requests, max_retries: 1 },
        retry_budget: gateway_config::RetryBudget { percent: 20.0, min_concurrent: 1 },
        adaptive_concurrency: AdaptiveConcurrency {
            enabled: false,
            initial_limit: 1,
            min_limit: 1,
            tolerance: 0.05,
            probe_interval: Duration::from_secs(10),
        },
        protocol: gateway_config::UpstreamProtocol::Http1,
        tls: None,
        health_check: None,
        outlier_detection: Default::default(),
        all_unhealthy: gateway_config::AllUnhealthy::Fail,
        hash_key: None,
    }
}

fn policy(enabled: bool) -> Policy {
    Policy {
        enabled,
        classes: 4,
        queue_wait_factor: 1.0,
        first_class_reserve: true,
        queue_delay_target: Duration::from_millis(5),
        queue_delay_interval: Duration::from_millis(100),
    }
}

/// Adaptive limit 2 (its initial value), taken as measured (a no-load latency of 20 ms),
/// hard cap 4.
fn adaptive() -> Rc<Limiter> {
    let mut c = cluster(4, 8);
    c.adaptive_concurrency.enabled = true;
    c.adaptive_concurrency.initial_limit = 2;
    let l = Rc::new(Limiter::new(&c, policy(true)));
    l.assume_measured(DEFAULT_BASELINE);
    l
}

#[test]
fn a_limit_not_yet_measured_gives_a_burst_room() {
    let mut c = cluster(100, 8);
    c.adaptive_concurrency.enabled = true;
    c.adaptive_concurrency.initial_limit = 16;
    let l = Rc::new(Limiter::new(&c, policy(true)));
    assert_eq!(l.limit(), 64, "two doublings above initial_limit before any latency was measured");
    l.assume_measured(DEFAULT_BASELINE);
    assert_eq!(l.limit(), 16);
    c.caps.max_requests = 40;
    let small = Rc::new(Limiter::new(&c, policy(true)));
    assert_eq!(small.limit(), 30, "never above the fixed limit (the cap less the first class's reserve)");
}

fn admitted(a: (Admission, bool)) -> Permit {
    match a.0 {
        Admission::Admitted(p) => p,
        _ => panic!("not admitted"),
    }
}

fn limiter(max_requests: usize) -> Rc<Limiter> {
    Rc::new(Limiter::new(&cluster(max_requests, 8), policy(true)))
}

fn run<F: Future>(f: F) -> F::Output {
    let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    rt.block_on(f)
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test]
fn lower_classes_are_shed_first_and_the_first_class_uses_the_headroom() {
    run(async {
        // Cap 8: limit 6, the rest reserved for the first class.
        let l = limiter(8);
        assert_eq!(l.limit(), 6);
        let mut held = Vec::new();
        for _ in 0..6 {
            match l.admit(3, far()).await.0 {
                Admission::Admitted(p) => held.push(p),
                _ => panic!("below the limit every class is admitted"),
            }
        }
        assert!(matches!(l.admit(3, far()).await.0, Admission::Shed), "last class never waits");
        let (normal, waited) = l.admit(2, far()).await;
        assert!(matches!(normal, Admission::Shed) && waited, "a middle class waits briefly, then is shed");
        assert!(matches!(l.admit(0, far()).await.0, Admission::Admitted(_)), "first class on the headroom");
    });
}

#[test]
fn a_freed_slot_goes_to_the_best_waiter_and_overflow_beyond_the_cap() {
    run(async {
        let l = limiter(2); // limit 1, headroom 1
        let first = match l.admit(1, far()).await.0 {
            Admission::Admitted(p) => p,
            _ => panic!("admitted"),
        };
        let second = match l.admit(0, far()).await.0 {
            Admission::Admitted(p) => p,
            _ => panic!("first class on the headroom"),
        };
        assert_eq!(l.in_flight(), 2);
        assert!(matches!(l.admit(1, far()).await.0, Admission::Overflow), "hard cap");
        let l2 = Rc::clone(&l);
        let waiter = monoio::spawn(async move { matches!(l2.admit(0, far()).await.0, Admission::Admitted(_)) });
        monoio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(l.pending(), 1);
        drop(first);
        assert!(waiter.await, "the waiter got the freed slot");
        assert_eq!(l.in_flight(), 1, "its permit was dropped again by the task");
        drop(second);
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn a_waiter_that_goes_away_gives_its_slot_back() {
    run(async {
        let l = limiter(2);
        let a = match l.admit(1, far()).await.0 {
            Admission::Admitted(p) => p,
            _ => panic!("admitted"),
        };
        let b = match l.admit(0, far()).await.0 {
            Admission::Admitted(p) => p,
            _ => panic!("admitted"),
        };
        // A first-class waiter that is cancelled (its request dropped) while queued.
        let l2 = Rc::clone(&l);
        let gone = crate::runtime::timeout(Duration::from_millis(10), async move { l2.admit(0, far()).await }).await;
        assert!(gone.is_err());
        assert_eq!(l.pending(), 0, "left the queue");
        drop(a);
        drop(b);
        assert_eq!(l.in_flight(), 0, "no slot leaked");
    });
}

#[test]
fn with_classes_off_only_the_cap_applies() {
    run(async {
        let l = Rc::new(Limiter::new(&cluster(1, 8), policy(false)));
        let held = l.admit(3, far()).await.0;
        assert!(matches!(held, Admission::Admitted(_)));
        assert!(matches!(l.admit(0, far()).await.0, Admission::Overflow));
    });
}

#[test]
fn the_last_free_slot_waits_a_moment_for_the_first_class_then_goes_to_anyone() {
    run(async {
        let mut c = cluster(8, 8);
        c.adaptive_concurrency.enabled = true;
        c.adaptive_concurrency.initial_limit = 4;
        let l = Rc::new(Limiter::new(&c, policy(true)));
        l.assume_measured(Duration::from_millis(200));
        // Half the arrivals are first class: the hold is 200 ms x min(0.5, 1/4) = 50 ms.
        for i in 0..640 {
            l.reserve.arrival(if i % 2 == 0 { 0 } else { 2 });
        }
        let mut full = Vec::new();
        for _ in 0..4 {
            full.push(admitted(l.admit(2, far()).await));
        }
        drop(full.pop());
        assert_eq!(l.in_flight(), 3);
        assert!(matches!(l.admit(3, far()).await.0, Admission::Shed), "the held slot is not the last class's");
        let critical = admitted(l.admit(0, far()).await);
        assert_eq!(l.in_flight(), 4, "the first class took the held slot at once");
        drop(critical);
        // No first-class request comes: a middle class takes the slot when the hold ends,
        // long before its own wait bound (200 ms).
        let asked = Instant::now();
        let normal = admitted(l.admit(1, far()).await);
        assert!(asked.elapsed() >= Duration::from_millis(45), "{:?}", asked.elapsed());
        assert_eq!(l.in_flight(), 4);
        // Two slots free: nothing is held.
        drop(normal);
        drop(full.pop());
        let _a = admitted(l.admit(3, far()).await);
        assert_eq!(l.in_flight(), 3);
    });
}

#[test]
fn the_first_class_waits_first_in_line_at_the_adaptive_limit_and_takes_the_next_slot() {
    run(async {
        let l = adaptive();
        assert_eq!(l.limit(), 2);
        let a = admitted(l.admit(2, far()).await);
        let b = admitted(l.admit(2, far()).await);
        // A middle class queues first, then the first class arrives: it goes ahead.
        let l1 = Rc::clone(&l);
        let normal = monoio::spawn(async move { matches!(l1.admit(2, far()).await.0, Admission::Admitted(_)) });
        let l0 = Rc::clone(&l);
        let critical = monoio::spawn(async move {
            let p = admitted(l0.admit(0, far()).await);
            let in_flight = l0.in_flight();
            drop(p);
            in_flight
        });
        monoio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!((l.pending(), l.in_flight()), (2, 2), "both wait at the limit");
        drop(a);
        assert_eq!(critical.await, 2, "the freed slot went to the first class, nothing above the limit");
        assert!(normal.await, "and the next one to the middle class");
        drop(b);
        assert_eq!((l.in_flight(), l.pending()), (0, 0));
    });
}

#[test]
fn the_first_class_goes_a_little_above_the_adaptive_limit_after_a_short_wait() {
    run(async {
        let l = adaptive();
        let held: Vec<Permit> = vec![admitted(l.admit(2, far()).await), admitted(l.admit(2, far()).await)];
        let started = Instant::now();
        // One no-load latency (20 ms).
        let c1 = admitted(l.admit(0, far()).await);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(10) && waited < Duration::from_millis(500), "{waited:?}");
        assert_eq!(l.in_flight(), 3);
        // At most max(1, L/4) above the limit: the next one waits until its deadline.
        let soon = Instant::now() + Duration::from_millis(30);
        let (decision, waited) = l.admit(0, soon).await;
        assert!(matches!(decision, Admission::Shed) && waited);
        assert!(Instant::now() >= soon);
        drop((held, c1));
        assert_eq!((l.in_flight(), l.pending()), (0, 0));
    });
}

#[test]
fn a_standing_queue_sheds_a_middle_class_on_arrival_while_others_wait() {
    run(async {
        let l = limiter(2); // limit 1; class 2 of 4 waits up to 10 ms (no baseline yet)
        let held = admitted(l.admit(1, far()).await);
        // Class 2 waiters time out after 10 ms, over and over: their queue stands.
        let mut fast = 0;
        for _ in 0..16 {
            let waiters: Vec<_> = (0..MIN_STANDING_QUEUE)
                .map(|_| {
                    let l2 = Rc::clone(&l);
                    monoio::spawn(async move { l2.admit(2, far()).await })
                })
                .collect();
            monoio::time::sleep(Duration::from_millis(1)).await;
            let started = Instant::now();
            let (decision, waited) = l.admit(2, far()).await;
            assert!(matches!(decision, Admission::Shed | Admission::ShedStanding));
            assert_eq!(matches!(decision, Admission::ShedStanding), !waited);
            if !waited && started.elapsed() < Duration::from_millis(2) {
                fast += 1;
            }
            for w in waiters {
                assert!(matches!(w.await.0, Admission::Shed));
            }
        }
        assert!(l.queue_delay(2, Instant::now()) >= Duration::from_millis(9), "{:?}", l.queue_delay(2, Instant::now()));
        assert!(fast >= 4, "shed on arrival once the queue stood for an interval: {fast}");
        // Too few queued: a newcomer joins the queue rather than leave slots to lower classes.
        let (_, waited) = l.admit(2, far()).await;
        assert!(waited);
        // The class above has its own queue and its own signal.
        assert_eq!(l.queue_delay(1, Instant::now()), Duration::ZERO);
        drop(held);
    });
}

#[test]
fn a_slot_freed_at_one_worker_goes_to_a_first_class_request_waiting_at_another() {
    run(async {
        let mut c = cluster(8, 8);
        c.adaptive_concurrency.enabled = true;
        c.adaptive_concurrency.initial_limit = 4;
        let shared = Arc::new(Controller::new(&c.adaptive_concurrency, 8, 2, Instant::now()));
        shared.assume_measured(Duration::from_millis(40));
        // A middle class waits up to 2 s here (not 40 ms): on a loaded test machine the first
        // class's look for the freed slot can take longer than one no-load latency.
        let patient = Policy { queue_wait_factor: 50.0, ..policy(true) };
        let worker = |i| Rc::new(Limiter::with_controller(&c, patient, |_| Arc::clone(&shared), i));
        let (a, b) = (worker(0), worker(1));
        assert_eq!((a.limit(), b.limit()), (2, 2), "the limit of 4, split evenly before any demand");
        let mut at_a: Vec<Permit> = vec![admitted(a.admit(2, far()).await), admitted(a.admit(2, far()).await)];
        let _at_b = [admitted(b.admit(2, far()).await), admitted(b.admit(2, far()).await)];
        // The cluster is full: a first-class request at worker 1 waits.
        let b1 = Rc::clone(&b);
        let critical = monoio::spawn(async move {
            let started = Instant::now();
            let p = admitted(b1.admit(0, far()).await);
            (started.elapsed(), p)
        });
        monoio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(shared.first_waiting(), 1);
        // Worker 0's later classes leave the cluster's next free slot to it.
        assert!(matches!(a.admit(3, far()).await.0, Admission::Shed));
        let a2 = Rc::clone(&a);
        let normal = monoio::spawn(async move { a2.admit(2, far()).await.0 });
        monoio::time::sleep(Duration::from_millis(2)).await;
        drop(at_a.pop());
        let (waited, permit) = critical.await;
        assert!(waited < Duration::from_secs(1), "found the freed slot by looking (every 5 ms): {waited:?}");
        assert_eq!((a.in_flight(), b.in_flight()), (1, 3), "worker 1 went above its part");
        assert_eq!(shared.first_waiting(), 0);
        // The next slot freed goes to worker 0's waiting request.
        drop(permit);
        drop(at_a.pop());
        assert!(matches!(normal.await, Admission::Admitted(_)));
    });
}

#[test]
fn each_route_s_latency_reaches_the_adaptive_limit_as_its_own_kind() {
    run(async {
        let mut c = cluster(64, 8);
        c.adaptive_concurrency.enabled = true;
        c.adaptive_concurrency.initial_limit = 16;
        let shared = Arc::new(Controller::new(&c.adaptive_concurrency, 64, 1, Instant::now()));
        let l = Rc::new(Limiter::with_controller(&c, policy(true), |_| Arc::clone(&shared), 0));
        let (fast, slow) = (crate::admission::gradient::kind_key("fast"), crate::admission::gradient::kind_key("slow"));
        assert_ne!(fast, slow);
        for (kind, ms) in [(fast, 1), (slow, 30), (fast, 1), (slow, 30), (fast, 1), (slow, 30)] {
            let mut p = admitted(l.admit(2, far()).await);
            p.set_kind(kind);
            p.start();
            monoio::time::sleep(Duration::from_millis(ms)).await;
            p.success();
        }
        let kinds = shared.kinds();
        let keys: Vec<u64> = kinds.iter().map(|k| k.0).collect();
        assert_eq!(keys, [fast, slow], "one kind per route");
        // The first window (five samples) measured each route's own no-load latency.
        let (f, s) = (kinds[0].1.expect("fast measured"), kinds[1].1.expect("slow measured"));
        assert!(f < Duration::from_millis(15) && s >= Duration::from_millis(30), "fast {f:?}, slow {s:?}");
    });
}

#[test]
fn a_middle_class_waits_less_while_being_served_takes_longer() {
    // Four classes, a no-load latency of 20 ms, `queue_wait_factor` 1 (these tests' policy):
    // the second class may wait the whole no-load latency, the third half of it. When the
    // upstream's last window took 1.3 times the no-load latency, 0.3 of it comes off each
    // wait; at twice it, nobody but the first class waits.
    let l = adaptive();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(close(ms(l.wait_bound(1, 3)), 20.0) && close(ms(l.wait_bound(2, 3)), 10.0));
    l.assume_ratio(1.3);
    assert!(close(ms(l.wait_bound(1, 3)), 14.0), "{:?}", l.wait_bound(1, 3));
    assert!(close(ms(l.wait_bound(2, 3)), 4.0), "{:?}", l.wait_bound(2, 3));
    l.assume_ratio(2.0);
    assert_eq!((l.wait_bound(1, 3), l.wait_bound(2, 3)), (Duration::ZERO, Duration::ZERO));
    // Faster than the no-load latency takes nothing off, and adds nothing; nor does a ratio
    // that is not a number.
    l.assume_ratio(0.5);
    assert!(close(ms(l.wait_bound(1, 3)), 20.0));
    l.assume_ratio(f64::NAN);
    assert!(close(ms(l.wait_bound(1, 3)), 20.0));
    // Without the adaptive limit there is no window to read: the factor alone.
    let fixed = limiter(8);
    assert!(close(ms(fixed.wait_bound(1, 3)), 20.0));
}
