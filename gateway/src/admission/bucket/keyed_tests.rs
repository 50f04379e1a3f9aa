//! Tests of `KeyedBuckets`: the bound, the eviction order, and equivalence with a simple model.

use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;

use super::super::tests::{admitted_at, assert_window_bound};
use super::super::LocalBucket;
use super::*;

const SEC: u64 = 1_000_000_000;

fn rate(per_second: f64, burst: u32) -> Rate {
    Rate::new(per_second, burst).unwrap()
}

/// The map, the slots and the LRU list agree: every slot is on the list once, in both
/// directions, and the map points each key at its slot.
fn check_invariants<K: Hash + Eq + Clone + std::fmt::Debug>(t: &KeyedBuckets<K>) {
    assert!(t.len() <= t.max_keys());
    assert_eq!(t.index.len(), t.slots.len());
    let (mut seen, mut prev, mut i) = (0, NIL, t.head);
    while i != NIL {
        let slot = &t.slots[i as usize];
        assert_eq!(slot.prev, prev);
        assert_eq!(t.index[&slot.key], i);
        (prev, i) = (i, slot.next);
        seen += 1;
        assert!(seen <= t.slots.len(), "cycle in the LRU list");
    }
    assert_eq!(t.tail, prev);
    assert_eq!(seen, t.slots.len());
}

/// Keys from least to most recently used.
fn lru_order<K: Clone>(t: &KeyedBuckets<K>) -> Vec<K> {
    let (mut keys, mut i) = (Vec::new(), t.tail);
    while i != NIL {
        keys.push(t.slots[i as usize].key.clone());
        i = t.slots[i as usize].prev;
    }
    keys
}

#[test]
fn stays_within_max_keys_under_many_distinct_keys() {
    let mut t = KeyedBuckets::new(rate(1.0, 5), 1000);
    for n in 0..100_000u32 {
        let key = IpAddr::V4(Ipv4Addr::from(n));
        assert_eq!(t.acquire(&key, u64::from(n), Duration::ZERO), Decision::Admit);
        assert!(t.len() <= 1000);
    }
    assert_eq!(t.len(), 1000);
    assert_eq!(t.evictions(), 99_000);
    check_invariants(&t);
    // The survivors are the 1000 most recent keys.
    assert_eq!(t.remaining(&IpAddr::V4(Ipv4Addr::from(99_999u32)), 100_000), 4);
    assert_eq!(t.remaining(&IpAddr::V4(Ipv4Addr::from(0u32)), 100_000), 5);
}

#[test]
fn evicts_the_least_recently_used_key() {
    // Slow refill: every bucket stays in debt, so plain LRU order decides.
    let mut t = KeyedBuckets::new(rate(0.001, 1), 3);
    for key in [1u64, 2, 3] {
        t.acquire(&key, 0, Duration::ZERO);
    }
    assert!(matches!(t.acquire(&1, SEC, Duration::ZERO), Decision::Reject { .. }));
    assert_eq!(lru_order(&t), [2, 3, 1]);
    assert_eq!(t.acquire(&4, 2 * SEC, Duration::ZERO), Decision::Admit);
    assert_eq!(lru_order(&t), [3, 1, 4]);
    assert_eq!(t.remaining(&2, 2 * SEC), 1, "2 was evicted");
    assert_eq!(t.remaining(&1, 2 * SEC), 0, "1 kept its debt");
    assert_eq!(t.reset_after(&1, 2 * SEC), Duration::from_secs(998));
    t.acquire(&5, 3 * SEC, Duration::ZERO);
    assert_eq!(lru_order(&t), [1, 4, 5]);
    assert_eq!(t.evictions(), 2);
    check_invariants(&t);
}

#[test]
fn prefers_evicting_a_bucket_that_is_full_again() {
    let mut t = KeyedBuckets::new(rate(1.0, 3), 2);
    for _ in 0..3 {
        t.acquire(&"heavy", 0, Duration::ZERO); // in debt until 3 s
    }
    t.acquire(&"light", SEC / 10, Duration::ZERO); // full again at 1.1 s
    t.acquire(&"new", 2 * SEC, Duration::ZERO);
    assert_eq!(lru_order(&t), ["heavy", "new"]);
    assert_eq!(t.remaining(&"heavy", 2 * SEC), 2, "heavy kept its debt (a new bucket would hold 3)");
    assert_eq!(t.reset_after(&"heavy", 2 * SEC), Duration::from_secs(1));
    check_invariants(&t);
}

#[test]
fn a_hot_key_keeps_its_state_under_key_churn() {
    let mut t = KeyedBuckets::new(rate(0.001, 1), 100);
    assert_eq!(t.acquire(&u64::MAX, 0, Duration::ZERO), Decision::Admit);
    for cold in 0..100_000u64 {
        assert_eq!(t.acquire(&cold, 1, Duration::ZERO), Decision::Admit);
        assert!(matches!(t.acquire(&u64::MAX, 1, Duration::ZERO), Decision::Reject { .. }));
    }
    assert_eq!(t.len(), 100);
    check_invariants(&t);
}

