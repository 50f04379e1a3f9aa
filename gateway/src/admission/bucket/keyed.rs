//! Worker-local buckets per client key, bounded in number so that many keys cannot exhaust memory.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use super::{reset_after, Decision, Gcra, Nanos, Rate};

/// One bucket per key, at most `max_keys` of them, all with the same rate. Worker-local.
///
/// Eviction is least-recently-used with a preference for entries that lose nothing: when a new
/// key arrives and the table is full, the first of the `EVICTION_PROBE` (4) least recently used
/// entries whose bucket is full again is dropped (it would start full anyway), else the least
/// recently used one. Each operation is O(1): a `HashMap` from key to slot plus an intrusive
/// doubly linked LRU list threaded through a `Vec` of slots (no allocation once `max_keys` slots
/// exist). The map uses std's `RandomState` (SipHash with a random key): no hash flooding.
///
/// Accuracy: a key keeps its state unless `max_keys` other keys were used since its last request
/// (or it was idle until its bucket refilled). An evicted key in debt comes back with a full
/// bucket, so a client that rotates through more than `max_keys` keys gets `burst` per key per
/// rotation; [`KeyedBuckets::evictions`] counts evictions so that this can be watched.
#[derive(Debug)]
pub struct KeyedBuckets<K> {
    gcra: Gcra,
    max_keys: usize,
    index: HashMap<K, u32>,
    slots: Vec<Slot<K>>,
    /// Most recently used slot, or `NIL`.
    head: u32,
    /// Least recently used slot, or `NIL`.
    tail: u32,
    evictions: u64,
}

/// Entries examined from the LRU end when evicting, looking for one whose bucket is full again.
const EVICTION_PROBE: usize = 4;
/// The "no slot" link; `max_keys` is capped below it so that it never names a real slot.
const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Slot<K> {
    key: K,
    tat: Nanos,
    prev: u32,
    next: u32,
}

impl<K: Hash + Eq + Clone> KeyedBuckets<K> {
    /// An empty table holding at most `max_keys` buckets (at least 1, at most 2^32 − 2).
    /// Memory grows with the keys seen, up to the bound, and is not returned.
    pub fn new(rate: Rate, max_keys: usize) -> Self {
        KeyedBuckets {
            gcra: Gcra::new(rate),
            max_keys: max_keys.clamp(1, NIL as usize - 1),
            index: HashMap::new(),
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            evictions: 0,
        }
    }

    /// Takes one token from `key`'s bucket at `now`, creating a full bucket for an unknown key
    /// (evicting another if the table is full); same contract as
    /// [`super::LocalBucket::acquire`]. Marks the key most recently used.
    pub fn acquire(&mut self, key: &K, now: Nanos, max_wait: Duration) -> Decision {
        if let Some(&i) = self.index.get(key) {
            self.touch(i);
            if let Some(slot) = self.slots.get_mut(i as usize) {
                let (decision, tat) = self.gcra.decide(slot.tat, now, max_wait);
                if let Some(tat) = tat {
                    slot.tat = tat;
                }
                return decision;
            }
        }
        // An unknown key's bucket is full: `tat = now`.
        let (decision, tat) = self.gcra.decide(now, now, max_wait);
        if let Some(tat) = tat {
            self.insert(key, tat, now);
        }
        decision
    }

    /// Whole tokens in `key`'s bucket at `now`; `burst` for a key without a bucket.
    pub fn remaining(&self, key: &K, now: Nanos) -> u32 {
        self.gcra.remaining(self.tat(key).unwrap_or(now), now)
    }

    /// Time from `now` until `key`'s bucket is full again; zero for a key without a bucket.
    pub fn reset_after(&self, key: &K, now: Nanos) -> Duration {
        reset_after(self.tat(key).unwrap_or(now), now)
    }

    /// Buckets held, at most `max_keys`.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The bound on [`KeyedBuckets::len`].
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Buckets dropped to make room for a new key since creation (a worker-local counter for
    /// metrics; entries removed by `expire_idle` are not counted).
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Drops up to `limit` least recently used buckets that are full again at `now` (dropping
    /// them loses nothing), stopping at the first that is not. For a periodic worker-local
    /// sweep: it shortens the table, while the memory stays allocated for reuse.
    pub fn expire_idle(&mut self, now: Nanos, limit: usize) -> usize {
        let mut removed = 0;
        while removed < limit {
            match self.slots.get(self.tail as usize) {
                Some(slot) if slot.tat <= now => {
                    self.remove(self.tail);
                    removed += 1;
                }
                _ => break,
            }
        }
        removed
    }

    fn tat(&self, key: &K) -> Option<Nanos> {
        let &i = self.index.get(key)?;
        self.slots.get(i as usize).map(|slot| slot.tat)
    }

    fn insert(&mut self, key: &K, tat: Nanos, now: Nanos) {
        let i = if self.slots.len() < self.max_keys {
            self.slots.push(Slot { key: key.clone(), tat, prev: NIL, next: NIL });
            (self.slots.len() - 1) as u32
        } else {
            let victim = self.victim(now);
            self.unlink(victim);
            let Some(slot) = self.slots.get_mut(victim as usize) else { return };
            let old = std::mem::replace(&mut slot.key, key.clone());
            slot.tat = tat;
            self.index.remove(&old);
            self.evictions += 1;
            victim
        };
        self.push_front(i);
        self.index.insert(key.clone(), i);
    }

    /// The slot to reuse when full: the least recently used one whose bucket is full again among
    /// the last `EVICTION_PROBE`, else the least recently used.
    fn victim(&self, now: Nanos) -> u32 {
        let mut i = self.tail;
        for _ in 0..EVICTION_PROBE {
            match self.slots.get(i as usize) {
                Some(slot) if slot.tat <= now => return i,
                Some(slot) => i = slot.prev,
                None => break,
            }
        }
        self.tail
    }

    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    fn unlink(&mut self, i: u32) {
        let Some(slot) = self.slots.get(i as usize) else { return };
        let (prev, next) = (slot.prev, slot.next);
        match self.slots.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.slots.get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        let old_head = self.head;
        if let Some(slot) = self.slots.get_mut(i as usize) {
            slot.prev = NIL;
            slot.next = old_head;
        }
        match self.slots.get_mut(old_head as usize) {
            Some(h) => h.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    /// Removes slot `i`, moving the last slot into its place so that the `Vec` stays dense.
    fn remove(&mut self, i: u32) {
        let at = i as usize;
        if at >= self.slots.len() {
            return;
        }
        self.unlink(i);
        let removed = self.slots.swap_remove(at);
        self.index.remove(&removed.key);
        if let Some(moved) = self.slots.get(at) {
            let (prev, next) = (moved.prev, moved.next);
            if let Some(entry) = self.index.get_mut(&moved.key) {
                *entry = i;
            }
            match self.slots.get_mut(prev as usize) {
                Some(p) => p.next = i,
                None => self.head = i,
            }
            match self.slots.get_mut(next as usize) {
                Some(n) => n.prev = i,
                None => self.tail = i,
            }
        }
    }
}

#[cfg(test)]
#[path = "keyed_tests.rs"]
mod tests;
