use super::*;
use proptest::prelude::*;

fn in_bounds(r: &Range<usize>, len: usize) -> bool {
    r.start <= r.end && r.end <= len
}

proptest! {
    #[test]
    fn parse_request_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut scratch = HeadScratch::new(8);
        if let Ok(Some(head)) = parse_request(&bytes, &LIMITS, &mut scratch) {
            prop_assert!(head.head_len <= bytes.len());
            prop_assert!(in_bounds(&head.target, head.head_len) && in_bounds(&head.path, head.head_len));
        }
    }

    #[test]
    fn mutated_requests_never_panic_and_stay_in_bounds(
        at in 0usize..80, byte in any::<u8>(), cut in 0usize..80,
    ) {
        let mut buf = b"POST http://a.example/p?q HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n\r\n".to_vec();
        if let Some(b) = buf.get_mut(at) { *b = byte; }
        buf.truncate(buf.len().saturating_sub(cut));
        let mut scratch = HeadScratch::new(8);
        if let Ok(Some(head)) = parse_request(&buf, &LIMITS, &mut scratch) {
            prop_assert!(head.head_len <= buf.len());
            for r in [&head.method_range, &head.target, &head.path] {
                prop_assert!(in_bounds(r, head.head_len));
            }
            for h in scratch.headers() {
                prop_assert!(in_bounds(&h.name_range(), head.head_len));
                prop_assert!(in_bounds(&h.value_range(), head.head_len));
            }
        }
    }

    #[test]
    fn parse_response_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), head in any::<bool>()) {
        let mut scratch = HeadScratch::new(8);
        if let Ok(Some(parsed)) = parse_response(&bytes, 256, head, &mut scratch) {
            prop_assert!(parsed.head_len <= bytes.len() && in_bounds(&parsed.reason, parsed.head_len));
        }
    }

    #[test]
    fn generated_fields_come_back_exactly(
        fields in proptest::collection::vec(("[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}", "[!-~]([ -~]{0,20}[!-~])?"), 0..6),
    ) {
        let mut text = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for (name, value) in &fields {
            text.push_str(&format!("X-{name}:  {value}\t\r\n"));
        }
        text.push_str("\r\n");
        let buf = text.into_bytes();
        let mut scratch = HeadScratch::new(8);
        let parsed = parse_request(&buf, &LIMITS, &mut scratch);
        prop_assert!(matches!(parsed, Ok(Some(_))), "{:?}", parsed);
        let got: Vec<(String, String)> = scratch.headers().iter().skip(1).map(|h| {
            (String::from_utf8_lossy(h.name(&buf)).into_owned(), String::from_utf8_lossy(h.value(&buf)).into_owned())
        }).collect();
        let want: Vec<(String, String)> = fields.iter().map(|(n, v)| (format!("X-{n}"), v.clone())).collect();
        prop_assert_eq!(got, want);
    }
}
