//! The chunked transfer coding (RFC 9112 §7.1): a streaming, allocation-free strict decoder
//! and the encoder.
//!
//! The decoder accepts exactly the RFC grammar: hex sizes without sign, prefix or padding
//! whitespace, chunk extensions only as `*( BWS ";" BWS token [ BWS "=" BWS ( token /
//! quoted-string ) ] )`, CRLF and nothing else after every line and every chunk's data, and
//! well-formed trailer fields, which are checked and discarded. Anything else is an error, so a
//! peer that frames differently can never make the gateway see a different message boundary.
#![forbid(unsafe_code)]

/// Most hex digits in a chunk-size (16 fit a u64 exactly, leading zeros included).
pub const MAX_SIZE_DIGITS: u8 = 16;
/// Most bytes of chunk extensions on one chunk line, from the end of the size to the CR.
pub const MAX_EXTENSION_BYTES: usize = 1024;
/// Most bytes of the trailer section, its final CRLF included.
pub const MAX_TRAILER_BYTES: usize = 8 * 1024;

/// The last chunk with no trailer fields: ends a chunked message.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Why chunked input was refused. After an error the decoder only repeats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    #[error("invalid chunk size")]
    BadSize,
    #[error("chunk size has more than 16 hex digits")]
    SizeTooLarge,
    #[error("invalid or too long chunk extension")]
    BadExtension,
    #[error("line not terminated by CRLF")]
    BadLineEnding,
    #[error("invalid trailer field")]
    BadTrailer,
    #[error("trailer section too large")]
    TrailerTooLarge,
}

/// What one [`ChunkedDecoder::decode`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Input bytes used. Less than the input only when the message is complete.
    pub consumed: usize,
    /// The last chunk, the trailer section and the final CRLF have been read.
    pub done: bool,
}

