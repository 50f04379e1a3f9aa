//! `openssl s_time` output: new-session and (without `-new`) session-reuse blocks.

use serde::Serialize;

use super::parse::ParseError;

const TOOL: &str = "openssl s_time";

/// One s_time run: `new` is the block before `Now timing with session id reuse.`, `reuse` the
/// one after it (absent with `-new`; `new` is absent with `-reuse`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StimeReport {
    pub new: Option<StimeBlock>,
    pub reuse: Option<StimeBlock>,
}

/// `N connections in Us; R connections/user sec, bytes read B` and
/// `N connections in W real seconds, P bytes read per connection`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StimeBlock {
    pub connections: u64,
    /// CPU seconds of the s_time process itself.
    pub user_seconds: f64,
    pub connections_per_user_sec: f64,
    pub bytes_read: u64,
    /// Whole seconds of wall time, as printed.
    pub real_seconds: Option<u64>,
    pub bytes_per_connection: Option<u64>,
}

/// Parses one s_time run's output. Fails when it holds no statistics line (s_time prints
/// `ERROR` and the TLS error when it could not connect).
pub fn parse_stime(text: &str) -> Result<StimeReport, ParseError> {
    let (before, after) = match text.split_once("Now timing with session id reuse.") {
        Some((before, after)) => (before, Some(after)),
        None => (text, None),
    };
    let new = block(before)?;
    let reuse = after.map(block).transpose()?.flatten();
    if new.is_none() && reuse.is_none() {
        let first_error = text.lines().find(|l| l.contains("error") || l.starts_with("ERROR"));
        let hint = first_error.map(|l| format!(": {}", l.trim())).unwrap_or_default();
        return Err(ParseError::new(TOOL, format!("no `connections/user sec` line{hint}")));
    }
    Ok(StimeReport { new, reuse })
}

fn block(text: &str) -> Result<Option<StimeBlock>, ParseError> {
    let Some(line) = text.lines().map(str::trim).find(|l| l.contains("connections/user sec")) else {
        return Ok(None);
    };
    let bad = || ParseError::new(TOOL, format!("bad line `{line}`"));
    // 2192 connections in 1.44s; 1522.22 connections/user sec, bytes read 315648
    let (count, rest) = line.split_once(" connections in ").ok_or_else(bad)?;
    let (user, rest) = rest.split_once("s; ").ok_or_else(bad)?;
    let (rate, bytes) = rest.split_once(" connections/user sec, bytes read ").ok_or_else(bad)?;
    let mut parsed = StimeBlock {
        connections: count.trim().parse().map_err(|_| bad())?,
        user_seconds: user.trim().parse().map_err(|_| bad())?,
        connections_per_user_sec: rate.trim().parse().map_err(|_| bad())?,
        bytes_read: bytes.trim().parse().map_err(|_| bad())?,
        real_seconds: None,
        bytes_per_connection: None,
    };
    // 2192 connections in 3 real seconds, 144 bytes read per connection
    if let Some(real) = text.lines().map(str::trim).find(|l| l.contains(" real seconds, ")) {
        let bad = || ParseError::new(TOOL, format!("bad line `{real}`"));
        let (_, rest) = real.split_once(" connections in ").ok_or_else(bad)?;
        let (seconds, rest) = rest.split_once(" real seconds, ").ok_or_else(bad)?;
        let per_conn = rest.split_whitespace().next().ok_or_else(bad)?;
        parsed.real_seconds = Some(seconds.trim().parse().map_err(|_| bad())?);
        parsed.bytes_per_connection = Some(per_conn.parse().map_err(|_| bad())?);
    }
    Ok(Some(parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_sessions_only() {
        let r = parse_stime(include_str!("fixtures/stime-new.txt")).unwrap();
        let expected = StimeBlock {
            connections: 2192,
            user_seconds: 1.44,
            connections_per_user_sec: 1522.22,
            bytes_read: 315_648,
            real_seconds: Some(3),
            bytes_per_connection: Some(144),
        };
        assert_eq!(r, StimeReport { new: Some(expected), reuse: None });
    }

    #[test]
    fn new_and_reused_sessions() {
        let r = parse_stime(include_str!("fixtures/stime-both.txt")).unwrap();
        let new = r.new.unwrap();
        assert_eq!((new.connections, new.connections_per_user_sec, new.real_seconds), (1536, 1536.0, Some(2)));
        let reuse = r.reuse.unwrap();
        assert_eq!((reuse.connections, reuse.user_seconds, reuse.bytes_read), (2856, 0.80, 411_264));
    }

    #[test]
    fn bad_input_is_an_error_message() {
        let failed = "ERROR\n8003:error:0A00042E:SSL routines:ssl3_read_bytes:tlsv1 alert protocol version\n";
        let e = parse_stime(failed).unwrap_err();
        assert_eq!(e.message, "no `connections/user sec` line: ERROR");
        let e = parse_stime("12 connections in fast; 3 connections/user sec, bytes read 9").unwrap_err();
        assert!(e.message.starts_with("bad line"), "{e}");
        assert!(parse_stime("").is_err());
    }
}
