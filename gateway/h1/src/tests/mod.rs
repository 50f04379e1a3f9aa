//! Tests of the HTTP/1.1 head parsers, grouped by the module whose rules they pin, plus property
//! tests. Every case goes through `parse_request` or `parse_response`, the way the gateway calls
//! them.

use super::RequestError::{
    BadRequest, ExpectationFailed, HeadersTooLarge, NotImplemented, UriTooLong, VersionNotSupported,
};
use super::*;

const LIMITS: RequestLimits = RequestLimits { max_request_line: 64, max_header_bytes: 256, max_headers: 8 };

fn req(bytes: &[u8]) -> Result<Option<RequestHead>, RequestError> {
    parse_request(bytes, &LIMITS, &mut HeadScratch::new(MAX_HEADERS))
}

fn ok(bytes: &[u8]) -> RequestHead {
    match req(bytes) {
        Ok(Some(head)) => head,
        other => panic!("{other:?} for {:?}", String::from_utf8_lossy(bytes)),
    }
}

/// A GET with `Host: a.example` and the given extra field lines.
fn get_with(fields: &str) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nHost: a.example\r\n{fields}\r\n").into_bytes()
}

/// One test per refused request: the bytes, and the exact error.
macro_rules! refuse {
    ($($name:ident: $bytes:expr => $err:expr;)*) => {$(
        #[test]
        fn $name() {
            let owned = $bytes;
            let bytes: &[u8] = owned.as_ref();
            assert_eq!(req(bytes), Err($err), "for {:?}", String::from_utf8_lossy(bytes));
        }
    )*};
}

mod fields;
mod props;
mod request;
mod response;
mod uri;
