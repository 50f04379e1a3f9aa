//! The response head encoder, built for CPU per response: no Huffman coding (raw literals), a
//! static name lookup by a match on the length, and a dynamic table used only for the few
//! response fields whose values repeat on a connection (content-type, server, ...).
//!
//! The encoder models the peer decoder's dynamic table with only the entries it inserted itself,
//! at most [`MAX_ENTRIES`] of them, evicting by size exactly as the decoder does and also by
//! count. The model is therefore always the newest part of the decoder's table: an entry the
//! model holds is still in the decoder's table, at the same index (indices count from the
//! newest entry, and both sides add the same entries in the same order).

use std::collections::VecDeque;

use super::table::ENTRY_OVERHEAD;

/// The table size both sides start with (RFC 7541 §4.2, RFC 9113 §6.5.2), and the most this
/// encoder ever uses: a larger table buys nothing with [`MAX_ENTRIES`] small entries, and
/// staying at 4096 means a peer's larger setting needs no size update.
const DEFAULT_TABLE_SIZE: usize = 4096;
/// Entries the encoder keeps: bounds the linear scan per indexable field.
const MAX_ENTRIES: usize = 32;
/// Longer values are not indexed: they rarely repeat, and would crowd out the ones that do.
const MAX_INDEXED_VALUE: usize = 128;

/// The names whose values are worth indexing, by id: values that tend to repeat across the
/// responses of one connection.
const INDEXABLE: [&[u8]; 12] = [
    b"content-type",
    b"server",
    b"cache-control",
    b"vary",
    b"content-encoding",
    b"accept-ranges",
    b"access-control-allow-origin",
    b"x-content-type-options",
    b"strict-transport-security",
    b"via",
    b"x-frame-options",
    b"alt-svc",
];

/// How the encoder treats a field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// A literal without indexing.
    Plain,
    /// Indexed when its value is short: the id is the name's place in [`INDEXABLE`].
    Indexable(u8),
    /// Credentials: never inserted into the table (§7.1.3).
    Sensitive,
}

/// What the encoder knows about a regular field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NameInfo {
    /// The name's first index in the static table, 0 if it has none.
    static_index: u8,
    policy: Policy,
}

const fn plain(static_index: u8) -> NameInfo {
    NameInfo { static_index, policy: Policy::Plain }
}

const fn indexable(static_index: u8, id: u8) -> NameInfo {
    NameInfo { static_index, policy: Policy::Indexable(id) }
}

const fn sensitive(static_index: u8) -> NameInfo {
    NameInfo { static_index, policy: Policy::Sensitive }
}

/// Looks a regular field name up, in any ASCII case: a match on its length, then a compare
/// with the few known names of that length.
fn name_info(name: &[u8]) -> NameInfo {
    let candidates: &[(&[u8], NameInfo)] = match name.len() {
        3 => &[(b"age", plain(21)), (b"via", indexable(60, 9))],
        4 => &[
            (b"date", plain(33)),
            (b"etag", plain(34)),
            (b"vary", indexable(59, 3)),
            (b"link", plain(45)),
            (b"host", plain(38)),
            (b"from", plain(37)),
        ],
        5 => &[(b"allow", plain(22)), (b"range", plain(50))],
        6 => {
            &[(b"server", indexable(54, 1)), (b"cookie", sensitive(32)), (b"accept", plain(19)), (b"expect", plain(35))]
        }
        7 => {
            &[(b"expires", plain(36)), (b"alt-svc", indexable(0, 11)), (b"referer", plain(51)), (b"refresh", plain(52))]
        }
        8 => &[(b"location", plain(46)), (b"if-match", plain(39)), (b"if-range", plain(42))],
        10 => &[(b"set-cookie", sensitive(55)), (b"user-agent", plain(58))],
        11 => &[(b"retry-after", plain(53))],
        12 => &[(b"content-type", indexable(31, 0)), (b"max-forwards", plain(47))],
        13 => &[
            (b"cache-control", indexable(24, 2)),
            (b"last-modified", plain(44)),
            (b"accept-ranges", indexable(18, 5)),
            (b"content-range", plain(30)),
            (b"authorization", sensitive(23)),
            (b"if-none-match", plain(41)),
        ],
        14 => &[(b"content-length", plain(28)), (b"accept-charset", plain(15))],
        15 => {
            &[(b"x-frame-options", indexable(0, 10)), (b"accept-encoding", plain(16)), (b"accept-language", plain(17))]
        }
        16 => &[
            (b"content-encoding", indexable(26, 4)),
            (b"content-language", plain(27)),
            (b"content-location", plain(29)),
            (b"www-authenticate", plain(61)),
        ],
        17 => &[(b"transfer-encoding", plain(57)), (b"if-modified-since", plain(40))],
        18 => &[(b"proxy-authenticate", plain(48))],
        19 => &[
            (b"content-disposition", plain(25)),
            (b"if-unmodified-since", plain(43)),
            (b"proxy-authorization", sensitive(49)),
        ],
        22 => &[(b"x-content-type-options", indexable(0, 7))],
        25 => &[(b"strict-transport-security", indexable(56, 8))],
        27 => &[(b"access-control-allow-origin", indexable(20, 6))],
        _ => &[],
    };
    candidates.iter().find(|(known, _)| gateway_h1::eq_lower(name, known)).map_or(plain(0), |&(_, info)| info)
}

