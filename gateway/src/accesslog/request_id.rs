//! Request ids: generated per worker without atomics, accepted from clients only when tame.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of a generated id: 32 lowercase hex digits (128 bits), the shape of a W3C trace id.
pub const REQUEST_ID_LEN: usize = 32;

/// Longest client-supplied `x-request-id` that is kept.
pub const MAX_CLIENT_REQUEST_ID: usize = 128;

/// A generated request id.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId([u8; REQUEST_ID_LEN]);

impl RequestId {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        // Only hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<[u8]> for RequestId {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// One worker's id generator.
///
/// An id is `hi || lo`: `hi` is a 64-bit permutation of (random process seed XOR worker index),
/// so workers of one process never share it; `lo` is a 64-bit keyed permutation of this
/// generator's counter under a key drawn at construction, so one generator never repeats within
/// 2^64 ids. Ids from other processes (restarts, other hosts), or from a second generator for the
/// same worker, collide only if 64 random bits do. Ids are unique, not secret: do not use them
/// as tokens.
#[derive(Debug)]
pub struct RequestIds {
    /// `hi` in hex, fixed for the generator's life (encoded once, not per id).
    hi_hex: [u8; 16],
    key: u64,
    counter: u64,
}

impl RequestIds {
    pub fn new(worker: usize) -> Self {
        let seed = *PROCESS_SEED.get_or_init(|| random_u64(0));
        Self { hi_hex: hex16(fmix64(seed ^ worker as u64)), key: random_u64(worker as u64), counter: 0 }
    }

    /// The next id.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends and borrows nothing
    pub fn next(&mut self) -> RequestId {
        self.counter = self.counter.wrapping_add(1);
        let lo = fmix64(self.counter ^ self.key);
        let mut out = [0u8; REQUEST_ID_LEN];
        let (hi, rest) = out.split_at_mut(16);
        hi.copy_from_slice(&self.hi_hex);
        rest.copy_from_slice(&hex16(lo));
        RequestId(out)
    }
}

/// `v` as 16 lowercase hex digits, most significant first.
fn hex16(v: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, slot) in out.iter_mut().enumerate() {
        let nibble = (v >> (60 - 4 * i)) & 0xf;
        *slot = b"0123456789abcdef".get(nibble as usize).copied().unwrap_or(b'0');
    }
    out
}

/// Whether a client-supplied `x-request-id` is kept (and logged and forwarded as is): 1 to
/// [`MAX_CLIENT_REQUEST_ID`] bytes of `[A-Za-z0-9._:-]`. Anything else is replaced by a
/// generated id.
pub fn valid_request_id(v: &[u8]) -> bool {
    (1..=MAX_CLIENT_REQUEST_ID).contains(&v.len())
        && v.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

static PROCESS_SEED: OnceLock<u64> = OnceLock::new();

/// 64 bits from the OS-seeded keys of std's `RandomState` (SipHash under a random 128-bit key),
/// mixed with the time and pid in case the platform ever lacks an entropy source.
fn random_u64(salt: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u32(std::process::id());
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish()
}

/// MurmurHash3's 64-bit finalizer: a bijection on `u64` with good avalanche.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn unique_across_two_workers_and_valid() {
        let mut seen = HashSet::new();
        let (mut a, mut b) = (RequestIds::new(0), RequestIds::new(1));
        for _ in 0..50_000 {
            for id in [a.next(), b.next()] {
                assert_eq!(id.as_bytes().len(), REQUEST_ID_LEN);
                assert!(id.as_bytes().iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
                assert!(valid_request_id(id.as_bytes()));
                assert!(seen.insert(id), "duplicate {id:?}");
            }
        }
        assert_eq!(seen.len(), 100_000);
    }

    #[test]
    fn a_second_generator_for_the_same_worker_does_not_repeat_the_first() {
        let (mut a, mut b) = (RequestIds::new(3), RequestIds::new(3));
        let first: HashSet<RequestId> = (0..10_000).map(|_| a.next()).collect();
        assert!((0..10_000).all(|_| !first.contains(&b.next())));
    }

    #[test]
    fn hex16_matches_the_formatter() {
        for v in [0, 1, 0xf, 0x10, 0xdead_beef, u64::MAX, 0x0123_4567_89ab_cdef, fmix64(7)] {
            assert_eq!(hex16(v).as_slice(), format!("{v:016x}").as_bytes());
        }
    }

    #[test]
    fn fmix64_is_a_bijection_on_a_sample() {
        let outs: HashSet<u64> = (0..100_000u64).map(fmix64).collect();
        assert_eq!(outs.len(), 100_000);
    }

    #[test]
    fn validity_rules() {
        for ok in [&b"a"[..], b"abc-DEF_0.9:x", &[b'z'; 128], b"4f1c2a9e8b7d6c5a3e2f1d0c9b8a7f6e"] {
            assert!(valid_request_id(ok), "{ok:?}");
        }
        for bad in [&b""[..], &[b'z'; 129], b"a b", b"a\"b", b"a\nb", b"a/b", b"a\xffb", b"a,b", b"a=b", b"\x00"] {
            assert!(!valid_request_id(bad), "{bad:?}");
        }
    }
}
