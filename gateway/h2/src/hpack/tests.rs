//! HPACK tests: RFC 7541 Appendix C, Huffman coding, every malformed-input path, fuzzing of the
//! decoder, and encoder → decoder round trips on one connection's sequence of blocks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use proptest::collection::vec;
use proptest::prelude::*;

use super::encoder::static_name_index;
use super::huffman::{self, CODES};
use super::table::{Table, STATIC};
use super::*;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Bytes from a hex dump (whitespace ignored).
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap()).collect()
}

/// A decoded field as (name, value, never_indexed).
type Line = (Vec<u8>, Vec<u8>, bool);

fn lines(buf: &[u8], fields: &[Field]) -> Vec<Line> {
    fields
        .iter()
        .map(|f| {
            assert_eq!(f.name_end, f.value_start, "value follows name");
            (
                buf[f.name_start as usize..f.name_end as usize].to_vec(),
                buf[f.value_start as usize..f.value_end as usize].to_vec(),
                f.never_indexed,
            )
        })
        .collect()
}

fn decode(dec: &mut Decoder, block: &[u8]) -> Result<Vec<Line>, DecodeError> {
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    dec.decode(block, &mut buf, &mut fields, usize::MAX)?;
    Ok(lines(&buf, &fields))
}

fn err(dec: &mut Decoder, block: &[u8]) -> DecodeError {
    decode(dec, block).expect_err("block must be rejected")
}

fn compression(block: &[u8]) -> DecodeError {
    let e = err(&mut Decoder::new(4096), block);
    assert!(matches!(e, DecodeError::Compression(_)), "{e:?}");
    e
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

/// Decodes `block` and checks the fields, then the dynamic table (newest first) and its size.
fn check(dec: &mut Decoder, block: &str, fields: &[(&str, &str)], table: &[(&str, &str)], size: usize) {
    let got = decode(dec, &hex(block)).unwrap();
    let got: Vec<_> = got.into_iter().map(|(n, v, _)| (n, v)).collect();
    assert_eq!(got, owned(fields));
    assert_eq!(dec.dynamic_table(), (owned(table), size));
}

/// Test-only Huffman encoder (the real encoder sends raw literals).
fn huffman_encode(s: &[u8]) -> Vec<u8> {
    let mut bits = BitWriter::default();
    for &b in s {
        let (code, len) = CODES[usize::from(b)];
        bits.put(code, len);
    }
    bits.finish()
}

/// Writes codes MSB first, pads the last byte with ones.
#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    bits: u8,
}

impl BitWriter {
    fn put(&mut self, code: u32, len: u8) {
        self.acc = (self.acc << len) | u64::from(code);
        self.bits += len;
        while self.bits >= 8 {
            self.bits -= 8;
            self.out.push((self.acc >> self.bits) as u8);
        }
        self.acc &= (1 << self.bits) - 1;
    }

    fn finish(mut self) -> Vec<u8> {
        if self.bits > 0 {
            self.out.push(((self.acc << (8 - self.bits)) as u8) | (0xff >> self.bits));
        }
        self.out
    }
}

fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    huffman::decode(src, &mut out)?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// RFC 7541 Appendix C

