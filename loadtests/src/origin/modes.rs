//! What the origin does with a request, chosen from its path and two override headers.
//!
//! | path | answer |
//! | --- | --- |
//! | `/status/{code}` | that status (200..=599), body `status {code}\n` |
//! | `/bytes/{n}` | `n` pattern bytes, Content-Length framed |
//! | `/delay/{ms}` | waits, then the default answer |
//! | `/chunked/{n}` | `n` pattern bytes in chunks of varying size, then a trailer |
//! | `/echo` | the request body back, `x-origin-saw-te: chunked` if it came chunked |
//! | `/headers` | the request header fields, one `name: value` line each |
//! | `/close` | the default answer with `Connection: close`, then closes |
//! | `/ws/echo` | a WebSocket handshake answered 101, then every byte echoed (426 without one) |
//! | `/bad/{what}` | a misbehaviour, see [`Bad`] |
//! | anything else | the default answer (configured status and body) |
//!
//! `x-origin-status: {code}` overrides the status of every well-behaved answer and
//! `x-origin-delay-ms: {ms}` adds a delay before any answer.

use std::time::Duration;

/// What to answer, before the configured latency and the header overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Default,
    Status(u16),
    Bytes(u64),
    Delay(Duration),
    Chunked(u64),
    Echo,
    Headers,
    Close,
    /// `/ws/echo`: see `ws.rs`.
    WsEcho,
    Bad(Bad),
}

/// Misbehaviours for the gateway's upstream-strictness tests. Each closes the connection after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// `/bad/close-mid-body`: Content-Length 1000, 10 body bytes, close.
    CloseMidBody,
    /// `/bad/cl-and-te`: both Content-Length and `Transfer-Encoding: chunked`.
    ClAndTe,
    /// `/bad/dup-cl`: two different Content-Length fields.
    DupCl,
    /// `/bad/chunked`: an invalid chunk size line.
    Chunked,
    /// `/bad/garbage`: bytes that are not an HTTP response.
    Garbage,
    /// `/bad/no-response`: closes without answering.
    NoResponse,
    /// `/bad/huge-head`: a response head with a 100 KiB header field.
    HugeHead,
    /// `/bad/stall`: never answers; the connection stays open until the origin shuts down.
    Stall,
    /// `/bad/until-close`: no Content-Length, no Transfer-Encoding: 1000 pattern bytes, close.
    UntilClose,
    /// `/bad/switch`: `101 Switching Protocols` to WebSocket whatever was asked, then close.
    Switch,
}

/// The decision for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub mode: Mode,
    /// From `x-origin-status`.
    pub status: Option<u16>,
    /// From `/delay/{ms}` and `x-origin-delay-ms`, added up.
    pub delay: Duration,
}

/// A request the origin cannot act on: answered with this status and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub status: u16,
    pub message: &'static str,
}

pub(crate) fn plan(target: &str, headers: &[(String, String)]) -> Result<Plan, Rejection> {
    let mode = mode(path(target))?;
    let header = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
    let status = match header("x-origin-status") {
        Some(v) => Some(status(v).ok_or(reject(400, "x-origin-status is not 200 to 599"))?),
        None => None,
    };
    let mut delay = match mode {
        Mode::Delay(d) => d,
        _ => Duration::ZERO,
    };
    if let Some(v) = header("x-origin-delay-ms") {
        let ms = number(v).ok_or(reject(400, "x-origin-delay-ms is not a number"))?;
        delay = delay.saturating_add(Duration::from_millis(ms));
    }
    Ok(Plan { mode, status, delay })
}

fn mode(path: &str) -> Result<Mode, Rejection> {
    if let Some(code) = path.strip_prefix("/status/") {
        return status(code).map(Mode::Status).ok_or(reject(400, "status is not 200 to 599"));
    }
    if let Some(n) = path.strip_prefix("/bytes/") {
        return number(n).map(Mode::Bytes).ok_or(reject(400, "byte count is not a number"));
    }
    if let Some(ms) = path.strip_prefix("/delay/") {
        return number(ms)
            .map(|ms| Mode::Delay(Duration::from_millis(ms)))
            .ok_or(reject(400, "delay is not a number of milliseconds"));
    }
    if let Some(n) = path.strip_prefix("/chunked/") {
        return number(n).map(Mode::Chunked).ok_or(reject(400, "byte count is not a number"));
    }
    if let Some(what) = path.strip_prefix("/bad/") {
        return bad(what).map(Mode::Bad).ok_or(reject(404, "no such misbehaviour"));
    }
    Ok(match path {
        "/echo" => Mode::Echo,
        "/headers" => Mode::Headers,
        "/close" => Mode::Close,
        "/ws/echo" => Mode::WsEcho,
        _ => Mode::Default,
    })
}

