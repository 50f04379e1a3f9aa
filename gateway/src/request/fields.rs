//! A request's header fields, whichever protocol carried them.

use crate::codec::h1::{HeadScratch, HeaderRange};

/// The field lines of one request, in the order received. Names compare ASCII
/// case-insensitively (HTTP/2 names are lower case on the wire; HTTP/1.1 keeps the case sent).
#[derive(Clone, Copy)]
pub enum Fields<'a> {
    /// An HTTP/1.1 head: the bytes it was parsed from and its field ranges.
    H1 { buf: &'a [u8], scratch: &'a HeadScratch },
    /// An HTTP/2 head decoded by the gateway's codec: the decoded bytes and the fields.
    H2Native(&'a gateway_h2::server::RequestHead),
}

impl<'a> Fields<'a> {
    /// Every field line as (name, value).
    #[inline]
    pub fn iter(&self) -> FieldIter<'a> {
        match *self {
            Self::H1 { buf, scratch } => FieldIter::H1 { buf, lines: scratch.headers().iter() },
            Self::H2Native(head) => FieldIter::H2Native { buf: &head.buf, fields: head.fields.iter() },
        }
    }

    /// The value of the first field named `name`.
    pub fn first(&self, name: &[u8]) -> Option<&'a [u8]> {
        match *self {
            Self::H1 { .. } | Self::H2Native(_) => {
                self.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
            }
        }
    }

    /// Calls `f` on each value of the fields named `name`, in order, until it returns true;
    /// whether one did.
    pub fn any(&self, name: &[u8], mut f: impl FnMut(&'a [u8]) -> bool) -> bool {
        match *self {
            Self::H1 { .. } | Self::H2Native(_) => {
                self.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).any(|(_, v)| f(v))
            }
        }
    }

    /// How many field lines there are.
    pub fn len(&self) -> usize {
        match self {
            Self::H1 { scratch, .. } => scratch.headers().len(),
            Self::H2Native(head) => head.fields.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `name` must not be forwarded because of this request: the fixed hop-by-hop
    /// fields and, on HTTP/1.1, every option its `Connection` fields name.
    pub fn is_hop_by_hop(&self, name: &[u8]) -> bool {
        match *self {
            Self::H1 { buf, scratch } => crate::codec::h1::is_hop_by_hop(name, buf, scratch),
            Self::H2Native(_) => crate::codec::h1::is_fixed_hop_by_hop(name),
        }
    }
}

/// Iterates over a request's field lines.
pub enum FieldIter<'a> {
    H1 { buf: &'a [u8], lines: std::slice::Iter<'a, HeaderRange> },
    H2Native { buf: &'a [u8], fields: std::slice::Iter<'a, gateway_h2::hpack::Field> },
}

impl<'a> Iterator for FieldIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::H1 { buf, lines } => lines.next().map(|h| (h.name(buf), h.value(buf))),
            Self::H2Native { buf, fields } => fields.next().map(|f| gateway_h2::server::field_bytes(buf, f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_protocols_answer_alike() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\nX-User: alice\r\ncookie: a=1\r\nCookie: b=2\r\n\r\n";
        let limits = crate::codec::h1::RequestLimits { max_request_line: 100, max_header_bytes: 1000, max_headers: 10 };
        let mut scratch = HeadScratch::new(10);
        let parsed = crate::codec::h1::parse_request(head, &limits, &mut scratch);
        assert!(matches!(parsed, Ok(Some(_))));
        let h1 = Fields::H1 { buf: head, scratch: &scratch };
        let fields: [(&[u8], &[u8]); 4] =
            [(b"host", b"a"), (b"x-user", b"alice"), (b"cookie", b"a=1"), (b"cookie", b"b=2")];
        let head = gateway_h2::server::RequestHead::from_parts(b"GET", Some(b"http"), None, Some(b"/"), &fields);
        let h2 = Fields::H2Native(&head);
        for f in [h1, h2] {
            assert_eq!(f.first(b"x-user"), Some(&b"alice"[..]));
            assert_eq!(f.first(b"X-USER"), Some(&b"alice"[..]));
            assert_eq!(f.first(b"x-none"), None);
            let mut cookies = Vec::new();
            assert!(!f.any(b"cookie", |v| {
                cookies.push(v.to_vec());
                false
            }));
            assert_eq!(cookies, vec![b"a=1".to_vec(), b"b=2".to_vec()]);
            assert_eq!(f.len(), 4);
            assert_eq!(f.iter().count(), 4);
            assert!(f.is_hop_by_hop(b"Connection") && !f.is_hop_by_hop(b"x-user"));
        }
    }
}
