//! The header block decoder (RFC 7541 §3, §6): every malformed block is an error, never a
//! panic, and the memory a block can take is bounded by the caller's list size limit.

use std::fmt;

use super::huffman;
use super::table::{Entry, Table, ENTRY_OVERHEAD};

/// One decoded field line: byte ranges into the caller's `buf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name_start: u32,
    pub name_end: u32,
    pub value_start: u32,
    pub value_end: u32,
    /// Sent as "never indexed" (RFC 7541 §6.2.3): must stay never-indexed if forwarded.
    pub never_indexed: bool,
}

/// Why a header block was not decoded whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The decoded list (RFC 9113 §6.5.2 size: name + value + 32 per field) exceeded
    /// `max_list_size`. The block was still decoded to its end, so the dynamic table stays in
    /// sync: the caller may answer this one stream (431) and keep the connection.
    ListTooLarge,
    /// Anything malformed: a connection error COMPRESSION_ERROR for the caller. The text says
    /// what was wrong, for logs.
    Compression(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ListTooLarge => f.write_str("header list too large"),
            Self::Compression(what) => write!(f, "HPACK: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Continuation bytes allowed after an integer's prefix (§5.1): 5 carry 35 bits, enough for
/// any `u32`; anything longer is an attack or garbage.
const MAX_CONTINUATION: usize = 5;
/// Scratch capacity kept between blocks; more (left by an oversized literal) is released.
const SCRATCH_KEEP: usize = 4096;

const TRUNCATED: DecodeError = DecodeError::Compression("truncated block");

/// The decoder of one connection's request header blocks.
#[derive(Debug)]
pub struct Decoder {
    table: Table,
    /// The SETTINGS_HEADER_TABLE_SIZE we advertise: the bound on size updates.
    max_table_size: usize,
    /// Holds a field's name and value while it cannot go to the caller's `buf` (the list is
    /// already too large, or may become so), still needed to index it.
    scratch: Vec<u8>,
}

/// The three literal representations (§6.2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Literal {
    /// §6.2.1: added to the dynamic table.
    Incremental,
    /// §6.2.2.
    WithoutIndexing,
    /// §6.2.3.
    NeverIndexed,
}

impl Decoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE we advertise (4096 by default). A size
    /// update in a block above it is an error.
    pub fn new(max_table_size: usize) -> Self {
        Self { table: Table::new(max_table_size), max_table_size, scratch: Vec::new() }
    }

    /// Decodes one complete header block (HEADERS + CONTINUATION payloads already joined by the
    /// caller). Appends the decoded name and value bytes to `buf` and one `Field` per field
    /// line, in order, to `fields` (neither is cleared). Names are returned as sent (no case
    /// check: the caller validates HTTP/2 rules such as lowercase names and pseudo-header order).
    ///
    /// `buf` grows by at most `max_list_size` bytes. On `ListTooLarge` the fields that fit are
    /// left in `fields`; on `Compression` the table is out of sync and the connection must end.
    pub fn decode(
        &mut self,
        block: &[u8],
        buf: &mut Vec<u8>,
        fields: &mut Vec<Field>,
        max_list_size: usize,
    ) -> Result<(), DecodeError> {
        let mut list = List { buf, fields, size: 0, max: max_list_size, too_large: false };
        let result = self.decode_block(block, &mut list);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        result?;
        if list.too_large {
            Err(DecodeError::ListTooLarge)
        } else {
            Ok(())
        }
    }

    fn decode_block(&mut self, block: &[u8], list: &mut List<'_>) -> Result<(), DecodeError> {
        let mut input = Input { rest: block };
        // §4.2: size updates may only open a block; two at most (a minimum, then a final size).
        let mut at_start = true;
        let mut updates = 0;
        while let Some(first) = input.peek() {
            if first & 0x80 != 0 {
                // §6.1 Indexed Header Field.
                let index = input.int(7)?;
                let entry = self.entry(index)?;
                list.indexed(&self.table, entry);
                at_start = false;
            } else if first & 0x40 != 0 {
                let index = input.int(6)?;
                self.literal(index, Literal::Incremental, &mut input, list)?;
                at_start = false;
            } else if first & 0x20 != 0 {
                // §6.3 Dynamic Table Size Update.
                if !at_start {
                    return Err(DecodeError::Compression("table size update after a field"));
                }
                updates += 1;
                if updates > 2 {
                    return Err(DecodeError::Compression("more than two table size updates"));
                }
                let size = input.int(5)?;
                if size > self.max_table_size {
                    return Err(DecodeError::Compression("table size update above the limit"));
                }
                self.table.set_max_size(size);
            } else {
                let kind = if first & 0x10 != 0 { Literal::NeverIndexed } else { Literal::WithoutIndexing };
                let index = input.int(4)?;
                self.literal(index, kind, &mut input, list)?;
                at_start = false;
            }
        }
        Ok(())
    }

    /// The table entry at a field's `index`.
    fn entry(&self, index: usize) -> Result<Entry, DecodeError> {
        if index == 0 {
            return Err(DecodeError::Compression("index 0"));
        }
        self.table.get(index).ok_or(DecodeError::Compression("index beyond the table"))
    }

    /// A literal field line (§6.2) after its first integer, `name_index` (0: a literal name).
    ///
    /// The name and value are decoded straight into `buf` while the field may still fit the
    /// list; otherwise into `scratch`, from which the field is copied if it fits after all,
    /// and inserted into the table if it must be, whether it fits or not.
    fn literal(
        &mut self,
        name_index: usize,
        kind: Literal,
        input: &mut Input<'_>,
        list: &mut List<'_>,
    ) -> Result<(), DecodeError> {
        let name_entry = if name_index == 0 { None } else { Some(self.entry(name_index)?) };
        let Self { table, scratch, .. } = self;
        scratch.clear();
        let start = list.buf.len();

        let (name_len, mut in_buf) = match name_entry {
            None => {
                let name = input.string()?;
                let in_buf = list.fits(name.max_len());
                let dst = if in_buf { &mut *list.buf } else { &mut *scratch };
                let before = dst.len();
                name.decode_into(dst)?;
                (dst.len() - before, in_buf)
            }
            Some(entry) => {
                // Copied out now: inserting this field may evict the entry it names (§4.4).
                let in_buf = list.fits(entry.name_len());
                table.copy_name(entry, if in_buf { &mut *list.buf } else { &mut *scratch });
                (entry.name_len(), in_buf)
            }
        };

        let value = input.string()?;
        if in_buf && !list.fits(name_len.saturating_add(value.max_len())) {
            // The value may overflow the list: finish the field in scratch, decide on its
            // exact size.
            scratch.extend_from_slice(list.buf.get(start..).unwrap_or_default());
            list.buf.truncate(start);
            in_buf = false;
        }

        let never_indexed = kind == Literal::NeverIndexed;
        if in_buf {
            value.decode_into(list.buf)?;
            let value_len = list.buf.len() - start - name_len;
            if kind == Literal::Incremental {
                if let Some((name, value)) = list.buf.get(start..).and_then(|f| f.split_at_checked(name_len)) {
                    table.insert(name, value);
                }
            }
            list.push(start, name_len, value_len, never_indexed);
        } else {
            value.decode_into(scratch)?;
            let value_len = scratch.len() - name_len;
            if list.fits(name_len + value_len) {
                list.buf.extend_from_slice(scratch);
                list.push(start, name_len, value_len, never_indexed);
            } else {
                list.too_large = true;
            }
            // Indexed even when dropped from the list: the encoder's table has it.
            if kind == Literal::Incremental {
                if let Some((name, value)) = scratch.split_at_checked(name_len) {
                    table.insert(name, value);
                }
            }
        }
        Ok(())
    }
}

