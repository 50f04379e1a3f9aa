//! `proxy_protocol::parse` on arbitrary bytes under a mode chosen by the first byte: never
//! panics; a header never claims more bytes than it was given (nor past the v1/v2 limits); an
//! incomplete answer stays incomplete or becomes the same decision on any prefix; a header
//! parses the same from exactly its own bytes (so reading no further than it is safe).

use gateway::downstream::proxy_protocol::{parse, Accept, Parsed, MAX_HEADER, V1_MAX};

pub fn check(data: &[u8]) {
    let Some((&mode, input)) = data.split_first() else { return };
    let accept = match mode % 4 {
        0 => Accept::V1,
        1 => Accept::V2,
        2 => Accept::Any,
        _ => Accept::Optional,
    };
    let result = parse(input, accept);
    match result {
        Ok(Parsed::Header { len, .. }) => {
            assert!(len <= input.len() && len <= MAX_HEADER, "len {len} of {}", input.len());
            if input.first() == Some(&b'P') {
                assert!(len <= V1_MAX, "v1 len {len}");
            }
            // Exactly the header's bytes give the same answer: nothing after it was needed.
            assert_eq!(parse(&input[..len], accept), result);
            // Any shorter prefix is incomplete (the reader takes those bytes and waits).
            for n in [0, len / 2, len.saturating_sub(1)] {
                if n < len {
                    let p = parse(&input[..n], accept);
                    assert!(matches!(p, Ok(Parsed::Incomplete)), "prefix {n} of {len}: {p:?}");
                }
            }
        }
        Ok(Parsed::Incomplete) => assert!(input.len() < MAX_HEADER),
        Ok(Parsed::Absent) => assert_eq!(accept, Accept::Optional),
        Err(_) => {}
    }
}
