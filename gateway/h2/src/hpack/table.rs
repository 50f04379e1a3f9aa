//! The static table (RFC 7541 Appendix A) and the decoder's dynamic table (§2.3.2, §4).
//!
//! The dynamic table keeps its entries' bytes in one byte ring (name then value, oldest entry
//! first, possibly wrapping at the end) and their positions in a deque, newest first: a lookup
//! by index is one deque access, an insertion one copy, an eviction one pop. The ring grows on
//! demand up to the table's maximum size, so an idle connection holds no table bytes.

use std::collections::VecDeque;

/// The per-entry overhead counted in an entry's size (§4.1).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The static table; index 1 is `STATIC[0]`.
pub(crate) static STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The smallest ring allocated, so that a few small entries do not regrow it each time.
const MIN_RING: usize = 256;

/// Table entries as owned (name, value) pairs, for tests.
#[cfg(test)]
pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Where a dynamic entry's bytes are in the ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// Ring offset of the name; the value follows it (both may wrap).
    start: usize,
    name_len: usize,
    value_len: usize,
}

/// An entry found by index: static bytes, or a dynamic entry's place in the ring. Only valid
/// until the table next changes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry {
    Static(&'static [u8], &'static [u8]),
    Dynamic(Slot),
}

impl Entry {
    pub(crate) fn name_len(self) -> usize {
        match self {
            Self::Static(name, _) => name.len(),
            Self::Dynamic(slot) => slot.name_len,
        }
    }

    pub(crate) fn value_len(self) -> usize {
        match self {
            Self::Static(_, value) => value.len(),
            Self::Dynamic(slot) => slot.value_len,
        }
    }
}

/// The decoder's index address space (§2.3.3): the static table, then the dynamic table.
#[derive(Debug)]
pub(crate) struct Table {
    /// Entry bytes; empty until the first insertion. Live bytes run from the oldest entry's
    /// start to `head`, wrapping; `bytes` of them.
    ring: Vec<u8>,
    /// Where the next entry's bytes go.
    head: usize,
    /// Live entries, newest first: dynamic index 62 is `slots[0]`.
    slots: VecDeque<Slot>,
    /// Sum of the live entries' names and values.
    bytes: usize,
    /// The table size of §4.1: `bytes` plus 32 per entry.
    size: usize,
    /// The current maximum size (§4.2), as last set by a size update.
    max_size: usize,
}

impl Table {
    pub(crate) fn new(max_size: usize) -> Self {
        Self { ring: Vec::new(), head: 0, slots: VecDeque::new(), bytes: 0, size: 0, max_size }
    }

    /// The entry at `index` (1-based, §2.3.3), if any.
    pub(crate) fn get(&self, index: usize) -> Option<Entry> {
        let dynamic = match index.checked_sub(1) {
            None => return None,
            Some(i) if i < STATIC.len() => return STATIC.get(i).map(|&(name, value)| Entry::Static(name, value)),
            Some(i) => i - STATIC.len(),
        };
        self.slots.get(dynamic).map(|&slot| Entry::Dynamic(slot))
    }

    /// Appends `entry`'s name to `out`.
    pub(crate) fn copy_name(&self, entry: Entry, out: &mut Vec<u8>) {
        match entry {
            Entry::Static(name, _) => out.extend_from_slice(name),
            Entry::Dynamic(slot) => copy_from_ring(&self.ring, slot.start, slot.name_len, out),
        }
    }

    /// Appends `entry`'s value to `out`.
    pub(crate) fn copy_value(&self, entry: Entry, out: &mut Vec<u8>) {
        match entry {
            Entry::Static(_, value) => out.extend_from_slice(value),
            Entry::Dynamic(slot) => {
                let start = wrap(slot.start + slot.name_len, self.ring.len());
                copy_from_ring(&self.ring, start, slot.value_len, out);
            }
        }
    }