/// The decoded list of one block: the caller's buffers and the §6.5.2 size so far.
struct List<'b> {
    buf: &'b mut Vec<u8>,
    fields: &'b mut Vec<Field>,
    size: usize,
    max: usize,
    /// Sticky: once a field did not fit, nothing more is appended.
    too_large: bool,
}

impl List<'_> {
    /// Whether one more field with `len` bytes of name and value fits the list.
    fn fits(&self, len: usize) -> bool {
        !self.too_large && self.size.saturating_add(len).saturating_add(ENTRY_OVERHEAD) <= self.max
    }

    /// A §6.1 field: copied from the table if it fits.
    fn indexed(&mut self, table: &Table, entry: Entry) {
        let (name_len, value_len) = (entry.name_len(), entry.value_len());
        if self.fits(name_len + value_len) {
            let start = self.buf.len();
            table.copy_name(entry, self.buf);
            table.copy_value(entry, self.buf);
            self.push(start, name_len, value_len, false);
        } else {
            self.too_large = true;
        }
    }

    /// Records the field whose name and value were just appended to `buf` at `start`; the
    /// caller checked that it fits.
    fn push(&mut self, start: usize, name_len: usize, value_len: usize, never_indexed: bool) {
        self.size += name_len + value_len + ENTRY_OVERHEAD;
        let name_end = start + name_len;
        let value_end = name_end + value_len;
        match (u32::try_from(start), u32::try_from(name_end), u32::try_from(value_end)) {
            (Ok(name_start), Ok(name_end), Ok(value_end)) => {
                self.fields.push(Field { name_start, name_end, value_start: name_end, value_end, never_indexed })
            }
            // `buf` already held 4 GiB: not addressable by a `Field`, so too large a list.
            _ => {
                self.buf.truncate(start);
                self.too_large = true;
            }
        }
    }
}