#[test]
fn c2_1_literal_with_indexing() {
    let mut dec = Decoder::new(4096);
    check(
        &mut dec,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        &[("custom-key", "custom-header")],
        &[("custom-key", "custom-header")],
        55,
    );
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut dec = Decoder::new(4096);
    check(&mut dec, "040c 2f73 616d 706c 652f 7061 7468", &[(":path", "/sample/path")], &[], 0);
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut dec = Decoder::new(4096);
    let got = decode(&mut dec, &hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
    assert_eq!(got, vec![(b"password".to_vec(), b"secret".to_vec(), true)]);
    assert_eq!(dec.dynamic_table(), (vec![], 0));
}

#[test]
fn c2_4_indexed() {
    let mut dec = Decoder::new(4096);
    check(&mut dec, "82", &[(":method", "GET")], &[], 0);
}

const C3_FIELDS_1: &[(&str, &str)] =
    &[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")];
const C3_FIELDS_2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const C3_FIELDS_3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const C3_TABLE_1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const C3_TABLE_2: &[(&str, &str)] = &[("cache-control", "no-cache"), (":authority", "www.example.com")];
const C3_TABLE_3: &[(&str, &str)] =
    &[("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")];

#[test]
fn c3_requests_without_huffman() {
    let mut dec = Decoder::new(4096);
    check(&mut dec, "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", C3_FIELDS_1, C3_TABLE_1, 57);
    check(&mut dec, "8286 84be 5808 6e6f 2d63 6163 6865", C3_FIELDS_2, C3_TABLE_2, 110);
    check(
        &mut dec,
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        C3_FIELDS_3,
        C3_TABLE_3,
        164,
    );
}

#[test]
fn c4_requests_with_huffman() {
    let mut dec = Decoder::new(4096);
    check(&mut dec, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", C3_FIELDS_1, C3_TABLE_1, 57);
    check(&mut dec, "8286 84be 5886 a8eb 1064 9cbf", C3_FIELDS_2, C3_TABLE_2, 110);
    check(&mut dec, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", C3_FIELDS_3, C3_TABLE_3, 164);
}

const DATE_21: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_22: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

type StrPairs = Vec<(&'static str, &'static str)>;

/// The three responses of C.5 and C.6: their fields, the tables after them and their sizes.
fn c5_expected() -> [(StrPairs, StrPairs, usize); 3] {
    [
        (
            vec![(":status", "302"), ("cache-control", "private"), ("date", DATE_21), ("location", LOCATION)],
            vec![("location", LOCATION), ("date", DATE_21), ("cache-control", "private"), (":status", "302")],
            222,
        ),
        (
            vec![(":status", "307"), ("cache-control", "private"), ("date", DATE_21), ("location", LOCATION)],
            vec![(":status", "307"), ("location", LOCATION), ("date", DATE_21), ("cache-control", "private")],
            222,
        ),
        (
            vec![
                (":status", "200"),
                ("cache-control", "private"),
                ("date", DATE_22),
                ("location", LOCATION),
                ("content-encoding", "gzip"),
                ("set-cookie", COOKIE),
            ],
            vec![("set-cookie", COOKIE), ("content-encoding", "gzip"), ("date", DATE_22)],
            215,
        ),
    ]
}

#[test]
fn c5_responses_without_huffman() {
    let blocks = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ];
    let mut dec = Decoder::new(256);
    for (block, (fields, table, size)) in blocks.iter().zip(c5_expected()) {
        check(&mut dec, block, &fields, &table, size);
    }
}

#[test]
fn c6_responses_with_huffman() {
    let blocks = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ];
    let mut dec = Decoder::new(256);
    for (block, (fields, table, size)) in blocks.iter().zip(c5_expected()) {
        check(&mut dec, block, &fields, &table, size);
    }
}

// ---------------------------------------------------------------------------------------------
// Huffman

#[test]
fn huffman_code_is_canonical_and_complete() {
    // Kraft sum exactly 1: no code is missing or doubled.
    let kraft: u64 = CODES.iter().map(|&(_, len)| 1u64 << (30 - len)).sum();
    assert_eq!(kraft, 1 << 30);
    // Canonical: sorted by (length, symbol), each code is the previous one plus 1, shifted.
    let mut order: Vec<usize> = (0..CODES.len()).collect();
    order.sort_by_key(|&s| (CODES[s].1, s));
    let mut code = 0u32;
    let mut prev_len = CODES[order[0]].1;
    for (i, &s) in order.iter().enumerate() {
        let len = CODES[s].1;
        if i > 0 {
            code = (code + 1) << (len - prev_len);
        }
        prev_len = len;
        assert_eq!(CODES[s].0, code, "symbol {s}");
    }
    // Spot checks against Appendix B.
    assert_eq!(CODES[usize::from(b'0')], (0x0, 5));
    assert_eq!(CODES[usize::from(b'/')], (0x18, 6));
    assert_eq!(CODES[usize::from(b' ')], (0x14, 6));
    assert_eq!(CODES[256], (0x3fff_ffff, 30));
}

#[test]
fn huffman_test_encoder_matches_appendix_c() {
    assert_eq!(huffman_encode(b"www.example.com"), hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"));
    assert_eq!(huffman_encode(b"no-cache"), hex("a8eb 1064 9cbf"));
    assert_eq!(huffman_encode(b"custom-key"), hex("25a8 49e9 5ba9 7d7f"));
    assert_eq!(huffman_encode(b"302"), hex("6402"));
}

#[test]
fn huffman_round_trips_every_byte() {
    for b in 0..=255u8 {
        for n in [1, 2, 3, 7] {
            let s = vec![b; n];
            assert_eq!(huffman_decode(&huffman_encode(&s)).unwrap(), s, "byte {b} x{n}");
        }
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(huffman_decode(&huffman_encode(&all)).unwrap(), all);
    let all_rev: Vec<u8> = (0..=255).rev().collect();
    assert_eq!(huffman_decode(&huffman_encode(&all_rev)).unwrap(), all_rev);
    assert_eq!(huffman_decode(b"").unwrap(), b"");
}

#[test]
fn huffman_rejects_long_padding() {
    // 'a' is 00011: 0x1f pads it with 3 ones (valid), a further 0xff makes 11 bits of padding.
    assert_eq!(huffman_decode(&[0x1f]).unwrap(), b"a");
    assert_eq!(huffman_decode(&[0x1f, 0xff]), Err(DecodeError::Compression("Huffman: invalid padding")));
    // A byte of ones alone: 8 bits of padding.
    assert_eq!(huffman_decode(&[0xff]), Err(DecodeError::Compression("Huffman: invalid padding")));
    // 7 ones after a whole symbol is the longest valid padding: '0' '0' '0' is 15 bits + 1.
    assert_eq!(huffman_decode(&huffman_encode(b"000")).unwrap(), b"000");
    assert_eq!(huffman_decode(&[0x00, 0x01]).unwrap(), b"000");
    // '0' ' ' ' ' is 17 bits: 7 bits of padding.
    assert_eq!(huffman_encode(b"0  "), [0x02, 0x8a, 0x7f]);
    assert_eq!(huffman_decode(&[0x02, 0x8a, 0x7f]).unwrap(), b"0  ");
    assert_eq!(huffman_decode(&[0x02, 0x8a, 0x7f, 0xff]), Err(DecodeError::Compression("Huffman: invalid padding")));
}

#[test]
fn huffman_rejects_padding_not_ones() {
    // 'a' then 000, or then 110: not a prefix of EOS.
    assert_eq!(huffman_decode(&[0x18]), Err(DecodeError::Compression("Huffman: invalid padding")));
    assert_eq!(huffman_decode(&[0x1e]), Err(DecodeError::Compression("Huffman: invalid padding")));
    // A string cut inside a long code: "\0" is 13 bits, its first byte alone is not padding.
    let nul = huffman_encode(&[0]);
    assert_eq!(huffman_decode(&nul[..1]), Err(DecodeError::Compression("Huffman: invalid padding")));
}

#[test]
fn huffman_rejects_eos() {
    let eos = Err(DecodeError::Compression("Huffman: EOS in string"));
    assert_eq!(huffman_decode(&[0xff, 0xff, 0xff, 0xfc]), eos);
    assert_eq!(huffman_decode(&[0xff, 0xff, 0xff, 0xff]), eos);
    // EOS after a symbol, then padding.
    let mut bits = BitWriter::default();
    bits.put(CODES[usize::from(b'a')].0, CODES[usize::from(b'a')].1);
    bits.put(CODES[256].0, CODES[256].1);
    assert_eq!(huffman_decode(&bits.finish()), eos);
    // EOS between symbols.
    let mut bits = BitWriter::default();
    bits.put(CODES[256].0, CODES[256].1);
    bits.put(CODES[usize::from(b'a')].0, CODES[usize::from(b'a')].1);
    assert_eq!(huffman_decode(&bits.finish()), eos);
}

proptest! {
    #[test]
    fn huffman_round_trips_random_strings(s in vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(huffman_decode(&huffman_encode(&s)).unwrap(), s);
    }

    #[test]
    fn huffman_never_panics(s in vec(any::<u8>(), 0..64)) {
        let mut out = Vec::new();
        let _ = huffman::decode(&s, &mut out);
        prop_assert!(out.len() <= huffman::max_decoded_len(s.len()));
    }
}

// ---------------------------------------------------------------------------------------------
// Decoder: malformed input, limits, table rules

#[test]
fn rejects_index_zero() {
    assert_eq!(compression(&[0x80]), DecodeError::Compression("index 0"));
}

#[test]
fn rejects_index_beyond_table() {
    let beyond = DecodeError::Compression("index beyond the table");
    // 61 is the last static entry; 62 needs a dynamic entry.
    assert_eq!(decode(&mut Decoder::new(4096), &[0xbd]).unwrap()[0].0, b"www-authenticate");
    assert_eq!(compression(&[0xbe]), beyond);
    // Literal name indices: with indexing (6-bit prefix), without (4-bit), never indexed.
    assert_eq!(compression(&[0x7e, 0x00]), beyond);
    assert_eq!(compression(&[0x0f, 0x2f, 0x00]), beyond);
    assert_eq!(compression(&[0x1f, 0x2f, 0x00]), beyond);
    // After one insertion 62 exists, 63 does not.
    let mut dec = Decoder::new(4096);
    decode(&mut dec, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    assert_eq!(decode(&mut dec, &[0xbe]).unwrap(), vec![(b"a".to_vec(), b"b".to_vec(), false)]);
    assert_eq!(err(&mut dec, &[0xbf]), beyond);
    // A huge index.
    assert_eq!(compression(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x0e]), beyond);
}

#[test]
fn rejects_integer_overflow_and_overlong() {
    // 127 + (2^28 - 1) + 15 * 2^28 > u32::MAX.
    assert_eq!(compression(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]), DecodeError::Compression("integer overflow"));
    // Six continuation bytes, even if their value is small.
    assert_eq!(compression(&[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), DecodeError::Compression("integer too long"));
    // Five are fine (redundant zero groups are legal).
    assert_eq!(
        decode(&mut Decoder::new(4096), &[0xff, 0x80, 0x80, 0x80, 0x80, 0x00]).err(),
        Some(compression(&[0xbe]))
    );
    assert!(decode(&mut Decoder::new(4096), &[0x8f, 0x80]).is_err()); // trailing garbage: truncated
}

#[test]
fn rejects_truncated_input() {
    let truncated = DecodeError::Compression("truncated block");
    for block in [
        &[0xff][..],                           // integer cut after its prefix
        &[0xff, 0x80],                         // integer cut in its continuation
        &[0x40],                               // literal without its name
        &[0x40, 0x05, b'a'],                   // name shorter than its length
        &[0x40, 0x01, b'a'],                   // no value
        &[0x40, 0x01, b'a', 0x02, b'b'],       // value shorter than its length
        &[0x04],                               // indexed name, no value
        &[0x3f],                               // size update cut
        &[0x00, 0x7f, 0xff, 0xff, 0xff, 0x0f], // a 2^28-byte name in a 6-byte block
    ] {
        assert_eq!(compression(block), truncated, "{block:02x?}");
    }
    // The empty block is a valid, empty list.
    assert_eq!(decode(&mut Decoder::new(4096), &[]).unwrap(), vec![]);
}

#[test]
fn rejects_bad_huffman_in_a_block() {
    // Literal name 'a' Huffman-coded with zero padding; then the same in the value.
    assert_eq!(compression(&[0x00, 0x81, 0x18, 0x00]), DecodeError::Compression("Huffman: invalid padding"));
    assert_eq!(compression(&[0x00, 0x81, 0x1f, 0x81, 0xff]), DecodeError::Compression("Huffman: invalid padding"));
    assert_eq!(compression(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]), DecodeError::Compression("Huffman: EOS in string"));
    // And the valid 'a' / 'a'.
    assert_eq!(
        decode(&mut Decoder::new(4096), &[0x00, 0x81, 0x1f, 0x81, 0x1f]).unwrap(),
        vec![(b"a".to_vec(), b"a".to_vec(), false)]
    );
}

#[test]
fn size_update_rules() {
    // Two at the start are fine (minimum then final), then fields.
    let mut dec = Decoder::new(4096);
    assert_eq!(decode(&mut dec, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]).unwrap().len(), 1);
    // A block of only size updates is fine.
    assert_eq!(decode(&mut dec, &[0x3f, 0xe1, 0x1f]).unwrap(), vec![]);
    // Three in a row.
    assert_eq!(compression(&[0x20, 0x20, 0x20]), DecodeError::Compression("more than two table size updates"));
    // After a field.
    assert_eq!(compression(&[0x82, 0x20]), DecodeError::Compression("table size update after a field"));
    assert_eq!(compression(&[0x20, 0x82, 0x20]), DecodeError::Compression("table size update after a field"));
    // Above the advertised size: 4096 is fine, 4097 is not; with a 0 limit, only 0.
    assert!(decode(&mut Decoder::new(4096), &[0x3f, 0xe1, 0x1f]).is_ok());
    assert_eq!(compression(&[0x3f, 0xe2, 0x1f]), DecodeError::Compression("table size update above the limit"));
    assert!(decode(&mut Decoder::new(0), &[0x20]).is_ok());
    assert_eq!(err(&mut Decoder::new(0), &[0x21]), DecodeError::Compression("table size update above the limit"));
}

#[test]
fn size_update_evicts() {
    let mut dec = Decoder::new(4096);
    // Three entries of size 34 each ("a"/"b", "c"/"d", "e"/"f").
    decode(&mut dec, &[0x40, 0x01, b'a', 0x01, b'b', 0x40, 0x01, b'c', 0x01, b'd', 0x40, 0x01, b'e', 0x01, b'f'])
        .unwrap();
    assert_eq!(dec.dynamic_table().1, 102);
    // Down to 70: the oldest goes.
    decode(&mut dec, &[0x3f, 0x27]).unwrap();
    assert_eq!(dec.dynamic_table(), (owned(&[("e", "f"), ("c", "d")]), 68));
    // Down to 0 then back up: empty.
    decode(&mut dec, &[0x20, 0x3f, 0xe1, 0x1f]).unwrap();
    assert_eq!(dec.dynamic_table(), (vec![], 0));
    assert_eq!(err(&mut dec, &[0xbe]), DecodeError::Compression("index beyond the table"));
    // The table works again after the update.
    decode(&mut dec, &[0x40, 0x01, b'x', 0x01, b'y']).unwrap();
    assert_eq!(decode(&mut dec, &[0xbe]).unwrap(), vec![(b"x".to_vec(), b"y".to_vec(), false)]);
}

#[test]
fn entry_larger_than_table_empties_it() {
    let mut dec = Decoder::new(4096);
    // Size 40, one entry of 34, then an entry of 52: table emptied, field still decoded.
    decode(&mut dec, &[0x3f, 0x09, 0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    assert_eq!(dec.dynamic_table().1, 34);
    let mut block = vec![0x40, 10];
    block.extend_from_slice(b"aaaaaaaaaa");
    block.push(10);
    block.extend_from_slice(b"bbbbbbbbbb");
    let got = decode(&mut dec, &block).unwrap();
    assert_eq!(got, vec![(b"aaaaaaaaaa".to_vec(), b"bbbbbbbbbb".to_vec(), false)]);
    assert_eq!(dec.dynamic_table(), (vec![], 0));
    // Exactly the table size fits.
    decode(&mut dec, &[0x40, 0x03, b'a', b'b', b'c', 0x05, b'1', b'2', b'3', b'4', b'5']).unwrap();
    assert_eq!(dec.dynamic_table(), (owned(&[("abc", "12345")]), 40));
}

#[test]
fn literal_naming_an_entry_it_evicts() {
    // Table of 40 holding "a"/"b" (34): a literal with indexing named by index 62 evicts it.
    let mut dec = Decoder::new(40);
    decode(&mut dec, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
    let got = decode(&mut dec, &[0x7e, 0x02, b'c', b'd']).unwrap();
    assert_eq!(got, vec![(b"a".to_vec(), b"cd".to_vec(), false)]);
    assert_eq!(dec.dynamic_table(), (owned(&[("a", "cd")]), 35));
}

#[test]
fn never_indexed_flag_and_no_insertion() {
    let mut dec = Decoder::new(4096);
    // Never indexed with a static name (cookie, 32 = 15 + 17), without indexing, with indexing.
    let block = [0x1f, 0x11, 0x01, b'x', 0x0f, 0x11, 0x01, b'y', 0x60, 0x01, b'z'];
    let got = decode(&mut dec, &block).unwrap();
    assert_eq!(
        got,
        vec![
            (b"cookie".to_vec(), b"x".to_vec(), true),
            (b"cookie".to_vec(), b"y".to_vec(), false),
            (b"cookie".to_vec(), b"z".to_vec(), false),
        ]
    );
    assert_eq!(dec.dynamic_table(), (owned(&[("cookie", "z")]), 39));
}

#[test]
fn appends_without_clearing() {
    let mut dec = Decoder::new(4096);
    let mut buf = b"earlier".to_vec();
    let mut fields = vec![Field { name_start: 0, name_end: 1, value_start: 1, value_end: 2, never_indexed: false }];
    dec.decode(&[0x82, 0x84], &mut buf, &mut fields, 1000).unwrap();
    assert_eq!(fields.len(), 3);
    assert_eq!(&buf[..7], b"earlier");
    assert_eq!(
        lines(&buf, &fields[1..]),
        vec![(b":method".to_vec(), b"GET".to_vec(), false), (b":path".to_vec(), b"/".to_vec(), false)]
    );
}

#[test]
fn list_too_large_keeps_the_table_in_sync() {
    let mut dec = Decoder::new(4096);
    // :method GET (42), a literal with indexing of 32 + 2 + 100 bytes, :path / (38).
    let mut block = vec![0x82, 0x40, 0x01, b'n', 0x64];
    block.extend_from_slice(&[b'v'; 100]);
    block.push(0x84);
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    assert_eq!(dec.decode(&block, &mut buf, &mut fields, 100), Err(DecodeError::ListTooLarge));
    // The first field fits, nothing after the overflow is appended, not even :path.
    assert_eq!(lines(&buf, &fields), vec![(b":method".to_vec(), b"GET".to_vec(), false)]);
    assert!(buf.len() <= 100);
    // The dropped field was still indexed: the next block can use it.
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    dec.decode(&[0xbe], &mut buf, &mut fields, 1000).unwrap();
    assert_eq!(lines(&buf, &fields), vec![(b"n".to_vec(), vec![b'v'; 100], false)]);
}

#[test]
fn list_too_large_with_huffman_and_indexed_names() {
    // The list limit is checked on exact sizes: a Huffman value whose bound overflows but whose
    // decoded size fits is kept.
    let value = huffman_encode(b"aaaaaaaa"); // 5 bytes, bound 8
    let mut block = vec![0x44, 0x80 | value.len() as u8]; // :path, indexed name, Huffman value
    block.extend_from_slice(&value);
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    Decoder::new(4096).decode(&block, &mut buf, &mut fields, 32 + 5 + 8).unwrap();
    assert_eq!(lines(&buf, &fields), vec![(b":path".to_vec(), b"aaaaaaaa".to_vec(), false)]);
    // One byte less: too large, nothing stored, but the entry is indexed.
    let mut dec = Decoder::new(4096);
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    assert_eq!(dec.decode(&block, &mut buf, &mut fields, 32 + 5 + 7), Err(DecodeError::ListTooLarge));
    assert!(buf.is_empty() && fields.is_empty());
    assert_eq!(dec.dynamic_table(), (owned(&[(":path", "aaaaaaaa")]), 45));
    // Indexed fields past the limit are skipped, table entries still resolved (and checked).
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    assert_eq!(dec.decode(&[0xbe, 0xbe, 0x82], &mut buf, &mut fields, 50), Err(DecodeError::ListTooLarge));
    assert_eq!(fields.len(), 1);
    assert_eq!(
        dec.decode(&[0xbe, 0xbe, 0xbf], &mut Vec::new(), &mut Vec::new(), 50),
        Err(DecodeError::Compression("index beyond the table"))
    );
}

#[test]
fn compression_error_wins_over_list_too_large() {
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    let result = Decoder::new(4096).decode(&[0x82, 0x82, 0x80], &mut buf, &mut fields, 50);
    assert_eq!(result, Err(DecodeError::Compression("index 0")));
}

#[test]
fn list_limit_zero() {
    let (mut buf, mut fields) = (Vec::new(), Vec::new());
    let mut dec = Decoder::new(4096);
    assert_eq!(dec.decode(&[0x82], &mut buf, &mut fields, 0), Err(DecodeError::ListTooLarge));
    assert!(buf.is_empty() && fields.is_empty());
    assert_eq!(dec.decode(&[], &mut buf, &mut fields, 0), Ok(()));
}

#[test]
fn large_literal_over_the_limit_is_not_stored() {
    // A 10 000-byte value against a 1000-byte limit: `buf` never holds it.
    let mut block = vec![0x00, 0x01, b'x', 0x7f];
    let mut rest = 10_000 - 127;
    while rest >= 0x80 {
        block.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    block.push(rest as u8);
    block.extend(std::iter::repeat_n(b'v', 10_000));
    let (mut buf, mut fields) = (Vec::with_capacity(0), Vec::new());
    assert_eq!(Decoder::new(4096).decode(&block, &mut buf, &mut fields, 1000), Err(DecodeError::ListTooLarge));
    assert!(buf.is_empty() && buf.capacity() <= 1000);
}

/// A naive dynamic table (a Vec, newest first) to check the ring against.
struct Naive {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    max: usize,
}

impl Naive {
    fn size(&self) -> usize {
        self.entries.iter().map(|(n, v)| n.len() + v.len() + 32).sum()
    }
    fn evict(&mut self) {
        while self.size() > self.max {
            self.entries.pop();
        }
    }
}

#[derive(Clone, Debug)]
enum TableOp {
    Insert(usize, usize, u8),
    Resize(usize),
}

proptest! {
    /// The byte ring (growth, wrapping, eviction) behaves like a plain list.
    #[test]
    fn table_ring_matches_naive_model(ops in vec(prop_oneof![
        8 => (0usize..40, 0usize..120, any::<u8>()).prop_map(|(n, v, b)| TableOp::Insert(n, v, b)),
        1 => (0usize..600).prop_map(TableOp::Resize),
    ], 1..200)) {
        let mut table = Table::new(512);
        let mut naive = Naive { entries: Vec::new(), max: 512 };
        for op in ops {
            match op {
                TableOp::Insert(n, v, b) => {
                    let name: Vec<u8> = (0..n).map(|i| b.wrapping_add(i as u8)).collect();
                    let value: Vec<u8> = (0..v).map(|i| b.wrapping_mul(3).wrapping_add(i as u8)).collect();
                    table.insert(&name, &value);
                    if n + v + 32 > naive.max {
                        naive.entries.clear();
                    } else {
                        naive.entries.insert(0, (name, value));
                        naive.evict();
                    }
                }
                TableOp::Resize(max) => {
                    table.set_max_size(max);
                    naive.max = max;
                    naive.evict();
                }
            }
            prop_assert_eq!(table.entries(), naive.entries.clone());
            prop_assert_eq!(table.size(), naive.size());
        }
    }
}

/// One representation for the structured decoder fuzz: mostly plausible, sometimes broken.
#[derive(Clone, Debug)]
enum Rep {
    Indexed(usize),
    Literal { first: u8, prefix: u32, index: usize, name: Vec<u8>, value: Vec<u8>, huffman: bool },
    SizeUpdate(usize),
    Raw(Vec<u8>),
}

fn put_int(out: &mut Vec<u8>, first: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn put_str(out: &mut Vec<u8>, s: &[u8], huffman: bool) {
    if huffman {
        let h = huffman_encode(s);
        put_int(out, 0x80, 7, h.len());
        out.extend_from_slice(&h);
    } else {
        put_int(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}

fn rep_strategy() -> impl Strategy<Value = Rep> {
    prop_oneof![
        4 => (0usize..75).prop_map(Rep::Indexed),
        6 => (
            prop_oneof![Just((0x40u8, 6u32)), Just((0x00, 4)), Just((0x10, 4))],
            prop_oneof![Just(0usize), 1usize..70],
            vec(any::<u8>(), 0..12),
            vec(any::<u8>(), 0..80),
            any::<bool>(),
        )
            .prop_map(|((first, prefix), index, name, value, huffman)| Rep::Literal {
                first,
                prefix,
                index,
                name,
                value,
                huffman
            }),
        1 => (0usize..5000).prop_map(Rep::SizeUpdate),
        1 => vec(any::<u8>(), 0..6).prop_map(Rep::Raw),
    ]
}

fn encode_reps(reps: &[Rep]) -> Vec<u8> {
    let mut out = Vec::new();
    for rep in reps {
        match rep {
            Rep::Indexed(i) => put_int(&mut out, 0x80, 7, *i),
            Rep::Literal { first, prefix, index, name, value, huffman } => {
                put_int(&mut out, *first, *prefix, *index);
                if *index == 0 {
                    put_str(&mut out, name, *huffman);
                }
                put_str(&mut out, value, *huffman);
            }
            Rep::SizeUpdate(n) => put_int(&mut out, 0x20, 5, *n),
            Rep::Raw(bytes) => out.extend_from_slice(bytes),
        }
    }
    out
}

/// Decodes `block`, checking the invariants that hold whatever the input.
fn decode_checked(dec: &mut Decoder, block: &[u8], limit: usize) -> Result<(), DecodeError> {
    let mut buf = vec![7u8; 3];
    let mut fields = Vec::new();
    let result = dec.decode(block, &mut buf, &mut fields, limit);
    assert!(buf.len() - 3 <= limit, "buf grew by {} over a limit of {limit}", buf.len() - 3);
    let mut size = 0;
    for f in &fields {
        assert!(f.name_start >= 3 && f.name_start <= f.name_end && f.name_end == f.value_start);
        assert!(f.value_start <= f.value_end && f.value_end as usize <= buf.len());
        size += (f.value_end - f.name_start) as usize + 32;
    }
    assert!(size <= limit);
    let (entries, table_size) = dec.dynamic_table();
    assert_eq!(table_size, entries.iter().map(|(n, v)| n.len() + v.len() + 32).sum::<usize>());
    assert!(table_size <= 4096);
    result
}

proptest! {
    #[test]
    fn decoder_never_panics_on_random_bytes(
        blocks in vec(vec(any::<u8>(), 0..96), 1..6),
        limit in 0usize..600,
    ) {
        let mut dec = Decoder::new(4096);
        for block in blocks {
            if let Err(DecodeError::Compression(_)) = decode_checked(&mut dec, &block, limit) {
                break;
            }
        }
    }

    #[test]
    fn decoder_never_panics_on_structured_blocks(
        blocks in vec(vec(rep_strategy(), 0..12), 1..6),
        limit in prop_oneof![0usize..300, Just(usize::MAX)],
    ) {
        let mut dec = Decoder::new(4096);
        for reps in blocks {
            let block = encode_reps(&reps);
            if let Err(DecodeError::Compression(_)) = decode_checked(&mut dec, &block, limit) {
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Encoder

#[test]
fn static_name_lookup_matches_the_static_table() {
    for (i, &(name, _)) in STATIC.iter().enumerate().skip(14) {
        let first = STATIC.iter().position(|&(n, _)| n == name).unwrap() + 1;
        assert_eq!(usize::from(static_name_index(name)), first, "{}", String::from_utf8_lossy(name));
        let upper = name.to_ascii_uppercase();
        assert_eq!(usize::from(static_name_index(&upper)), first);
        assert!(i + 1 >= first);
    }
    for unknown in [&b""[..], b"x", b"dates", b"x-custom", b":status", b"content-typ", b"content-typf"] {
        assert_eq!(static_name_index(unknown), 0);
    }
}

#[test]
fn status_codes() {
    let mut enc = Encoder::new();
    for (code, byte) in [(200, 0x88), (204, 0x89), (206, 0x8a), (304, 0x8b), (400, 0x8c), (404, 0x8d), (500, 0x8e)] {
        let mut out = Vec::new();
        enc.status(code, &mut out);
        assert_eq!(out, [byte]);
    }
    let mut out = Vec::new();
    enc.status(302, &mut out);
    assert_eq!(out, [0x08, 0x03, b'3', b'0', b'2']);
    let mut dec = Decoder::new(4096);
    for code in 100..=999u16 {
        let mut out = Vec::new();
        enc.status(code, &mut out);
        assert_eq!(decode(&mut dec, &out).unwrap(), vec![(b":status".to_vec(), code.to_string().into_bytes(), false)]);
    }
    assert_eq!(dec.dynamic_table().1, 0);
}

#[test]
fn field_representations() {
    let mut enc = Encoder::new();
    let mut out = Vec::new();
    enc.begin(&mut out);
    assert!(out.is_empty());
    // Static name without indexing, lowercased: content-length is 28 = 15 + 13.
    enc.field(b"Content-Length", b"10", &mut out);
    assert_eq!(out, [0x0f, 0x0d, 0x02, b'1', b'0']);
    // Unknown name: a literal name, lowercased.
    out.clear();
    enc.field(b"X-Custom", b"v", &mut out);
    assert_eq!(out, [0x00, 0x08, b'x', b'-', b'c', b'u', b's', b't', b'o', b'm', 0x01, b'v']);
    // Indexable: inserted once (31 fits the 6-bit prefix), then indexed.
    out.clear();
    enc.field(b"Content-Type", b"text/html", &mut out);
    assert_eq!(out[..2], [0x5f, 0x09]);
    out.clear();
    enc.field(b"content-type", b"text/html", &mut out);
    assert_eq!(out, [0xbe]);
    // A second value of an indexable name without a static index names the dynamic entry.
    out.clear();
    enc.field(b"alt-svc", b"h3=\":443\"", &mut out);
    assert_eq!(out[..3], [0x40, 0x07, b'a']);
    out.clear();
    enc.field(b"alt-svc", b"clear", &mut out);
    assert_eq!(out[..2], [0x7e, 0x05]); // index 62: the previous alt-svc
                                        // Credentials: never inserted, never indexed only when asked.
    out.clear();
    enc.field(b"Set-Cookie", b"a=b", &mut out);
    assert_eq!(out, [0x0f, 0x28, 0x03, b'a', b'=', b'b']);
    out.clear();
    enc.field_never_indexed(b"authorization", b"x", &mut out);
    assert_eq!(out, [0x1f, 0x08, 0x01, b'x']);
    out.clear();
    enc.field_never_indexed(b"X-Secret", b"x", &mut out);
    assert_eq!(out[..2], [0x10, 0x08]);
    // A never-indexed indexable field is not served from the table.
    out.clear();
    enc.field_never_indexed(b"content-type", b"text/html", &mut out);
    assert_eq!(out[..2], [0x1f, 0x10]);
    // Long values of indexable names are not inserted.
    out.clear();
    enc.field(b"server", &[b's'; 129], &mut out);
    assert_eq!(out[..3], [0x0f, 0x27, 0x7f]);
    assert_eq!(enc.modeled_entries().len(), 3);
}

#[test]
fn size_updates_are_emitted_as_needed() {
    fn begin(enc: &mut Encoder) -> Vec<u8> {
        let mut out = Vec::new();
        enc.begin(&mut out);
        out
    }
    let mut enc = Encoder::new();
    // Larger than 4096: nothing to say.
    enc.set_max_table_size(65536);
    assert_eq!(begin(&mut enc), []);
    // The same size: nothing.
    enc.set_max_table_size(4096);
    assert_eq!(begin(&mut enc), []);
    // Down to 0: one update, and no insertion afterwards.
    let mut out = Vec::new();
    enc.begin(&mut out);
    enc.field(b"server", b"gw", &mut out);
    assert_eq!(enc.modeled_entries().len(), 1);
    enc.set_max_table_size(0);
    assert_eq!(begin(&mut enc), [0x20]);
    assert!(enc.modeled_entries().is_empty());
    let mut out = Vec::new();
    enc.field(b"server", b"gw", &mut out);
    assert_eq!(out, [0x0f, 0x27, 0x02, b'g', b'w']);
    assert!(enc.modeled_entries().is_empty());
    // Up then down then up between blocks: the minimum first, then the final size.
    enc.set_max_table_size(4096);
    enc.set_max_table_size(100);
    enc.set_max_table_size(2000);
    // The minimum (100) is above the current 0: only the final size is owed.
    assert_eq!(begin(&mut enc), hex("3f b1 0f"));
    enc.set_max_table_size(1000);
    enc.set_max_table_size(3000);
    assert_eq!(begin(&mut enc), hex("3f c9 07 3f 99 17"));
    // Down then back to the same size: the minimum, then the size again.
    enc.set_max_table_size(0);
    enc.set_max_table_size(3000);
    assert_eq!(begin(&mut enc), hex("20 3f 99 17"));
}

#[test]
fn encoder_round_trip_on_one_connection() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(4096);
    let head: &[(&[u8], &[u8])] = &[
        (b"Content-Type", b"text/html; charset=utf-8"),
        (b"Server", b"gateway"),
        (b"Date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
        (b"Content-Length", b"1234"),
        (b"Cache-Control", b"no-cache"),
        (b"Vary", b"Accept-Encoding"),
        (b"X-Content-Type-Options", b"nosniff"),
        (b"Strict-Transport-Security", b"max-age=31536000"),
        (b"X-Request-Id", b"abc"),
        (b"Set-Cookie", b"id=1"),
    ];
    let mut sizes = Vec::new();
    for round in 0..5 {
        let mut out = Vec::new();
        enc.begin(&mut out);
        enc.status(200, &mut out);
        for (name, value) in head {
            enc.field(name, value, &mut out);
        }
        enc.field_never_indexed(b"authorization", b"secret", &mut out);
        sizes.push(out.len());
        let got = decode(&mut dec, &out).unwrap();
        assert_eq!(got.len(), head.len() + 2, "round {round}");
        assert_eq!(got[0], (b":status".to_vec(), b"200".to_vec(), false));
        for ((name, value, never), (want_name, want_value)) in got[1..].iter().zip(head) {
            assert_eq!(name, &want_name.to_ascii_lowercase());
            assert_eq!(value, want_value);
            assert!(!never);
        }
        assert_eq!(got.last().unwrap(), &(b"authorization".to_vec(), b"secret".to_vec(), true));
        let (entries, _) = dec.dynamic_table();
        assert_eq!(entries, enc.modeled_entries());
    }
    // The repeated fields are one byte each from the second block on.
    assert!(sizes[1] < sizes[0] / 2, "{sizes:?}");
    assert!(sizes[1..].iter().all(|&s| s == sizes[1]));
}

#[test]
fn encoder_caps_its_entries() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(4096);
    for i in 0..100 {
        let mut out = Vec::new();
        enc.begin(&mut out);
        enc.field(b"vary", format!("v{i}").as_bytes(), &mut out);
        // Values still in the model are served by index.
        enc.field(b"vary", format!("v{}", i / 2).as_bytes(), &mut out);
        decode(&mut dec, &out).unwrap();
        let model = enc.modeled_entries();
        assert!(model.len() <= 32);
        let (entries, _) = dec.dynamic_table();
        assert_eq!(entries[..model.len()], model[..]);
    }
}

/// Names for the round-trip property: indexable, static, credential and custom ones.
const NAMES: &[&[u8]] = &[
    b"content-type",
    b"Server",
    b"CACHE-CONTROL",
    b"vary",
    b"content-encoding",
    b"accept-ranges",
    b"access-control-allow-origin",
    b"x-content-type-options",
    b"strict-transport-security",
    b"Via",
    b"x-frame-options",
    b"alt-svc",
    b"date",
    b"content-length",
    b"etag",
    b"last-modified",
    b"set-cookie",
    b"authorization",
    b"cookie",
    b"proxy-authorization",
    b"location",
    b"x-custom-header",
    b"X-Request-Id",
];

const VALUES: &[&[u8]] = &[b"", b"text/html", b"gw", b"no-cache", b"gzip", b"bytes", b"*", b"nosniff", b"DENY"];

#[derive(Clone, Debug)]
enum ConnOp {
    SetSize(usize),
    Block(u16, Vec<(Vec<u8>, Vec<u8>, bool)>),
}

fn field_strategy() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, bool)> {
    (
        prop_oneof![
            4 => proptest::sample::select(NAMES).prop_map(<[u8]>::to_vec),
            1 => "[a-zA-Z][a-zA-Z0-9-]{0,30}".prop_map(String::into_bytes),
        ],
        prop_oneof![
            4 => proptest::sample::select(VALUES).prop_map(<[u8]>::to_vec),
            1 => vec(any::<u8>(), 0..200),
        ],
        proptest::bool::weighted(0.1),
    )
}

fn conn_op_strategy() -> impl Strategy<Value = ConnOp> {
    prop_oneof![
        1 => prop_oneof![Just(0usize), 1usize..400, Just(4096), Just(65536)].prop_map(ConnOp::SetSize),
        5 => (
            proptest::sample::select(&[200u16, 204, 302, 404, 500, 503][..]),
            vec(field_strategy(), 0..16),
        )
            .prop_map(|(status, fields)| ConnOp::Block(status, fields)),
    ]
}

/// The leading size updates of a block.
fn leading_size_updates(block: &[u8]) -> Vec<usize> {
    let mut updates = Vec::new();
    let mut i = 0;
    while i < block.len() && block[i] & 0xe0 == 0x20 {
        let mut value = usize::from(block[i] & 0x1f);
        i += 1;
        if value == 0x1f {
            let mut shift = 0;
            loop {
                let b = block[i];
                i += 1;
                value += usize::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
        }
        updates.push(value);
    }
    updates
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any sequence of blocks and table size changes decodes back to what was encoded, and the
    /// encoder's table is always the newest part of the decoder's.
    #[test]
    fn encoder_round_trips_through_decoder(ops in vec(conn_op_strategy(), 1..40)) {
        let mut enc = Encoder::new();
        // The peer decoder: never more than 4096 (the encoder's cap), which is also its start.
        let mut dec = Decoder::new(4096);
        // The peer's setting and the smallest one since the last block.
        let mut setting = 4096usize;
        let mut min_setting: Option<usize> = None;
        for op in ops {
            match op {
                ConnOp::SetSize(n) => {
                    enc.set_max_table_size(n);
                    setting = n;
                    min_setting = Some(min_setting.map_or(n, |m| m.min(n)));
                }
                ConnOp::Block(status, fields) => {
                    let mut out = Vec::new();
                    enc.begin(&mut out);
                    let updates = leading_size_updates(&out);
                    prop_assert!(updates.len() <= 2);
                    if let Some(min) = min_setting.take() {
                        // Whatever was emitted respects the setting at the time and ends at the
                        // setting in force (capped at 4096).
                        if let Some(&first) = updates.first() {
                            prop_assert!(first <= min.min(4096) || updates.len() == 1);
                        }
                        if let Some(&last) = updates.last() {
                            prop_assert_eq!(last, setting.min(4096));
                        }
                    } else {
                        prop_assert!(updates.is_empty());
                    }
                    enc.status(status, &mut out);
                    for (name, value, never) in &fields {
                        if *never {
                            enc.field_never_indexed(name, value, &mut out);
                        } else {
                            enc.field(name, value, &mut out);
                        }
                    }
                    let got = decode(&mut dec, &out).unwrap();
                    prop_assert_eq!(got.len(), fields.len() + 1);
                    prop_assert_eq!(&got[0].1, &status.to_string().into_bytes());
                    for ((name, value, never), (want_name, want_value, want_never)) in got[1..].iter().zip(&fields) {
                        prop_assert_eq!(name, &want_name.to_ascii_lowercase());
                        prop_assert_eq!(value, want_value);
                        prop_assert_eq!(never, want_never);
                    }
                    let (entries, size) = dec.dynamic_table();
                    let model = enc.modeled_entries();
                    prop_assert!(model.len() <= 32 && model.len() <= entries.len());
                    prop_assert_eq!(&entries[..model.len()], &model[..]);
                    prop_assert!(size <= setting.min(4096) || min_setting.is_some());
                    // Credentials never enter the table.
                    for (name, _) in &entries {
                        let sensitive: &[&[u8]] = &[b"set-cookie", b"authorization", b"cookie", b"proxy-authorization"];
                        prop_assert!(!sensitive.contains(&name.as_slice()));
                    }
                }
            }
        }
    }
}
