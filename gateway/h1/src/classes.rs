//! Byte classes for table lookups: one bit per class, computed at compile time.

/// Byte classes: `tchar` (RFC 9110 §5.6.2) and the RFC 3986 sets of request-targets.
pub(super) const TOKEN: u8 = 1;
/// unreserved / sub-delims
pub(super) const REG_NAME: u8 = 2;
/// pchar / "/", less pct-encoded
pub(super) const PATH: u8 = 4;
/// pchar / "/" / "?", less pct-encoded
pub(super) const QUERY: u8 = 8;

static CLASSES: [u8; 256] = byte_classes();

pub(super) fn has(b: u8, class: u8) -> bool {
    CLASSES.get(usize::from(b)).is_some_and(|c| c & class != 0)
}

#[allow(clippy::indexing_slicing)] // `i < 256` on a [_; 256], evaluated at compile time
const fn byte_classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let alnum = b.is_ascii_alphanumeric();
        let mut class = 0;
        if alnum
            || matches!(b, b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_')
            || matches!(b, b'`' | b'|' | b'~')
        {
            class |= TOKEN;
        }
        let unreserved = alnum || matches!(b, b'-' | b'.' | b'_' | b'~');
        let sub_delim = matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=');
        if unreserved || sub_delim {
            class |= REG_NAME | PATH | QUERY;
        }
        if matches!(b, b':' | b'@' | b'/') {
            class |= PATH | QUERY;
        }
        if b == b'?' {
            class |= QUERY;
        }
        table[i] = class;
        i += 1;
    }
    table
}