/// The unread rest of a block.
struct Input<'a> {
    rest: &'a [u8],
}

/// A string literal's raw bytes (§5.2).
struct Str<'a> {
    raw: &'a [u8],
    huffman: bool,
}

impl<'a> Input<'a> {
    fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let (&byte, rest) = self.rest.split_first().ok_or(TRUNCATED)?;
        self.rest = rest;
        Ok(byte)
    }

    /// An integer with a `prefix_bits`-bit prefix (§5.1, 1 to 7 bits), starting at the next byte
    /// (whose higher bits the caller already read). At most `u32::MAX`.
    fn int(&mut self, prefix_bits: u32) -> Result<usize, DecodeError> {
        let max_prefix = (1u8 << prefix_bits) - 1;
        let prefix = self.byte()? & max_prefix;
        if prefix < max_prefix {
            return Ok(usize::from(prefix));
        }
        let mut value = u64::from(max_prefix);
        let mut shift = 0;
        for _ in 0..MAX_CONTINUATION {
            let byte = self.byte()?;
            value += u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return u32::try_from(value)
                    .ok()
                    .and_then(|value| usize::try_from(value).ok())
                    .ok_or(DecodeError::Compression("integer overflow"));
            }
            shift += 7;
        }
        Err(DecodeError::Compression("integer too long"))
    }

    /// A string literal (§5.2): the Huffman flag, a 7-bit-prefix length, the bytes.
    fn string(&mut self) -> Result<Str<'a>, DecodeError> {
        let huffman = self.peek().ok_or(TRUNCATED)? & 0x80 != 0;
        let len = self.int(7)?;
        let (raw, rest) = self.rest.split_at_checked(len).ok_or(TRUNCATED)?;
        self.rest = rest;
        Ok(Str { raw, huffman })
    }
}

impl Str<'_> {
    /// The most bytes this string can decode to.
    fn max_len(&self) -> usize {
        if self.huffman {
            huffman::max_decoded_len(self.raw.len())
        } else {
            self.raw.len()
        }
    }

    fn decode_into(&self, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        if self.huffman {
            huffman::decode(self.raw, out)
        } else {
            out.extend_from_slice(self.raw);
            Ok(())
        }
    }
}

#[cfg(test)]
impl Decoder {
    /// The dynamic table's entries, newest first, and its size.
    pub(super) fn dynamic_table(&self) -> (super::table::Pairs, usize) {
        (self.table.entries(), self.table.size())
    }
}
