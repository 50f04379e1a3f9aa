//! `GET /logging` shows the log filter in force; `POST /logging` replaces it (tracing's
//! `RUST_LOG` syntax), from the request body (`info,gateway::pipeline=debug`) or from a
//! `filter=` or `level=` query parameter.

use gateway_admin::{Request, Response};

pub fn show() -> Response {
    match crate::logging::filter() {
        Some(filter) => Response::json(200, &serde_json::json!({ "filter": filter })),
        None => Response::text(503, "the log of this process is not managed by the gateway\n"),
    }
}

pub fn change(req: &Request) -> Response {
    let from_query = req.query.as_deref().and_then(|q| {
        q.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            matches!(key, "filter" | "level").then(|| percent_decode(value))
        })
    });
    let directives = match from_query {
        Some(Some(d)) => d,
        Some(None) => return Response::text(400, "the filter is not valid percent-encoded UTF-8\n"),
        None => match std::str::from_utf8(&req.body) {
            Ok(body) => body.trim().to_owned(),
            Err(_) => return Response::text(400, "the filter is not UTF-8\n"),
        },
    };
    match crate::logging::set_filter(&directives) {
        Ok(filter) => Response::json(200, &serde_json::json!({ "filter": filter })),
        Err(message) if crate::logging::filter().is_none() => Response::text(503, format!("{message}\n")),
        Err(message) => Response::text(400, format!("{message}\n")),
    }
}

/// `%XX` and `+` decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_query_values() {
        assert_eq!(super::percent_decode("info%2Cgateway%3Ddebug").as_deref(), Some("info,gateway=debug"));
        assert_eq!(super::percent_decode("debug").as_deref(), Some("debug"));
        assert_eq!(super::percent_decode("%zz"), None);
        assert_eq!(super::percent_decode("%4"), None);
    }
}
