//! Byte-level writers for log lines: decimal numbers, JSON strings and nginx-style `\xHH`
//! escaping. Everything appends to a caller-owned `Vec<u8>` and never allocates beyond growing
//! it.

/// Appends `s` as a JSON string literal, quotes included.
///
/// Valid UTF-8 is copied as is, except `"` and `\` (backslash-escaped), `\n`, `\r`, `\t`, the
/// other control characters and DEL (`\u00XX`). Each byte that is not part of valid UTF-8 is
/// written as `\u00XX` of the byte, so the byte value survives (a reader decoding the string sees
/// U+00XX, which is the Latin-1 reading of that byte).
pub(crate) fn json_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut rest = s;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                json_valid(out, valid.as_bytes());
                break;
            }
            Err(e) => {
                let (valid, tail) = rest.split_at_checked(e.valid_up_to()).unwrap_or((rest, &[]));
                json_valid(out, valid);
                // `None`: an incomplete sequence at the end; every remaining byte is invalid.
                let bad = e.error_len().unwrap_or(tail.len());
                let (bad, after) = tail.split_at_checked(bad).unwrap_or((tail, &[]));
                for &b in bad {
                    json_u00(out, b);
                }
                if after.is_empty() {
                    break;
                }
                rest = after;
            }
        }
    }
    out.push(b'"');
}

/// [`json_str`] of the value, or `null`.
pub(crate) fn json_opt_str(out: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends the bytes of a value written inside double quotes in the Combined format: printable
/// ASCII except `"` and `\` is copied, every other byte becomes `\xHH` (uppercase hex, as nginx).
pub(crate) fn quoted(out: &mut Vec<u8>, s: &[u8]) {
    escape_with(out, s, |b| matches!(b, 0x20..=0x7e) && b != b'"' && b != b'\\');
}

/// Like [`quoted`], and a space becomes `\x20` too, for values written unquoted after `key=`.
pub(crate) fn token(out: &mut Vec<u8>, s: &[u8]) {
    escape_with(out, s, |b| matches!(b, 0x21..=0x7e) && b != b'"' && b != b'\\');
}

/// Appends `n` in decimal.
pub(crate) fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        if let Some(slot) = tmp.get_mut(i) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    out.extend_from_slice(tmp.get(i..).unwrap_or_default());
}

/// Appends `n` in decimal, left-padded with zeros to `width` digits.
pub(crate) fn push_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let mut digits = 1;
    let mut m = n / 10;
    while m > 0 {
        digits += 1;
        m /= 10;
    }
    for _ in digits..width {
        out.push(b'0');
    }
    push_u64(out, n);
}

/// Appends a duration as seconds with millisecond resolution (`0.012`), as nginx's
/// `$request_time`.
pub(crate) fn push_seconds(out: &mut Vec<u8>, d: std::time::Duration) {
    push_u64(out, d.as_secs());
    out.push(b'.');
    push_padded(out, u64::from(d.subsec_millis()), 3);
}

/// Whole microseconds of `d`, saturating.
pub(crate) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn json_valid(out: &mut Vec<u8>, s: &[u8]) {
    for chunk in s.split_inclusive(|&b| needs_json_escape(b)) {
        match chunk.split_last() {
            Some((&last, head)) if needs_json_escape(last) => {
                out.extend_from_slice(head);
                match last {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    b => json_u00(out, b),
                }
            }
            _ => out.extend_from_slice(chunk),
        }
    }
}

fn needs_json_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f
}

fn json_u00(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex_digit(b >> 4, b'a'), hex_digit(b & 0xf, b'a')]);
}

fn escape_with(out: &mut Vec<u8>, s: &[u8], plain: impl Fn(u8) -> bool) {
    for chunk in s.split_inclusive(|&b| !plain(b)) {
        match chunk.split_last() {
            Some((&last, head)) if !plain(last) => {
                out.extend_from_slice(head);
                out.extend_from_slice(&[b'\\', b'x', hex_digit(last >> 4, b'A'), hex_digit(last & 0xf, b'A')]);
            }
            _ => out.extend_from_slice(chunk),
        }
    }
}

fn hex_digit(n: u8, a: u8) -> u8 {
    if n < 10 {
        b'0' + n
    } else {
        a + (n - 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &[u8]) -> String {
        let mut out = Vec::new();
        json_str(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_escapes_quotes_controls_and_invalid_bytes() {
        assert_eq!(json(b"plain /a/b"), r#""plain /a/b""#);
        assert_eq!(json(b"a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(json(b"\n\r\t\x00\x1f\x7f"), r#""\n\r\t\u0000\u001f\u007f""#);
        assert_eq!(json(b"\xff"), r#""\u00ff""#);
        assert_eq!(json(b"a\xffb\xc3"), r#""a\u00ffb\u00c3""#, "a truncated sequence at the end");
        assert_eq!(json("caf\u{e9} \u{1f600}".as_bytes()), "\"caf\u{e9} \u{1f600}\"", "valid UTF-8 kept");
        assert_eq!(json(b""), r#""""#);
    }

    #[test]
    fn json_output_round_trips_through_serde() {
        let hostile: &[u8] = b"\"\\\n\x00\xff\xfe\xc3\x28 \xe2\x82 ok \xf0\x9f\x98\x80";
        let s = json(hostile);
        let back: String = serde_json::from_str(&s).unwrap();
        let latin: String = "\"\\\n\u{0}\u{ff}\u{fe}\u{c3}( \u{e2}\u{82} ok \u{1f600}".into();
        assert_eq!(back, latin);
    }

    #[test]
    fn combined_escaping_is_nginx_like() {
        let mut out = Vec::new();
        quoted(&mut out, b"Mozilla \"x\" \\ \n\x00\xff\x7f~");
        assert_eq!(out, b"Mozilla \\x22x\\x22 \\x5C \\x0A\\x00\\xFF\\x7F~");
        out.clear();
        token(&mut out, b"a b");
        assert_eq!(out, b"a\\x20b");
    }

    #[test]
    fn numbers() {
        let mut out = Vec::new();
        for (n, want) in
            [(0u64, "0"), (7, "7"), (10, "10"), (1234567890, "1234567890"), (u64::MAX, "18446744073709551615")]
        {
            out.clear();
            push_u64(&mut out, n);
            assert_eq!(out, want.as_bytes());
        }
        out.clear();
        push_padded(&mut out, 7, 3);
        push_padded(&mut out, 1234, 2);
        assert_eq!(out, b"0071234");
        out.clear();
        push_seconds(&mut out, std::time::Duration::from_micros(12_345_678));
        assert_eq!(out, b"12.345");
        assert_eq!(micros(std::time::Duration::MAX), u64::MAX);
    }
}