fn bad(what: &str) -> Option<Bad> {
    Some(match what {
        "close-mid-body" => Bad::CloseMidBody,
        "cl-and-te" => Bad::ClAndTe,
        "dup-cl" => Bad::DupCl,
        "chunked" => Bad::Chunked,
        "garbage" => Bad::Garbage,
        "no-response" => Bad::NoResponse,
        "huge-head" => Bad::HugeHead,
        "stall" => Bad::Stall,
        "until-close" => Bad::UntilClose,
        "switch" => Bad::Switch,
        _ => return None,
    })
}

/// The path of a request target: origin-form without its query, or the path of absolute-form.
fn path(target: &str) -> &str {
    let target = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').and_then(|at| rest.get(at..)).unwrap_or("/"),
        None => target,
    };
    target.split(['?', '#']).next().unwrap_or(target)
}

fn status(s: &str) -> Option<u16> {
    number(s).and_then(|n| u16::try_from(n).ok()).filter(|n| (200..=599).contains(n))
}

/// Plain decimal digits only (no sign, no spaces).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

const fn reject(status: u16, message: &'static str) -> Rejection {
    Rejection { status, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(target: &str) -> Result<Plan, Rejection> {
        plan(target, &[])
    }

    fn mode_of(target: &str) -> Result<Mode, Rejection> {
        plan_of(target).map(|p| p.mode)
    }

    #[test]
    fn paths_select_modes() {
        assert_eq!(mode_of("/"), Ok(Mode::Default));
        assert_eq!(mode_of("/api/v1?x=1"), Ok(Mode::Default));
        assert_eq!(mode_of("/status/503"), Ok(Mode::Status(503)));
        assert_eq!(mode_of("/bytes/1048576?cache=no"), Ok(Mode::Bytes(1 << 20)));
        assert_eq!(mode_of("/chunked/0"), Ok(Mode::Chunked(0)));
        assert_eq!(mode_of("/echo"), Ok(Mode::Echo));
        assert_eq!(mode_of("/headers"), Ok(Mode::Headers));
        assert_eq!(mode_of("/close"), Ok(Mode::Close));
        assert_eq!(mode_of("/ws/echo"), Ok(Mode::WsEcho));
        assert_eq!(mode_of("/bad/switch"), Ok(Mode::Bad(Bad::Switch)));
        assert_eq!(mode_of("/bad/stall"), Ok(Mode::Bad(Bad::Stall)));
        assert_eq!(mode_of("/bad/until-close"), Ok(Mode::Bad(Bad::UntilClose)));
        assert_eq!(mode_of("http://example.com/bytes/3"), Ok(Mode::Bytes(3)));
        assert_eq!(mode_of("http://example.com"), Ok(Mode::Default));
        let delay = plan_of("/delay/250");
        assert_eq!(delay.map(|p| p.delay), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn bad_arguments_are_rejected() {
        assert_eq!(mode_of("/status/99").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/status/600").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/status/70000").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/bytes/-1").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/bytes/").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/delay/1s").map_err(|r| r.status), Err(400));
        assert_eq!(mode_of("/bad/whatever").map_err(|r| r.status), Err(404));
    }

    #[test]
    fn headers_override_status_and_add_delay() {
        let headers = vec![
            ("X-Origin-Status".to_string(), "418".to_string()),
            ("x-origin-delay-ms".to_string(), " 20 ".to_string()),
        ];
        let plan = plan("/delay/100", &headers);
        assert_eq!(
            plan,
            Ok(Plan {
                mode: Mode::Delay(Duration::from_millis(100)),
                status: Some(418),
                delay: Duration::from_millis(120),
            })
        );
        let bad_status = vec![("x-origin-status".to_string(), "abc".to_string())];
        assert_eq!(super::plan("/", &bad_status).map_err(|r| r.status), Err(400));
    }
}
