//! `server.server_header` and `routes[].hsts`.

use std::time::Duration;

use crate::locate::KeyPath;
use crate::model::Hsts;
use crate::problems::Problems;
use crate::raw::{IntOrStr, RawHsts};

/// One year, the least `max_age` that `preload` accepts (RFC 6797 §11.2 and the hstspreload.org
/// submission rules, which also require includeSubDomains).
const PRELOAD_MIN_AGE: Duration = Duration::from_secs(365 * 86_400);

/// The longest `max_age` accepted: ten years.
const MAX_AGE_LIMIT: Duration = Duration::from_secs(3650 * 86_400);

/// `server_header`: a field value of printable ASCII without leading or trailing whitespace;
/// `""` (remove the upstream's) is allowed.
pub(super) fn server_header(raw: Option<&String>, p: &mut Problems<'_>, path: &KeyPath) -> Option<String> {
    let text = raw?;
    let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    if !printable || text.trim() != text {
        p.at(
            path,
            format!(
                "server_header {text:?} must be printable ASCII without leading or trailing spaces \
                 (e.g. \"edge\"), or \"\" to send no Server field at all"
            ),
        );
    }
    Some(text.clone())
}

/// `hsts = { max_age, include_subdomains, preload }`.
pub(super) fn hsts(raw: &RawHsts, p: &mut Problems<'_>, path: &KeyPath) -> Option<Hsts> {
    let max_age = match &raw.max_age {
        IntOrStr::Str(text) => parse_age(text).map_err(|m| p.at(&path.key("max_age"), m)).ok()?,
        IntOrStr::Int(n) => {
            let m = format!("max_age needs a unit: write it as a string such as \"{n}s\" or \"365d\"");
            p.at(&path.key("max_age"), m);
            return None;
        }
    };
    let include_subdomains = raw.include_subdomains.unwrap_or(false);
    let preload = raw.preload.unwrap_or(false);
    if preload && max_age < PRELOAD_MIN_AGE {
        p.at(&path.key("max_age"), "with preload = true, max_age must be at least one year (\"365d\")");
    }
    if preload && !include_subdomains {
        p.at(&path.key("include_subdomains"), "preload = true requires include_subdomains = true");
    }
    Some(Hsts::new(max_age, include_subdomains, preload))
}

/// `"31536000s"`, `"525600m"`, `"8760h"`, `"365d"`: whole seconds from 1s to 3650d.
fn parse_age(text: &str) -> Result<Duration, String> {
    let help = "expected an integer followed by s, m, h or d (e.g. \"365d\", \"86400s\")";
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at_checked(digits).ok_or_else(|| format!("invalid max_age {text:?}: {help}"))?;
    let per_unit: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("invalid max_age {text:?}: {help}")),
    };
    let secs = number.parse::<u64>().map_err(|_| format!("invalid max_age {text:?}: {help}"))?;
    let age = secs.checked_mul(per_unit).map(Duration::from_secs).unwrap_or(Duration::MAX);
    if age.is_zero() {
        return Err(format!("max_age {text:?} must be greater than zero (to withdraw HSTS, leave hsts out)"));
    }
    if age > MAX_AGE_LIMIT {
        return Err(format!("max_age {text:?} is too large (at most \"3650d\")"));
    }
    Ok(age)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(parse_age("365d").unwrap(), PRELOAD_MIN_AGE);
        assert_eq!(parse_age("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("2h").unwrap(), Duration::from_secs(7200));
        for bad in ["0s", "0d", "1y", "d", "", "-1s", "1.5d", "3651d", "99999999999999999999s"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn value() {
        assert_eq!(Hsts::new(PRELOAD_MIN_AGE, true, true).value, "max-age=31536000; includeSubDomains; preload");
        assert_eq!(Hsts::new(Duration::from_secs(60), false, false).value, "max-age=60");
    }
}
