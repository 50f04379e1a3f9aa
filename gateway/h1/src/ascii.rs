//! Comparing a field name with a known lowercase one, eight bytes at a time.
//!
//! `<[u8]>::eq_ignore_ascii_case` lowercases both sides byte by byte: about eight instructions a
//! byte, and a response head's names are compared with known ones several times on its way
//! through (hop-by-hop fields, framing, the HPACK static table). One side is always a constant
//! here, lowercase: a byte of the other side matches when it is the same byte, or differs from
//! it only in the 0x20 bit where the constant has a letter.

const LOW: u64 = 0x0101_0101_0101_0101;

/// Whether `name` equals `lower` in any ASCII case. `lower` must be lowercase ASCII (letters,
/// digits, `-` and other non-letters are compared exactly); `name` may hold any bytes.
#[inline]
pub fn eq_lower(name: &[u8], lower: &[u8]) -> bool {
    if name.len() != lower.len() {
        return false;
    }
    let n = name.len();
    if n < 8 {
        return name.iter().zip(lower).all(|(&a, &k)| a == k || (a | 0x20 == k && k.is_ascii_lowercase()));
    }
    // Whole words, then the last eight bytes (overlapping the words before when `n` is not a
    // multiple of eight).
    let mut at = 0;
    while at + 8 <= n {
        if !word_eq(name, lower, at) {
            return false;
        }
        at += 8;
    }
    at == n || word_eq(name, lower, n - 8)
}

fn word_eq(name: &[u8], lower: &[u8], at: usize) -> bool {
    let (Some(a), Some(k)) = (word(name, at), word(lower, at)) else {
        return false;
    };
    (a ^ k) & !letters(k) == 0
}

fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// 0x20 in every byte of `k` that is a lowercase letter, 0 elsewhere. `k`'s bytes must be ASCII
/// (below 0x80), so that no addition carries into the next byte.
fn letters(k: u64) -> u64 {
    // The high bit of each byte: set from `a` on, and set from `{` (one past `z`) on.
    let from_a = k.wrapping_add(LOW * (0x80 - u64::from(b'a')));
    let past_z = k.wrapping_add(LOW * (0x80 - u64::from(b'z') - 1));
    ((from_a & !past_z) & (LOW * 0x80)) >> 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_eq_ignore_ascii_case_for_every_byte_against_every_position() {
        let known: &[&[u8]] = &[
            b"te",
            b"via",
            b"content-length",
            b"transfer-encoding",
            b"x-content-type-options",
            b"strict-transport-security",
            b"access-control-allow-origin",
            b"x-0123456789-_~!#$%&'*+.^`|",
        ];
        for &k in known {
            assert!(eq_lower(k, k));
            let upper = k.to_ascii_uppercase();
            assert!(eq_lower(&upper, k), "{}", String::from_utf8_lossy(&upper));
            for i in 0..k.len() {
                for b in 0..=255u8 {
                    let mut name = k.to_vec();
                    name[i] = b;
                    assert_eq!(
                        eq_lower(&name, k),
                        name.eq_ignore_ascii_case(k),
                        "byte {b:#04x} at {i} of {}",
                        String::from_utf8_lossy(k)
                    );
                }
            }
            assert!(!eq_lower(&k[1..], k));
            let mut longer = k.to_vec();
            longer.push(b'a');
            assert!(!eq_lower(&longer, k));
        }
    }
}