/// An entry the encoder inserted into the peer's table.
#[derive(Debug)]
struct Inserted {
    /// Index into [`INDEXABLE`].
    id: u8,
    value: Vec<u8>,
}

impl Inserted {
    /// The entry's size as the decoder counts it (§4.1).
    fn size(&self) -> usize {
        INDEXABLE.get(usize::from(self.id)).map_or(0, |name| name.len()) + self.value.len() + ENTRY_OVERHEAD
    }
}

/// The encoder of one connection's response heads.
#[derive(Debug)]
pub struct Encoder {
    /// The peer decoder's current maximum table size: the last one signaled, or the initial 4096.
    table_max: usize,
    /// Size updates owed at the start of the next block: the smallest size and the final one
    /// since the last block (§4.2).
    pending: Option<(usize, usize)>,
    /// The modeled part of the peer's table, newest first: `entries[i]` is index 62 + i.
    entries: VecDeque<Inserted>,
    /// Sum of the modeled entries' sizes.
    size: usize,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// The peer's table size starts at 4096 (RFC 7541 default).
    pub fn new() -> Self {
        Self { table_max: DEFAULT_TABLE_SIZE, pending: None, entries: VecDeque::new(), size: 0 }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed: the encoder uses at most `n` bytes of
    /// dynamic table from the next block on, and emits the needed Dynamic Table Size Update(s)
    /// at the start of that block (RFC 7541 §4.2; if the size went down and then up between
    /// blocks, the minimum first, then the final size).
    ///
    /// Sizes above 4096 are used as 4096, so a larger setting alone signals nothing.
    pub fn set_max_table_size(&mut self, n: usize) {
        let n = n.min(DEFAULT_TABLE_SIZE);
        self.pending = Some(match self.pending {
            Some((min, _)) => (min.min(n), n),
            None => (n, n),
        });
    }

    /// Starts a header block in `out` (emits a pending size update, if any). Call once per
    /// block, before `status`/`field`.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        let Some((min, last)) = self.pending.take() else { return };
        if min < self.table_max {
            // The table shrank at some point: the decoder must see that minimum (and evict to
            // it) before any larger final size.
            self.resize(min, out);
        }
        if last != self.table_max {
            self.resize(last, out);
        }
    }