    /// A Dynamic Table Size Update (§4.3): the new maximum applies at once, evicting as needed.
    /// The caller has checked `max_size` against the protocol's limit.
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
        if self.slots.is_empty() && self.ring.len() > max_size {
            // Hand back memory the smaller table can no longer use (e.g. a size of 0).
            self.ring = Vec::new();
        }
    }

    /// Adds an entry (§4.4): evicts the oldest entries until it fits; an entry larger than the
    /// maximum size empties the table and is not added (not an error).
    pub(crate) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let len = name.len().saturating_add(value.len());
        let size = len.saturating_add(ENTRY_OVERHEAD);
        let Some(room) = self.max_size.checked_sub(size) else {
            self.evict_to(0);
            return;
        };
        self.evict_to(room);
        // After eviction bytes + len <= max_size - 32 * entries: the ring only needs to grow
        // to hold them, never past max_size.
        if self.bytes + len > self.ring.len() {
            self.grow(self.bytes + len);
        }
        let start = self.head;
        self.write(name);
        self.write(value);
        self.slots.push_front(Slot { start, name_len: name.len(), value_len: value.len() });
        self.bytes += len;
        self.size += size;
    }

    /// Evicts the oldest entries until the size is at most `target`.
    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(old) = self.slots.pop_back() else { break };
            self.bytes -= old.name_len + old.value_len;
            self.size -= old.name_len + old.value_len + ENTRY_OVERHEAD;
        }
        if self.slots.is_empty() {
            self.head = 0;
        }
    }

    /// Reallocates the ring to hold at least `needed` bytes, laying the live entries out from
    /// offset 0, oldest first. Amortized: the capacity at least doubles, up to `max_size`.
    fn grow(&mut self, needed: usize) {
        let cap = self.ring.len().saturating_mul(2).max(MIN_RING).min(self.max_size).max(needed);
        let mut ring = Vec::with_capacity(cap);
        for slot in self.slots.iter_mut().rev() {
            let start = ring.len();
            copy_from_ring(&self.ring, slot.start, slot.name_len + slot.value_len, &mut ring);
            slot.start = start;
        }
        self.head = ring.len();
        ring.resize(cap, 0);
        self.ring = ring;
        self.head = wrap(self.head, cap);
    }

    /// Copies `bytes` into the ring at `head`, wrapping. The caller ensured the free space.
    fn write(&mut self, bytes: &[u8]) {
        let cap = self.ring.len();
        let first = cap.saturating_sub(self.head).min(bytes.len());
        let (a, b) = bytes.split_at(first);
        if let Some(dst) = self.ring.get_mut(self.head..self.head + first) {
            dst.copy_from_slice(a);
        }
        if let Some(dst) = self.ring.get_mut(..b.len()) {
            dst.copy_from_slice(b);
        }
        self.head = wrap(self.head + bytes.len(), cap);
    }

    /// The size of §4.1.
    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The dynamic entries, newest first.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Pairs {
        (0..self.slots.len())
            .filter_map(|i| self.get(STATIC.len() + 1 + i))
            .map(|entry| {
                let (mut name, mut value) = (Vec::new(), Vec::new());
                self.copy_name(entry, &mut name);
                self.copy_value(entry, &mut value);
                (name, value)
            })
            .collect()
    }
}

/// `pos` brought back into a ring of `cap` bytes (`pos < 2 * cap`, or anything when empty).
fn wrap(pos: usize, cap: usize) -> usize {
    if pos >= cap {
        pos - cap
    } else {
        pos
    }
}

/// Appends the `len` ring bytes from `start` to `out`, in two pieces when they wrap.
fn copy_from_ring(ring: &[u8], start: usize, len: usize, out: &mut Vec<u8>) {
    let first = ring.len().saturating_sub(start).min(len);
    if let Some(a) = ring.get(start..start + first) {
        out.extend_from_slice(a);
    }
    if let Some(b) = ring.get(..len - first) {
        out.extend_from_slice(b);
    }
}