#[test]
fn expire_idle_drops_only_full_buckets_from_the_lru_end() {
    let mut t = KeyedBuckets::new(rate(1.0, 1), 10);
    for (key, at) in [(1u64, 0), (2, SEC / 2), (3, 0), (4, 3 * SEC)] {
        t.acquire(&key, at, Duration::ZERO);
    }
    // At 1.2 s: 1 and 3 are full (tat 1 s), 2 is not (tat 1.5 s), 4 is in debt.
    assert_eq!(t.expire_idle(1_200_000_000, 10), 1, "stops at 2, which still owes");
    assert_eq!(lru_order(&t), [2, 3, 4]);
    assert_eq!(t.expire_idle(2 * SEC, 1), 1, "limit respected");
    assert_eq!(t.expire_idle(2 * SEC, 10), 1);
    assert_eq!(lru_order(&t), [4]);
    check_invariants(&t);
    assert_eq!(t.expire_idle(10 * SEC, 10), 1);
    assert!(t.is_empty());
    check_invariants(&t);
    assert_eq!(t.acquire(&7, 10 * SEC, Duration::ZERO), Decision::Admit);
    check_invariants(&t);
}

#[test]
fn zero_max_keys_holds_one() {
    let mut t = KeyedBuckets::new(rate(1.0, 1), 0);
    t.acquire(&1u8, 0, Duration::ZERO);
    t.acquire(&2u8, 0, Duration::ZERO);
    assert_eq!(t.len(), 1);
    assert_eq!(t.max_keys(), 1);
}

#[derive(Clone, Debug)]
enum Op {
    Acquire { key: u8, advance: u64, max_wait: u64 },
    Expire { limit: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..24, 0u64..400_000_000, 0u64..300_000_000)
            .prop_map(|(key, advance, max_wait)| Op::Acquire { key, advance, max_wait }),
        1 => (0usize..4).prop_map(|limit| Op::Expire { limit }),
    ]
}

proptest! {
    /// Same decisions, same table as a model built from `LocalBucket`s in a `Vec` kept in
    /// most-recently-used order, with the same eviction rule; and never more than `max_keys`.
    #[test]
    fn matches_the_model_and_stays_bounded(
        per_second in 0.5f64..50.0,
        burst in 1u32..4,
        max_keys in 1usize..10,
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let r = Rate { per_second, burst };
        let mut t = KeyedBuckets::new(r, max_keys);
        let mut model: Vec<(u8, LocalBucket)> = Vec::new(); // front = most recently used
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Acquire { key, advance, max_wait } => {
                    now += advance;
                    let max_wait = Duration::from_nanos(max_wait);
                    let got = t.acquire(&key, now, max_wait);
                    let mut bucket = match model.iter().position(|(k, _)| *k == key) {
                        Some(at) => model.remove(at).1,
                        None => {
                            if model.len() == max_keys {
                                let victim = model.iter().rev().take(EVICTION_PROBE)
                                    .position(|(_, b)| b.reset_after(now).is_zero())
                                    .map_or(model.len() - 1, |back| model.len() - 1 - back);
                                model.remove(victim);
                            }
                            LocalBucket::new(r)
                        }
                    };
                    let want = bucket.acquire(now, max_wait);
                    model.insert(0, (key, bucket));
                    prop_assert_eq!(got, want);
                    if let Decision::Wait(w) = got {
                        prop_assert!(w <= max_wait);
                    }
                }
                Op::Expire { limit } => {
                    let mut expected = 0;
                    while expected < limit && model.last().is_some_and(|(_, b)| b.reset_after(now).is_zero()) {
                        model.pop();
                        expected += 1;
                    }
                    prop_assert_eq!(t.expire_idle(now, limit), expected);
                }
            }
            prop_assert!(t.len() <= max_keys);
            prop_assert_eq!(t.len(), model.len());
            for (key, bucket) in &model {
                prop_assert_eq!(t.remaining(key, now), bucket.remaining(now));
                prop_assert_eq!(t.reset_after(key, now), bucket.reset_after(now));
            }
            let order: Vec<u8> = model.iter().rev().map(|(k, _)| *k).collect();
            prop_assert_eq!(lru_order(&t), order);
        }
        check_invariants(&t);
    }

    /// While no key is evicted, each key's admissions obey its own token-bucket bound.
    #[test]
    fn each_key_obeys_the_bucket_bound(
        per_second in 0.5f64..500.0,
        burst in 1u32..10,
        steps in proptest::collection::vec((0u8..8, 0u64..20_000_000, 0u64..50_000_000), 1..300),
    ) {
        let r = Rate { per_second, burst };
        let mut t = KeyedBuckets::new(r, 8);
        let (mut now, mut times) = (0u64, vec![Vec::new(); 8]);
        for (key, advance, max_wait) in steps {
            now += advance;
            let got = t.acquire(&key, now, Duration::from_nanos(max_wait));
            times[usize::from(key)].extend(admitted_at(now, got));
        }
        prop_assert_eq!(t.evictions(), 0);
        for key_times in &times {
            assert_window_bound(key_times, r);
        }
    }
}
