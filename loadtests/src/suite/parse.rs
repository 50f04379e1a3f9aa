//! Parsers for the load tools' text output, and the unit conversions they share.
//!
//! Each parser takes the whole captured output (stdout and stderr together, as the bench scripts
//! write it) and returns a typed report, or a [`ParseError`] saying which tool's output did not
//! parse and why. Durations come out in microseconds, sizes in bytes.

use std::fmt;

pub use super::h2load::{parse_h2load, H2loadReport, H2loadTimes};
pub use super::stime::{parse_stime, StimeBlock, StimeReport};
pub use super::wrk::{parse_wrk, SocketErrors, ThreadStat, WrkReport};

/// Output of a load tool that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// `wrk`, `h2load` or `openssl s_time`.
    pub tool: &'static str,
    /// What was missing or malformed, with the offending text where there is one.
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(tool: &'static str, message: impl Into<String>) -> Self {
        Self { tool, message: message.into() }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} output: {}", self.tool, self.message)
    }
}

impl std::error::Error for ParseError {}

/// `614.83us`, `1.16ms`, `2.00s`, `1.50m`, `1h` (wrk and h2load) as microseconds.
pub fn duration_us(text: &str) -> Option<f64> {
    let (number, unit) = split_unit(text)?;
    let scale = match unit {
        "ns" => 0.001,
        "us" | "µs" => 1.0,
        "ms" => 1_000.0,
        "s" => 1_000_000.0,
        "m" => 60_000_000.0,
        "h" => 3_600_000_000.0,
        _ => return None,
    };
    Some(number * scale)
}

/// `28.22MB`, `100.98KB`, `874B` (binary multiples, as wrk and h2load print them) as bytes.
pub fn size_bytes(text: &str) -> Option<f64> {
    let (number, unit) = split_unit(text)?;
    let scale = match unit {
        "B" | "" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number * scale)
}

/// `99.92k`, `1.60k`, `2.1M`, `512` (wrk's decimal multiples) as a plain number.
pub fn metric(text: &str) -> Option<f64> {
    let (number, unit) = split_unit(text)?;
    let scale = match unit {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        _ => return None,
    };
    Some(number * scale)
}

/// `97.21%` as 97.21.
pub fn percent(text: &str) -> Option<f64> {
    text.strip_suffix('%')?.parse().ok()
}

/// Splits `12.5ms` into `(12.5, "ms")`; `None` without a leading number.
fn split_unit(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    Some((number.parse().ok()?, unit))
}

/// The text after `prefix` on the first line that starts with it (after indentation).
pub(crate) fn line_after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find_map(|line| line.trim_start().strip_prefix(prefix))
}

/// The integer right before `label` in comma-separated `N label` lists such as
/// `20000 total, 20000 started` or `connect 0, read 3` (`label_first`).
pub(crate) fn count_in(list: &str, label: &str, label_first: bool) -> Option<u64> {
    list.split(',').find_map(|item| {
        let mut words = item.split_whitespace();
        let (a, b) = (words.next()?, words.next()?);
        let (name, value) = if label_first { (a, b) } else { (b, a) };
        (name == label).then(|| value.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(duration_us("614.83us"), Some(614.83));
        assert_eq!(duration_us("1.16ms"), Some(1160.0));
        assert_eq!(duration_us("2.00s"), Some(2_000_000.0));
        assert_eq!(duration_us("1.50m"), Some(90_000_000.0));
        assert_eq!(duration_us("12"), None);
        assert_eq!(duration_us("ms"), None);
        assert_eq!(duration_us("1.2parsecs"), None);
    }

    #[test]
    fn sizes_metrics_and_percents() {
        assert_eq!(size_bytes("1.00KB"), Some(1024.0));
        assert_eq!(size_bytes("874B"), Some(874.0));
        assert_eq!(size_bytes("2.00MB"), Some(2.0 * 1024.0 * 1024.0));
        assert_eq!(size_bytes("3XB"), None);
        assert_eq!(metric("99.92k"), Some(99_920.0));
        assert_eq!(metric("512"), Some(512.0));
        assert_eq!(percent("85.42%"), Some(85.42));
        assert_eq!(percent("85.42"), None);
    }

    #[test]
    fn counts_in_lists() {
        let list = "20000 total, 4028 started, 0 timeout";
        assert_eq!(count_in(list, "started", false), Some(4028));
        assert_eq!(count_in(list, "timeout", false), Some(0));
        assert_eq!(count_in(list, "done", false), None);
        assert_eq!(count_in("connect 0, read 31999", "read", true), Some(31999));
    }
}
