//! Request framing and connection semantics (RFC 9112 sections 6, 7 and 9): pure functions over
//! parsed header fields and lines.

use super::request::Head;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    Length(u64),
    Chunked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    pub body: BodyFraming,
    /// Both Content-Length and Transfer-Encoding were sent: RFC 9112 6.1 says to use the
    /// chunked framing and close the connection after answering.
    pub must_close: bool,
}

impl Framing {
    pub fn has_body(&self) -> bool {
        self.body != BodyFraming::Length(0)
    }
}

/// The request body framing from RFC 9112 section 6: Transfer-Encoding wins over
/// Content-Length and must end in `chunked`; Content-Length values must all agree.
pub(crate) fn framing(headers: &[(String, String)]) -> Result<Framing, &'static str> {
    let mut te_present = false;
    let mut codings = Vec::new();
    let mut lengths = Vec::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            te_present = true;
            codings.extend(value.split(',').map(str::trim).filter(|c| !c.is_empty()));
        } else if name.eq_ignore_ascii_case("content-length") {
            lengths.extend(value.split(',').map(str::trim));
        }
    }
    if te_present {
        let chunked = |c: &str| c.eq_ignore_ascii_case("chunked");
        let last_is_chunked = codings.last().is_some_and(|c| chunked(c));
        if !last_is_chunked || codings.iter().filter(|c| chunked(c)).count() != 1 {
            return Err("transfer-encoding does not end in a single chunked");
        }
        return Ok(Framing { body: BodyFraming::Chunked, must_close: !lengths.is_empty() });
    }
    let mut length: Option<u64> = None;
    for value in lengths {
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid content-length");
        }
        let value = value.parse::<u64>().map_err(|_| "content-length too large")?;
        if length.is_some_and(|l| l != value) {
            return Err("conflicting content-length values");
        }
        length = Some(value);
    }
    Ok(Framing { body: BodyFraming::Length(length.unwrap_or(0)), must_close: false })
}

/// (close after the answer, HTTP/1.0 keep-alive to confirm).
pub(crate) fn connection_semantics(head: &Head) -> (bool, bool) {
    let has = |token: &str| {
        head.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if head.version == 0 {
        let keep_alive = has("keep-alive") && !has("close");
        (!keep_alive, keep_alive)
    } else {
        (has("close"), false)
    }
}

pub(crate) fn expects_continue(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("expect") && v.trim().eq_ignore_ascii_case("100-continue"))
}

/// `1a;name=value` -> 26. Hex digits, then optional whitespace and extensions.
pub(crate) fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits_end = line.iter().position(|b| !b.is_ascii_hexdigit()).unwrap_or(line.len());
    let (digits, rest) = line.split_at(digits_end);
    let rest = rest.trim_ascii_start();
    if digits.is_empty() || !(rest.is_empty() || rest.starts_with(b";")) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// `name: value` -> (name, value); the name must be a token.
pub(crate) fn field(line: &[u8]) -> Option<(String, String)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let (name, value) = line.split_at(colon);
    let is_tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if name.is_empty() || !name.iter().all(is_tchar) {
        return None;
    }
    let value = value.get(1..).unwrap_or_default().trim_ascii();
    Some((String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let length = |n| Ok(Framing { body: BodyFraming::Length(n), must_close: false });
        assert_eq!(framing(&headers(&[])), length(0));
        assert_eq!(framing(&headers(&[("Content-Length", "12")])), length(12));
        assert_eq!(framing(&headers(&[("content-length", "5, 5"), ("Content-Length", "5")])), length(5));
        assert!(framing(&headers(&[("content-length", "5"), ("content-length", "6")])).is_err());
        assert!(framing(&headers(&[("content-length", "+5")])).is_err());
        assert!(framing(&headers(&[("content-length", "")])).is_err());
        assert!(framing(&headers(&[("content-length", "99999999999999999999999")])).is_err());
        assert_eq!(
            framing(&headers(&[("Transfer-Encoding", "gzip, Chunked")])),
            Ok(Framing { body: BodyFraming::Chunked, must_close: false })
        );
        assert_eq!(
            framing(&headers(&[("content-length", "3"), ("transfer-encoding", "chunked")])),
            Ok(Framing { body: BodyFraming::Chunked, must_close: true })
        );
        assert!(framing(&headers(&[("transfer-encoding", "chunked, gzip")])).is_err());
        assert!(framing(&headers(&[("transfer-encoding", "chunked, chunked")])).is_err());
        assert!(framing(&headers(&[("transfer-encoding", "")])).is_err());
    }

    #[test]
    fn chunk_size_lines() {
        assert_eq!(chunk_size(b"0"), Some(0));
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"FF;name=value"), Some(255));
        assert_eq!(chunk_size(b"10 ;x"), Some(16));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b"zz"), None);
        assert_eq!(chunk_size(b"10 x"), None);
        assert_eq!(chunk_size(b"-1"), None);
        assert_eq!(chunk_size(b"1ffffffffffffffff"), None);
    }

    #[test]
    fn trailer_fields() {
        assert_eq!(field(b"X-Sum:  abc "), Some(("X-Sum".into(), "abc".into())));
        assert_eq!(field(b"x:"), Some(("x".into(), String::new())));
        assert_eq!(field(b"bad name: v"), None);
        assert_eq!(field(b": v"), None);
        assert_eq!(field(b"no colon"), None);
    }

    #[test]
    fn connection_tokens() {
        let head = |version, list: &[(&str, &str)]| Head {
            method: "GET".into(),
            target: "/".into(),
            version,
            headers: headers(list),
        };
        assert_eq!(connection_semantics(&head(1, &[])), (false, false));
        assert_eq!(connection_semantics(&head(1, &[("Connection", "foo, Close")])), (true, false));
        assert_eq!(connection_semantics(&head(0, &[])), (true, false));
        assert_eq!(connection_semantics(&head(0, &[("connection", "keep-alive")])), (false, true));
    }
}
