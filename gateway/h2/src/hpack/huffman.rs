//! Huffman decoding of string literals (RFC 7541 §5.2, Appendix B).
//!
//! The decoder walks the code tree four bits at a time through a state table built at compile
//! time from [`CODES`]: a state is an internal node of the tree (the bits read since the last
//! symbol), and each of its 16 nibbles leads to the next state, emitting at most one symbol (no
//! code is shorter than 5 bits). Each step also says whether the string may end there: only at
//! the root or after at most 7 one bits (a prefix of EOS), which is exactly §5.2's padding rule.

use super::DecodeError;

/// Each symbol's code (RFC 7541 Appendix B): the code aligned to the least significant bit and
/// its length in bits. Index 256 is EOS. The code is canonical and complete (Kraft sum 1), which
/// the tests check.
pub(crate) const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28), // 0..=5
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28), // 6..=11
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28), // 12..=17
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28), // 18..=23
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28), // 24..=29
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12), // 30..=35
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10), // 36..=41
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6), // 42..=47
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6), // 48..=53
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8), // 54..=59
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6), // 60..=65
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7), // 66..=71
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7), // 72..=77
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7), // 78..=83
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7), // 84..=89
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6), // 90..=95
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5), // 96..=101
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7), // 102..=107
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7), // 108..=113
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7), // 114..=119
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14), // 120..=125
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20), // 126..=131
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23), // 132..=137
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23), // 138..=143
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23), // 144..=149
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23), // 150..=155
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21), // 156..=161
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21), // 162..=167
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22), // 168..=173
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21), // 174..=179
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22), // 180..=185
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23), // 186..=191
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23), // 192..=197
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27), // 198..=203
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21), // 204..=209
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24), // 210..=215
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27), // 216..=221
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21), // 222..=227
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22), // 228..=233
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23), // 234..=239
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27), // 240..=245
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27), // 246..=251
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30), // 252..=256
];

/// The EOS symbol: decoding it inside a string is an error (§5.2).
const EOS: u16 = 256;
/// Marks a tree child as a symbol (leaf) rather than another node.
const LEAF: u16 = 0x8000;
/// A complete code with 257 leaves has exactly 256 internal nodes, so a state fits in a `u8`.
const NODES: usize = 256;

/// The code tree: `TREE[node][bit]` is the child for that bit, a node number or `LEAF | symbol`.
/// Node 0 is the root; 0 never appears as a child, so it marks "not yet built" while building.
const TREE: [[u16; 2]; NODES] = build_tree();

// Const evaluation only: an out-of-bounds index or a failed assert stops the build, never a run.
#[allow(clippy::indexing_slicing)]
const fn build_tree() -> [[u16; 2]; NODES] {
    let mut tree = [[0u16; 2]; NODES];
    let mut nodes = 1;
    let mut sym = 0;
    while sym < CODES.len() {
        let (code, len) = CODES[sym];
        let mut node = 0;
        let mut bit = len as u32;
        // Walk (or build) the internal nodes for all bits but the last one.
        while bit > 1 {
            bit -= 1;
            let b = ((code >> bit) & 1) as usize;
            let child = tree[node][b];
            if child == 0 {
                tree[node][b] = nodes as u16;
                node = nodes;
                nodes += 1;
            } else {
                assert!(child & LEAF == 0, "a code is a prefix of another");
                node = child as usize;
            }
        }
        let last = (code & 1) as usize;
        assert!(tree[node][last] == 0, "two symbols share a code");
        tree[node][last] = LEAF | sym as u16;
        sym += 1;
    }
    assert!(nodes == NODES, "the code is not complete");
    tree
}

/// One transition of the nibble state machine.
#[derive(Clone, Copy)]
struct Step {
    /// The state (tree node) after the nibble.
    next: u8,
    /// The symbol completed during the nibble, if `flags & EMIT`.
    sym: u8,
    flags: u8,
}

/// The nibble completed a symbol: `sym`.
const EMIT: u8 = 1;
/// The string may end after this nibble: `next` is the root, or the bits since the last symbol
/// are 1 to 7 ones (valid padding).
const ACCEPT: u8 = 2;
/// The nibble completed EOS: the string is invalid.
const FAIL: u8 = 4;

/// `STEPS[state][nibble]`, most significant nibble of each byte first.
static STEPS: [[Step; 16]; NODES] = build_steps();

// Const evaluation only, as above.
#[allow(clippy::indexing_slicing)]
const fn build_steps() -> [[Step; 16]; NODES] {
    // The nodes reached from the root by 1 to 7 one bits, and the root itself: the only places
    // where a string may stop (no code is made of 7 or fewer ones, so these are all nodes).
    let mut accepting = [false; NODES];
    accepting[0] = true;
    let mut node = 0;
    let mut ones = 0;
    while ones < 7 {
        let child = TREE[node][1];
        assert!(child & LEAF == 0, "a code of at most 7 ones");
        node = child as usize;
        accepting[node] = true;
        ones += 1;
    }

    let mut steps = [[Step { next: 0, sym: 0, flags: 0 }; 16]; NODES];
    let mut state = 0;
    while state < NODES {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut sym = 0;
            let mut flags = 0;
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = TREE[node][(nibble >> bit) & 1];
                if child & LEAF == 0 {
                    node = child as usize;
                } else if child & !LEAF == EOS {
                    flags = FAIL;
                    node = 0;
                    break;
                } else {
                    assert!(flags & EMIT == 0, "two symbols in one nibble");
                    flags |= EMIT;
                    sym = (child & 0xff) as u8;
                    node = 0;
                }
            }
            if flags & FAIL == 0 && accepting[node] {
                flags |= ACCEPT;
            }
            steps[state][nibble] = Step { next: node as u8, sym, flags };
            nibble += 1;
        }
        state += 1;
    }
    steps
}

/// Decodes the Huffman-coded string `src`, appending its bytes to `out`.
///
/// Errors on EOS inside the string, on padding longer than 7 bits and on padding that is not
/// all ones (§5.2). An empty `src` is the empty string.
pub(crate) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    // Every code is at least 5 bits long: at most 8/5 of a byte per input byte.
    out.reserve(max_decoded_len(src.len()));
    let mut state = 0u8;
    let mut accept = true;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            // Both lookups are in bounds by type (u8 state, 4-bit nibble); the fallback is EOS.
            let step = STEPS.get(usize::from(state)).and_then(|row| row.get(usize::from(nibble)));
            let Some(&Step { next, sym, flags }) = step else {
                return Err(DecodeError::Compression("Huffman: EOS in string"));
            };
            if flags & FAIL != 0 {
                return Err(DecodeError::Compression("Huffman: EOS in string"));
            }
            if flags & EMIT != 0 {
                out.push(sym);
            }
            state = next;
            accept = flags & ACCEPT != 0;
        }
    }
    if accept {
        Ok(())
    } else {
        Err(DecodeError::Compression("Huffman: invalid padding"))
    }
}

/// The most bytes `len` bytes of Huffman code can decode to (5-bit shortest code).
pub(crate) const fn max_decoded_len(len: usize) -> usize {
    len.saturating_mul(8) / 5
}
