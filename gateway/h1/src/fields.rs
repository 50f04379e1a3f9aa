//! Field lines: one pass records where each is and gathers the facts that framing, routing and
//! the connection depend on (Content-Length, Transfer-Encoding, Host, Connection, Expect,
//! Upgrade), refusing values that a peer could read differently.

use std::ops::Range;

use super::classes::{has, TOKEN};
use super::{crlf_before, span, HeadScratch, HeaderRange, BARE_LF};

/// The framing-, routing- and connection-relevant facts of a head's fields.
#[derive(Debug, Default)]
pub(super) struct Fields {
    pub(super) content_length: Option<u64>,
    pub(super) te: Te,
    pub(super) hosts: usize,
    pub(super) host: Option<Range<usize>>,
    pub(super) close: bool,
    pub(super) keep_alive: bool,
    pub(super) expect: Expect,
    pub(super) upgrade: bool,
    /// An `Upgrade` field lists the `websocket` protocol (RFC 6455 §4.1).
    pub(super) upgrade_websocket: bool,
    /// A `Connection` field lists the `upgrade` option.
    pub(super) connection_upgrade: bool,
}

/// Transfer-Encoding over all its field lines: only one single `chunked` is understood.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Te {
    #[default]
    Absent,
    Chunked,
    Other,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    #[default]
    Absent,
    Continue,
    Other,
}

/// One pass over the field lines: records their ranges in `scratch`, checks that every line of
/// the head ends in CRLF, and gathers [`Fields`].
pub(super) fn scan_fields(
    buf: &[u8],
    head_len: usize,
    headers: &[httparse::Header<'_>],
    scratch: &mut HeadScratch,
) -> Result<Fields, &'static str> {
    let mut fields = Fields::default();
    for header in headers {
        let name = span(buf, header.name.as_bytes());
        let value = span(buf, header.value);
        // httparse ends lines at LF and refuses a CR not followed by LF, so a line ends in CRLF
        // exactly when CR precedes the LF before the next line.
        if !crlf_before(buf, name.start) {
            return Err(BARE_LF);
        }
        let index = scratch.headers.len();
        scratch.headers.push(HeaderRange {
            name_start: name.start,
            name_end: name.end,
            value_start: value.start,
            value_end: value.end,
        });
        fields.note(header.name.as_bytes(), header.value, value, index, &mut scratch.connection)?;
    }
    // The last field line (or the start line) and the empty line.
    if !crlf_before(buf, head_len.saturating_sub(2)) || !crlf_before(buf, head_len) {
        return Err(BARE_LF);
    }
    Ok(fields)
}

impl Fields {
    fn note(
        &mut self,
        name: &[u8],
        value: &[u8],
        value_range: Range<usize>,
        index: usize,
        connection: &mut Vec<usize>,
    ) -> Result<(), &'static str> {
        let is = |known: &[u8]| crate::eq_lower(name, known);
        match name.len() {
            4 if is(b"host") => {
                self.hosts += 1;
                self.host = Some(value_range);
            }
            6 if is(b"expect") => {
                self.expect = match self.expect {
                    Expect::Absent | Expect::Continue if crate::eq_lower(value, b"100-continue") => Expect::Continue,
                    _ => Expect::Other,
                };
            }
            7 if is(b"upgrade") => {
                self.upgrade = true;
                // `Upgrade = #protocol`, protocol = name ["/" version]; WebSocket has no version.
                self.upgrade_websocket |= list_elements(value).any(|p| crate::eq_lower(p, b"websocket"));
            }
            10 if is(b"connection") => {
                // Only a field that names more than the fixed hop-by-hop fields (`keep-alive`
                // is one) needs looking at again for each field of the head.
                connection.extend(self.note_connection(value)?.then_some(index));
            }
            14 if is(b"content-length") => {
                let n = content_length(value).ok_or("invalid Content-Length")?;
                if self.content_length.is_some_and(|m| m != n) {
                    return Err("conflicting Content-Length");
                }
                self.content_length = Some(n);
            }
            17 if is(b"transfer-encoding") => {
                self.te = match self.te {
                    Te::Absent if crate::eq_lower(value, b"chunked") => Te::Chunked,
                    _ => Te::Other,
                };
            }
            _ => {}
        }
        Ok(())
    }

    /// `Connection = #connection-option` (RFC 9110 §7.6.1). Naming Host or Content-Length would
    /// let a hop strip the fields that route and frame the message, so it is refused. True when
    /// an option is not one of the fixed hop-by-hop fields (`close` is not).
    fn note_connection(&mut self, value: &[u8]) -> Result<bool, &'static str> {
        let mut names_more = false;
        for option in list_elements(value) {
            names_more |= !super::is_fixed_hop_by_hop(option);
            if !option.iter().all(|&b| has(b, TOKEN)) {
                return Err("invalid Connection option");
            }
            if crate::eq_lower(option, b"close") {
                self.close = true;
            } else if crate::eq_lower(option, b"keep-alive") {
                self.keep_alive = true;
            } else if crate::eq_lower(option, b"upgrade") {
                self.connection_upgrade = true;
            } else if crate::eq_lower(option, b"host") || crate::eq_lower(option, b"content-length") {
                return Err("Connection names an end-to-end field");
            }
        }
        Ok(names_more)
    }
}

/// `Content-Length = 1*DIGIT` that fits in a u64; no sign, no list, no inner whitespace.
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// The non-empty elements of a `#rule` list, without surrounding whitespace.
pub(super) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows).filter(|e| !e.is_empty())
}

fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}