/// Decodes one chunked message fed in pieces split anywhere.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    /// The chunk size being read, then the data bytes still expected.
    remaining: u64,
    size_digits: u8,
    extension_bytes: usize,
    trailer_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of the chunk size.
    Size,
    /// BWS after the size or an extension value; only `;` may follow.
    ExtBeforeSemi,
    /// After `;`: BWS, then an extension name.
    ExtNameStart,
    ExtName,
    /// BWS after an extension name: `=` or `;` may follow.
    ExtAfterName,
    /// After `=`: BWS, then a token or a quoted-string.
    ExtValueStart,
    ExtToken,
    ExtQuoted,
    ExtQuotedPair,
    ExtAfterQuoted,
    /// The LF of a chunk line.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerLineStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    /// The LF of the CRLF that ends the message.
    EndLf,
    Done,
    Failed(ChunkedError),
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a message.
    pub fn new() -> Self {
        Self { state: State::Size, remaining: 0, size_digits: 0, extension_bytes: 0, trailer_bytes: 0 }
    }

    /// Whether the whole message has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads as much of `input` as belongs to the message, appending chunk data to `out`.
    ///
    /// Bytes after the end of the message are left unconsumed (they are the next pipelined
    /// message). Only `out` may allocate, and only when the caller's buffer must grow.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Progress, ChunkedError> {
        let mut pos = 0;
        while let Some(&b) = input.get(pos) {
            match self.state {
                State::Done => break,
                State::Failed(e) => return Err(e),
                State::Data => pos += self.data(input.get(pos..).unwrap_or_default(), out),
                _ => {
                    if let Err(e) = self.step(b) {
                        self.state = State::Failed(e);
                        return Err(e);
                    }
                    pos += 1;
                }
            }
        }
        match self.state {
            State::Failed(e) => Err(e),
            state => Ok(Progress { consumed: pos, done: state == State::Done }),
        }
    }

    /// Copies up to `remaining` bytes of chunk data; returns how many.
    fn data(&mut self, rest: &[u8], out: &mut Vec<u8>) -> usize {
        let take = usize::try_from(self.remaining).unwrap_or(usize::MAX).min(rest.len());
        out.extend_from_slice(rest.get(..take).unwrap_or_default());
        self.remaining -= take as u64;
        if self.remaining == 0 {
            self.state = State::DataCr;
        }
        take
    }

    /// Advances over one byte outside chunk data.
    fn step(&mut self, b: u8) -> Result<(), ChunkedError> {
        use State::*;
        self.state = match self.state {
            Size => return self.size_byte(b),
            ExtBeforeSemi | ExtNameStart | ExtName | ExtAfterName | ExtValueStart | ExtToken | ExtQuoted
            | ExtQuotedPair | ExtAfterQuoted => return self.extension_byte(b),
            SizeLf => match b {
                b'\n' if self.remaining == 0 => TrailerLineStart,
                b'\n' => Data,
                _ => return Err(ChunkedError::BadLineEnding),
            },
            DataCr if b == b'\r' => DataLf,
            DataLf if b == b'\n' => {
                self.size_digits = 0;
                self.extension_bytes = 0;
                Size
            }
            DataCr | DataLf => return Err(ChunkedError::BadLineEnding),
            TrailerLineStart | TrailerName | TrailerValue | TrailerLf | EndLf => return self.trailer_byte(b),
            // `decode` handles these without calling `step`.
            Data | Done | Failed(_) => self.state,
        };
        Ok(())
    }

    /// `chunk-size = 1*HEXDIG`, then an extension or the CR.
    fn size_byte(&mut self, b: u8) -> Result<(), ChunkedError> {
        if let Some(digit) = hex_value(b) {
            if self.size_digits == MAX_SIZE_DIGITS {
                return Err(ChunkedError::SizeTooLarge);
            }
            self.size_digits += 1;
            self.remaining = (self.remaining << 4) | u64::from(digit);
            return Ok(());
        }
        if self.size_digits == 0 {
            return Err(if b == b'\n' { ChunkedError::BadLineEnding } else { ChunkedError::BadSize });
        }
        self.state = match b {
            b'\r' => State::SizeLf,
            b'\n' => return Err(ChunkedError::BadLineEnding),
            b';' | b' ' | b'\t' => return self.extension_byte_in(State::ExtBeforeSemi, b),
            _ => return Err(ChunkedError::BadSize),
        };
        Ok(())
    }

    fn extension_byte(&mut self, b: u8) -> Result<(), ChunkedError> {
        self.extension_byte_in(self.state, b)
    }

    /// One byte of `chunk-ext`, counted against [`MAX_EXTENSION_BYTES`].
    fn extension_byte_in(&mut self, state: State, b: u8) -> Result<(), ChunkedError> {
        use State::*;
        self.extension_bytes += 1;
        if self.extension_bytes > MAX_EXTENSION_BYTES {
            return Err(ChunkedError::BadExtension);
        }
        let bws = b == b' ' || b == b'\t';
        self.state = match (state, b) {
            (ExtQuoted, b'"') => ExtAfterQuoted,
            (ExtQuoted, b'\\') => ExtQuotedPair,
            (ExtQuoted, _) if is_qdtext(b) => ExtQuoted,
            (ExtQuotedPair, _) if is_field_byte(b) => ExtQuoted,
            (ExtQuoted | ExtQuotedPair, _) => return Err(ChunkedError::BadExtension),
            // Outside quoted strings a bare LF is a line-ending error wherever it appears.
            (_, b'\n') => return Err(ChunkedError::BadLineEnding),
            (ExtName | ExtToken | ExtAfterQuoted, b'\r') => SizeLf,
            (ExtBeforeSemi | ExtName | ExtAfterName | ExtToken | ExtAfterQuoted, b';') => ExtNameStart,
            (ExtBeforeSemi | ExtNameStart | ExtAfterName | ExtValueStart, _) if bws => state,
            (ExtName, _) if bws => ExtAfterName,
            (ExtToken | ExtAfterQuoted, _) if bws => ExtBeforeSemi,
            (ExtNameStart | ExtName, _) if is_tchar(b) => ExtName,
            (ExtName | ExtAfterName, b'=') => ExtValueStart,
            (ExtValueStart, b'"') => ExtQuoted,
            (ExtValueStart | ExtToken, _) if is_tchar(b) => ExtToken,
            _ => return Err(ChunkedError::BadExtension),
        };
        // The CR has been counted; the line is over.
        if self.state == SizeLf {
            self.extension_bytes = 0;
        }
        Ok(())
    }

    /// One byte of `trailer-section CRLF`, counted against [`MAX_TRAILER_BYTES`].
    fn trailer_byte(&mut self, b: u8) -> Result<(), ChunkedError> {
        use State::*;
        self.trailer_bytes += 1;
        if self.trailer_bytes > MAX_TRAILER_BYTES {
            return Err(ChunkedError::TrailerTooLarge);
        }
        self.state = match (self.state, b) {
            (EndLf, b'\n') => Done,
            (TrailerLf, b'\n') => TrailerLineStart,
            (TrailerLf | EndLf, _) => return Err(ChunkedError::BadLineEnding),
            (_, b'\n') => return Err(ChunkedError::BadLineEnding),
            (TrailerLineStart, b'\r') => EndLf,
            (TrailerLineStart | TrailerName, _) if is_tchar(b) => TrailerName,
            (TrailerName, b':') => TrailerValue,
            (TrailerValue, b'\r') => TrailerLf,
            (TrailerValue, _) if is_field_byte(b) => TrailerValue,
            // obs-fold, whitespace before the colon, control characters, an empty name.
            _ => return Err(ChunkedError::BadTrailer),
        };
        Ok(())
    }
}

