//! Sizes (`"64KiB"`) and durations (`"10s"`) as operators write them.
//!
//! Both are an unsigned decimal integer immediately followed by a unit: no sign, no fraction,
//! no space, no compound forms (`"1h30m"`). Zero and overflowing values are rejected, so every
//! parsed value is positive and exact.

use std::time::Duration;

use crate::defaults::MAX_DURATION;

const SIZE_HELP: &str = "expected an integer followed by B, KiB, MiB or GiB (e.g. \"512B\", \
                         \"64KiB\", \"16MiB\"), or a bare integer without quotes";
const DURATION_HELP: &str = "expected an integer followed by ms, s, m or h (e.g. \"250ms\", \"10s\", \"2m\", \"1h\")";

/// Parses a size with a binary unit into bytes: `"512B"`, `"8KiB"`, `"16MiB"`, `"1GiB"`.
/// The result is at least 1.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_number(text).ok_or_else(|| format!("invalid size {text:?}: {SIZE_HELP}"))?;
    let multiplier: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "" => return Err(format!("invalid size {text:?}: a quoted size needs a unit; {SIZE_HELP}")),
        "K" | "KB" | "kB" | "kb" | "M" | "MB" | "mb" | "G" | "GB" | "gb" | "k" | "m" | "g" => {
            return Err(format!("invalid size {text:?}: use binary units (KiB = 1024 bytes, MiB, GiB)"))
        }
        _ => return Err(format!("invalid size {text:?}: {SIZE_HELP}")),
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("size {text:?} is too large"))?;
    if bytes == 0 {
        return Err(format!("size {text:?} must be greater than zero"));
    }
    Ok(bytes)
}

/// A duration as the config writes it: `"250ms"`, `"15s"` (whole milliseconds).
pub fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Parses a duration: `"250ms"`, `"10s"`, `"2m"`, `"1h"`. The result is greater than zero and
/// at most [`MAX_DURATION`] (24h).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(text).ok_or_else(|| format!("invalid duration {text:?}: {DURATION_HELP}"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("invalid duration {text:?}: {DURATION_HELP}")),
    };
    let millis = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(millis_per_unit))
        .ok_or_else(|| format!("duration {text:?} is too large (at most 24h)"))?;
    let duration = Duration::from_millis(millis);
    if duration.is_zero() {
        return Err(format!("duration {text:?} must be greater than zero"));
    }
    if duration > MAX_DURATION {
        return Err(format!("duration {text:?} is too large (at most 24h)"));
    }
    Ok(duration)
}

/// Splits `"64KiB"` into `("64", "KiB")`; `None` when `text` does not start with a digit.
fn split_number(text: &str) -> Option<(&str, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    text.split_at_checked(digits)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("8KiB"), Ok(8192));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("16MiB"), Ok(16 * 1024 * 1024));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("0017B"), Ok(17));
    }

    #[test]
    fn bad_sizes() {
        for bad in [
            "", "0B", "0KiB", "KiB", "10", "10 KiB", " 10KiB", "10KiB ", "-1KiB", "+1KiB", "1.5KiB", "10kib", "10TiB",
            "10KiBs", "1e3B",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
        let decimal = parse_size("10KB").unwrap_err();
        assert!(decimal.contains("binary units"), "{decimal}");
        let no_unit = parse_size("10").unwrap_err();
        assert!(no_unit.contains("needs a unit"), "{no_unit}");
    }

    #[test]
    fn size_overflow() {
        assert!(parse_size("18446744073709551615B").is_ok());
        let err = parse_size("18446744073709551616B").unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let err = parse_size("17179869184GiB").unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("24h"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("1440m"), Ok(MAX_DURATION));
    }

    #[test]
    fn bad_durations() {
        for bad in [
            "", "0s", "0ms", "10", "10 s", " 10s", "10s ", "-1s", "+1s", "1.5s", "s", "10S", "10sec", "1h30m", "10us",
            "1d", "1e3ms",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        let zero = parse_duration("0s").unwrap_err();
        assert!(zero.contains("greater than zero"), "{zero}");
        let bare = parse_duration("10").unwrap_err();
        assert!(bare.contains("ms, s, m or h"), "{bare}");
    }

    #[test]
    fn duration_bounds_and_overflow() {
        for bad in ["25h", "86400001ms", "18446744073709551615h", "99999999999999999999999s"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("too large"), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn size_never_panics(text in ".*") {
            let _ = parse_size(&text);
        }

        #[test]
        fn duration_never_panics(text in ".*") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn size_roundtrip(n in 1u64..=(1 << 33), unit in 0usize..4) {
            let (suffix, mult) = [("B", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)]
                .get(unit).copied().unwrap_or(("B", 1));
            prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n * mult));
        }

        #[test]
        fn duration_digit_heavy_inputs_never_panic(text in "[0-9]{0,40}(ms|s|m|h|)") {
            if let Ok(d) = parse_duration(&text) {
                prop_assert!(!d.is_zero() && d <= MAX_DURATION);
            }
        }
    }
}