    /// `:status`. Uses the static table's indexed entries for 200 204 206 304 400 404 500, else
    /// a literal with the static name index 8 and the 3-digit value.
    pub fn status(&mut self, code: u16, out: &mut Vec<u8>) {
        let index = match code {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => 0,
        };
        if index != 0 {
            out.push(0x80 | index);
            return;
        }
        // Literal without indexing (§6.2.2), name index 8, then the decimal digits (3 for any
        // valid status; a code the caller failed to validate is still written as it is).
        let mut digits = [0u8; 5];
        let mut len = 0;
        let mut rest = code;
        for digit in digits.iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
            len += 1;
            if rest == 0 {
                break;
            }
        }
        out.push(0x08);
        out.push(len);
        out.extend_from_slice(digits.get(digits.len() - usize::from(len)..).unwrap_or_default());
    }

    /// One regular field. `name` may arrive in any ASCII case (it comes from an HTTP/1.1
    /// upstream): it is emitted lowercased. The caller has already dropped connection-specific
    /// fields and validated bytes.
    pub fn field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let info = name_info(name);
        if let Policy::Indexable(id) = info.policy {
            if value.len() <= MAX_INDEXED_VALUE && self.indexed(id, info.static_index, name, value, out) {
                return;
            }
        }
        // Literal without indexing (§6.2.2).
        literal(out, 0x00, 4, usize::from(info.static_index), name, value);
    }

    /// A field that must never be indexed (RFC 7541 §7.1.3), e.g. one received never-indexed.
    pub fn field_never_indexed(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        // Literal never indexed (§6.2.3), with the static name when there is one.
        literal(out, 0x10, 4, usize::from(name_info(name).static_index), name, value);
    }

    /// Encodes an indexable field from the table, or as a literal that adds it to the table;
    /// false (nothing written) when the entry cannot fit the table.
    fn indexed(&mut self, id: u8, static_index: u8, name: &[u8], value: &[u8], out: &mut Vec<u8>) -> bool {
        let mut name_index = usize::from(static_index);
        for (i, entry) in self.entries.iter().enumerate() {
            if entry.id == id {
                if entry.value == value {
                    // §6.1 Indexed Header Field.
                    int(out, 0x80, 7, 62 + i);
                    return true;
                }
                if name_index == 0 {
                    name_index = 62 + i;
                }
            }
        }
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.table_max {
            // It would only empty the table (§4.4).
            return false;
        }
        // Literal with incremental indexing (§6.2.1); its name index counts the table as it is
        // before the insertion.
        literal(out, 0x40, 6, name_index, name, value);
        while self.size + size > self.table_max || self.entries.len() >= MAX_ENTRIES {
            self.evict_oldest();
        }
        self.size += size;
        self.entries.push_front(Inserted { id, value: value.to_vec() });
        true
    }

    /// Emits a size update to `size` and applies it to the model.
    fn resize(&mut self, size: usize, out: &mut Vec<u8>) {
        int(out, 0x20, 5, size);
        self.table_max = size;
        while self.size > size {
            self.evict_oldest();
        }
    }

    fn evict_oldest(&mut self) {
        match self.entries.pop_back() {
            Some(old) => self.size -= old.size(),
            None => self.size = 0,
        }
    }

    /// The modeled entries, newest first, as (name, value).
    #[cfg(test)]
    pub(super) fn modeled_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.entries
            .iter()
            .map(|e| (INDEXABLE.get(usize::from(e.id)).map_or(Vec::new(), |n| n.to_vec()), e.value.clone()))
            .collect()
    }
}

/// A literal field line (§6.2): `first` holds the representation's pattern bits above a
/// `prefix_bits`-bit name index; index 0 means a literal name follows, lowercased. No Huffman.
fn literal(out: &mut Vec<u8>, first: u8, prefix_bits: u32, name_index: usize, name: &[u8], value: &[u8]) {
    // One reallocation at most for the whole line: name, value and room for its integers.
    out.reserve(name.len() + value.len() + 15);
    int(out, first, prefix_bits, name_index);
    if name_index == 0 {
        int(out, 0x00, 7, name.len());
        let at = out.len();
        out.extend_from_slice(name);
        if let Some(written) = out.get_mut(at..) {
            written.make_ascii_lowercase();
        }
    }
    int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// An integer (§5.1) with a `prefix_bits`-bit prefix, `first` holding the bits above it.
fn int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, value: usize) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

#[cfg(test)]
pub(super) fn static_name_index(name: &[u8]) -> u8 {
    name_info(name).static_index
}
