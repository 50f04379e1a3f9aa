use super::*;

fn demand(per_worker: &[&[f64]]) -> Vec<[f64; MAX_CLASSES]> {
    per_worker
        .iter()
        .map(|classes| {
            let mut d = [0.0; MAX_CLASSES];
            for (slot, x) in d.iter_mut().zip(classes.iter()) {
                *slot = *x;
            }
            d
        })
        .collect()
}

#[test]
fn one_worker_gets_the_whole_limit() {
    assert_eq!(allocate(7, &demand(&[&[]])), vec![7]);
    assert_eq!(allocate(7, &demand(&[&[100.0, 3.0]])), vec![7]);
}

#[test]
fn without_demand_the_limit_is_split_evenly_and_sums_to_it() {
    assert_eq!(allocate(8, &demand(&[&[], &[]])), vec![4, 4]);
    let split = allocate(10, &demand(&[&[], &[], &[], &[]]));
    assert_eq!(split.iter().sum::<usize>(), 10);
    assert!(split.iter().all(|&s| s == 2 || s == 3), "{split:?}");
}

#[test]
fn the_first_class_is_served_everywhere_before_any_later_class() {
    // Worker 0: 3 slots of first-class demand; worker 1: 6 slots of the last class. Limit 4:
    // the first class's 3 first, the one left to worker 1.
    assert_eq!(allocate(4, &demand(&[&[3.0], &[0.0, 0.0, 0.0, 6.0]])), vec![3, 1]);
    // Both want more first-class slots than there are: split in proportion.
    assert_eq!(allocate(6, &demand(&[&[8.0], &[4.0]])), vec![4, 2]);
}

#[test]
fn room_left_over_follows_each_workers_demand() {
    // Demands 1 and 3 of a limit of 8: 4 left over, split 1:3.
    assert_eq!(allocate(8, &demand(&[&[1.0], &[0.0, 3.0]])), vec![2, 6]);
}

#[test]
fn shares_are_whole_and_sum_to_the_limit_whatever_the_demand() {
    let cases: [&[&[f64]]; 4] = [
        &[&[0.3], &[0.3], &[0.3]],
        &[&[1.0, 2.0, 3.0], &[0.5], &[0.0, 0.0, 9.0], &[]],
        &[&[f64::MIN_POSITIVE], &[1e9]],
        &[&[-1.0], &[2.0]],
    ];
    for case in cases {
        for limit in [0, 1, 2, 5, 17, 1000] {
            let split = allocate(limit, &demand(case));
            assert_eq!(split.iter().sum::<usize>(), limit, "{case:?} limit {limit}: {split:?}");
        }
    }
}

fn settings() -> AdaptiveConcurrency {
    AdaptiveConcurrency {
        enabled: true,
        initial_limit: 4,
        min_limit: 2,
        tolerance: 0.05,
        probe_interval: Duration::from_secs(3600),
    }
}

#[test]
fn a_worker_limit_follows_its_demand_once_a_window_closes() {
    let start = Instant::now();
    let c = Controller::new(&settings(), 100, 2, start);
    // Not measured yet: room above the initial limit, split evenly.
    assert_eq!(c.limit(), 16);
    assert_eq!((c.worker_limit(0), c.worker_limit(1)), (8, 8));
    assert!(!c.measured());
    // Worker 1 gets three times worker 0's arrivals; latency 10 ms, no queueing.
    let mut now = start;
    for _ in 0..40 {
        now += Duration::from_millis(10);
        c.arrival(0, 0);
        for _ in 0..3 {
            c.arrival(1, 0);
        }
        for _ in 0..6 {
            c.taken(now);
        }
        c.sample(Duration::from_millis(10), now);
        for _ in 0..6 {
            c.released(now);
        }
    }
    assert!(c.measured());
    assert_eq!(c.baseline(), Some(Duration::from_millis(10)));
    let (a, b) = (c.worker_limit(0), c.worker_limit(1));
    assert_eq!(a + b, c.limit(), "the parts sum to the limit");
    assert!(b >= 2 * a, "worker 1 has three times the demand: {a} and {b}");
    // An index out of range is harmless.
    c.arrival(7, 0);
    c.arrival(0, 99);
    assert_eq!(c.worker_limit(7), 1);
}

#[test]
fn workers_building_a_cluster_share_one_controller_until_its_settings_change() {
    let registry = Controllers::default();
    let text = "[[listeners]]\nname = \"l\"\naddress = \"127.0.0.1:8080\"\n[[clusters]]\nname = \"c\"\n\
                endpoints = [\"127.0.0.1:9\"]\n";
    let config = gateway_config::parse(text, "<t>").unwrap();
    let mut cluster = config.clusters[0].clone();
    cluster.adaptive_concurrency = settings();
    let a = registry.get(&cluster, 2);
    let b = registry.get(&cluster, 2);
    assert!(Arc::ptr_eq(&a, &b), "the same cluster shares one controller");
    assert_eq!(a.workers(), 2);
    cluster.caps.max_requests += 1;
    let changed = registry.get(&cluster, 2);
    assert!(!Arc::ptr_eq(&a, &changed), "new settings, new controller");
    drop((a, b, changed));
    let fresh = registry.get(&cluster, 2);
    assert_eq!(fresh.limit(), 16, "a controller nobody holds any more is not kept");
}
