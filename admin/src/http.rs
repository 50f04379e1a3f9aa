//! The admin server's HTTP/1.1: one request per connection, parsed from the bytes read so far,
//! and the response bytes written back.

use crate::{Request, Response};

/// Largest admin request head accepted.
pub const MAX_HEAD: usize = 8 * 1024;
/// Largest admin request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

/// Parses one request from the bytes read so far: its head and, per `Content-Length`, its body
/// (bytes past the body are ignored).
///
/// `Ok(None)`: the head or the body is incomplete and within limits; read more and call again
/// with the longer buffer. `Err(status)`: refuse the request with that status (400 malformed,
/// 413 body over [`MAX_BODY`], 431 head over [`MAX_HEAD`] or too many fields, 501
/// `Transfer-Encoding`). Never panics.
pub fn parse_request(buf: &[u8]) -> Result<Option<Request>, u16> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(head_len)) => head_len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(431),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(431),
        Err(_) => return Err(400),
    };
    let mut out = Request {
        method: req.method.unwrap_or_default().to_string(),
        path: String::new(),
        query: None,
        headers: req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
            .collect(),
        body: Vec::new(),
    };
    let target = req.path.unwrap_or("/");
    match target.split_once('?') {
        Some((p, q)) => {
            out.path = p.to_string();
            out.query = Some(q.to_string());
        }
        None => out.path = target.to_string(),
    }
    if out.header("transfer-encoding").is_some() {
        return Err(501);
    }
    let len: usize = match out.header("content-length") {
        Some(v) => v.trim().parse().map_err(|_| 400u16)?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(413);
    }
    let Some(body) = buf.get(head_len..).and_then(|rest| rest.get(..len)) else {
        return Ok(None);
    };
    out.body = body.to_vec();
    Ok(Some(out))
}

/// The plain-text answer for a refused request.
pub(crate) fn error_response(status: u16) -> Response {
    Response::text(status, format!("{}\n", reason(status)))
}

/// The whole response, head and body; the connection is closed after it.
pub(crate) fn encode(r: &Response) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    let mut out = Vec::with_capacity(head.len() + r.body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(&r.body);
    out
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_request_waits_for_head_and_body_and_refuses_bad_input() {
        let full = b"POST /echo?x=1 HTTP/1.1\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhelloNEXT";
        for cut in 0..full.len() - 4 {
            assert_eq!(parse_request(&full[..cut]), Ok(None), "cut at {cut}");
        }
        let req = parse_request(full).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("incomplete"));
        assert_eq!((req.method.as_str(), req.path.as_str(), req.query.as_deref()), ("POST", "/echo", Some("x=1")));
        assert_eq!(req.header("x-a"), Some("b"));
        assert_eq!(req.body, b"hello");
        assert_eq!(parse_request(b"GARBAGE\r\n\r\n"), Err(400));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n"), Err(400));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"), Err(501));
        assert_eq!(parse_request(b"GET / HTTP/1.1\r\ncontent-length: 65537\r\n\r\n"), Err(413));
        let mut big = b"GET / HTTP/1.1\r\nx: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        assert_eq!(parse_request(&big), Err(431));
    }

    #[test]
    fn encode_writes_status_length_and_close() {
        let bytes = encode(&Response::text(503, "busy\n"));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{text}");
        assert!(text.contains("\r\ncontent-length: 5\r\n") && text.contains("\r\nconnection: close\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nbusy\n"), "{text}");
    }
}