/// Appends `data` as one chunk: its size in lowercase hex, CRLF, the data, CRLF. Nothing for
/// empty data, which would otherwise end the message.
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    let len = data.len();
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4);
    out.reserve(digits as usize + data.len() + 4);
    for shift in (0..digits).rev() {
        let nibble = (len >> (shift * 4)) & 0xf;
        out.push(if nibble < 10 { b'0' + nibble as u8 } else { b'a' + (nibble - 10) as u8 });
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `tchar` (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// HTAB / SP / VCHAR / obs-text: a field-value byte, also what a quoted-pair may escape.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// `qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text`
fn is_qdtext(b: u8) -> bool {
    is_field_byte(b) && b != b'"' && b != b'\\'
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::ChunkedError::*;
    use super::*;
    use proptest::prelude::*;

    /// Decoded bytes, total consumed, done; for input fed as `pieces`.
    fn feed(pieces: &[&[u8]]) -> Result<(Vec<u8>, usize, bool), ChunkedError> {
        let mut decoder = ChunkedDecoder::new();
        let (mut out, mut consumed, mut done) = (Vec::new(), 0, false);
        for piece in pieces {
            let progress = decoder.decode(piece, &mut out)?;
            consumed += progress.consumed;
            done = progress.done;
        }
        Ok((out, consumed, done))
    }

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), ChunkedError> {
        feed(&[input])
    }

    /// One test per refused input: the bytes, and the exact error.
    macro_rules! refuse {
        ($($name:ident: $bytes:expr => $err:expr;)*) => {$(
            #[test]
            fn $name() {
                let owned = $bytes;
                let bytes: &[u8] = owned.as_ref();
                assert_eq!(decode_all(bytes), Err($err), "for {:?}", String::from_utf8_lossy(bytes));
            }
        )*};
    }

    refuse! {
        size_not_hex: b"g\r\n" => BadSize;
        size_empty: b"\r\n" => BadSize;
        size_leading_space: b" 5\r\nhello\r\n0\r\n\r\n" => BadSize;
        size_0x_prefix: b"0x5\r\nhello\r\n0\r\n\r\n" => BadSize;
        size_plus_sign: b"+5\r\nhello\r\n0\r\n\r\n" => BadSize;
        size_minus_sign: b"-5\r\nhello\r\n0\r\n\r\n" => BadSize;
        size_trailing_garbage: b"5g\r\nhello\r\n0\r\n\r\n" => BadSize;
        size_17_digits: b"10000000000000000\r\n" => SizeTooLarge;
        size_17_zeros: b"00000000000000000\r\n" => SizeTooLarge;
        ext_bws_without_semicolon: b"5 \r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_empty_name: b"5;\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_name_missing_before_eq: b"5;=b\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_empty_value: b"5;a=\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_bws_at_line_end: b"5;a \r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_two_names: b"5;a b\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_two_values: b"5;a=b c\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_value_not_token: b"5;a=@\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_name_not_token: b"5;a@\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_text_after_quoted: b"5;a=\"x\"y\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_unterminated_quoted: b"5;a=\"x\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_ctl_in_quoted: b"5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_del_in_quoted: b"5;a=\"\x7f\"\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_ctl_in_quoted_pair: b"5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n" => BadExtension;
        ext_too_long: format!("5;a={}\r\nhello\r\n0\r\n\r\n", "b".repeat(MAX_EXTENSION_BYTES - 2)) => BadExtension;
        lf_after_size: b"5\nhello\r\n0\r\n\r\n" => BadLineEnding;
        cr_without_lf_after_size: b"5\rhello\r\n0\r\n\r\n" => BadLineEnding;
        lf_after_extension: b"5;a=b\nhello\r\n0\r\n\r\n" => BadLineEnding;
        lf_in_extension_bws: b"5 \nhello\r\n0\r\n\r\n" => BadLineEnding;
        lf_as_size_line: b"\n" => BadLineEnding;
        data_too_long: b"5\r\nhello!\r\n0\r\n\r\n" => BadLineEnding;
        data_then_lf: b"5\r\nhello\n0\r\n\r\n" => BadLineEnding;
        data_then_cr_only: b"5\r\nhello\r0\r\n\r\n" => BadLineEnding;
        last_chunk_lf: b"5\r\nhello\r\n0\n\r\n" => BadLineEnding;
        final_line_lf: b"0\r\n\n" => BadLineEnding;
        final_line_cr_only: b"0\r\n\rX" => BadLineEnding;
        trailer_line_lf: b"0\r\nX: y\n\r\n" => BadLineEnding;
        trailer_line_cr_only: b"0\r\nX: y\rZ: w\r\n\r\n" => BadLineEnding;
        trailer_obs_fold: b"0\r\nX: y\r\n z\r\n\r\n" => BadTrailer;
        trailer_leading_space: b"0\r\n X: y\r\n\r\n" => BadTrailer;
        trailer_space_before_colon: b"0\r\nX : y\r\n\r\n" => BadTrailer;
        trailer_empty_name: b"0\r\n: y\r\n\r\n" => BadTrailer;
        trailer_without_colon: b"0\r\nX\r\n\r\n" => BadTrailer;
        trailer_nul_in_value: b"0\r\nX: a\0b\r\n\r\n" => BadTrailer;
        trailer_del_in_value: b"0\r\nX: a\x7fb\r\n\r\n" => BadTrailer;
        trailer_too_large: format!("0\r\nX: {}\r\n\r\n", "y".repeat(MAX_TRAILER_BYTES)) => TrailerTooLarge;
    }

    #[test]
    fn decodes_chunks_extensions_and_trailers() {
        let input =
            b"3\r\nabc\r\n4 ;x = y; q=\"a \\\" b\"\t;z\r\ndefg\r\nA\r\n0123456789\r\n0;end\r\nX-T: 1\r\nY: \t\r\n\r\n";
        assert_eq!(decode_all(input), Ok((b"abcdefg0123456789".to_vec(), input.len(), true)));
        let padded = b"0005\r\nhello\r\n0\r\n\r\n";
        assert_eq!(decode_all(padded), Ok((b"hello".to_vec(), padded.len(), true)));
        assert_eq!(decode_all(LAST_CHUNK), Ok((Vec::new(), LAST_CHUNK.len(), true)));
    }

    #[test]
    fn limits_are_inclusive() {
        let size = b"ffffffffffffffff\r\nab";
        assert_eq!(decode_all(size), Ok((b"ab".to_vec(), size.len(), false)));
        let ext = format!("5;a={}\r\nhello\r\n0\r\n\r\n", "b".repeat(MAX_EXTENSION_BYTES - 4));
        assert_eq!(decode_all(ext.as_bytes()), Ok((b"hello".to_vec(), ext.len(), true)));
        // The trailer section counts its final CRLF.
        let trailer = format!("0\r\nX:{}\r\n\r\n", "y".repeat(MAX_TRAILER_BYTES - 6));
        assert_eq!(decode_all(trailer.as_bytes()), Ok((Vec::new(), trailer.len(), true)));
    }

    #[test]
    fn every_split_point_decodes_the_same() {
        let input = b"3;a=\"b\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX: y\r\n\r\n";
        let whole = decode_all(input).unwrap();
        assert_eq!(whole, (b"abc0123456789abcdef".to_vec(), input.len(), true));
        for i in 0..=input.len() {
            for j in i..=input.len() {
                assert_eq!(feed(&[&input[..i], &input[i..j], &input[j..]]), Ok(whole.clone()), "split at {i}, {j}");
            }
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(feed(&bytes), Ok(whole));
    }

    #[test]
    fn bytes_after_the_message_are_left_alone() {
        let message = b"2\r\nhi\r\n0\r\n\r\n";
        let mut input = message.to_vec();
        input.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut decoder = ChunkedDecoder::new();
        let mut out = Vec::new();
        assert_eq!(decoder.decode(&input, &mut out), Ok(Progress { consumed: message.len(), done: true }));
        assert_eq!(out, b"hi");
        assert!(decoder.is_done());
        assert_eq!(decoder.decode(&input[message.len()..], &mut out), Ok(Progress { consumed: 0, done: true }));
        assert_eq!(out, b"hi");
    }

    #[test]
    fn incomplete_input_is_consumed_and_not_done() {
        let mut decoder = ChunkedDecoder::new();
        let mut out = Vec::new();
        assert_eq!(decoder.decode(b"", &mut out), Ok(Progress { consumed: 0, done: false }));
        assert_eq!(decoder.decode(b"5\r\nhel", &mut out), Ok(Progress { consumed: 6, done: false }));
        assert_eq!(out, b"hel");
    }

    #[test]
    fn errors_are_sticky() {
        let mut decoder = ChunkedDecoder::new();
        let mut out = Vec::new();
        assert_eq!(decoder.decode(b"5\n", &mut out), Err(BadLineEnding));
        assert_eq!(decoder.decode(b"hello\r\n0\r\n\r\n", &mut out), Err(BadLineEnding));
        assert_eq!(decoder.decode(b"", &mut out), Err(BadLineEnding));
    }

    #[test]
    fn encoding() {
        let mut out = Vec::new();
        encode_chunk(b"", &mut out);
        assert!(out.is_empty());
        encode_chunk(b"a", &mut out);
        assert_eq!(out, b"1\r\na\r\n");
        for (len, size) in [(15, "f"), (16, "10"), (255, "ff"), (4096, "1000"), (1_000_000, "f4240")] {
            let mut out = Vec::new();
            encode_chunk(&vec![b'x'; len], &mut out);
            assert!(out.starts_with(format!("{size}\r\n").as_bytes()), "{len}");
            assert_eq!(out.len(), size.len() + 2 + len + 2);
            assert!(out.ends_with(b"x\r\n"));
        }
    }

    proptest! {
        #[test]
        fn encode_then_decode_round_trips(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut encoded = Vec::new();
            for chunk in &chunks {
                encode_chunk(chunk, &mut encoded);
            }
            encoded.extend_from_slice(LAST_CHUNK);
            let message_len = encoded.len();
            encoded.extend_from_slice(b"NEXT");
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(encoded.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for p in points.into_iter().chain([encoded.len()]) {
                pieces.push(&encoded[start..p]);
                start = p;
            }
            let (out, consumed, done) = feed(&pieces).unwrap();
            prop_assert_eq!(out, chunks.concat());
            prop_assert_eq!(consumed, message_len);
            prop_assert!(done);
        }

        #[test]
        fn decode_never_panics(
            input in proptest::collection::vec(any::<u8>(), 0..400),
            cut in any::<prop::sample::Index>(),
        ) {
            let (a, b) = input.split_at(cut.index(input.len() + 1));
            let mut decoder = ChunkedDecoder::new();
            let mut out = Vec::new();
            if let Ok(first) = decoder.decode(a, &mut out) {
                prop_assert!(first.consumed <= a.len());
                if let Ok(second) = decoder.decode(b, &mut out) {
                    prop_assert!(second.consumed <= b.len());
                    prop_assert!(out.len() <= input.len());
                }
            }
        }

        #[test]
        fn decode_never_panics_on_chunk_shaped_input(
            input in "([0-9a-fA-F]{1,3}(;[a-z]{1,3}(=[a-z\"\\\\ ]{0,4})?)?\r?\n?[a-z\r\n]{0,20}){0,5}[ :a-z\r\n]{0,20}",
        ) {
            let mut out = Vec::new();
            let _ = ChunkedDecoder::new().decode(input.as_bytes(), &mut out);
        }
    }
}
