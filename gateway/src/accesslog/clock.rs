//! Wall-clock timestamps for log lines, formatted once per second per worker.
//!
//! Times are UTC: `2000-10-10T13:55:36.123Z` in JSON and `10/Oct/2000:13:55:36 +0000` in the
//! Combined format. UTC needs no time-zone database on the request path and sorts the same on
//! every host.

use std::time::{SystemTime, UNIX_EPOCH};

use super::escape::push_padded;

const MONTHS: [&[u8; 3]; 12] =
    [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];

/// The formatted form of the last second seen; reformatted only when the second changes.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    second: Option<u64>,
    millis: u32,
    /// `2000-10-10T13:55:36` (no fraction, no zone).
    iso: Vec<u8>,
    /// `10/Oct/2000:13:55:36 +0000`.
    clf: Vec<u8>,
    /// How many times a second was formatted.
    #[cfg(test)]
    formats: u32,
}

impl Clock {
    /// Makes `t` the current time; times before 1970 count as 1970-01-01T00:00:00.
    pub(crate) fn set(&mut self, t: SystemTime) {
        let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let second = since.as_secs();
        self.millis = since.subsec_millis();
        if self.second != Some(second) {
            self.second = Some(second);
            self.format(second);
        }
    }

    /// `2000-10-10T13:55:36.123Z` for the current time.
    pub(crate) fn push_iso(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.iso);
        out.push(b'.');
        push_padded(out, u64::from(self.millis), 3);
        out.push(b'Z');
    }

    /// `10/Oct/2000:13:55:36 +0000` for the current time.
    pub(crate) fn push_clf(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.clf);
    }

    fn format(&mut self, second: u64) {
        #[cfg(test)]
        {
            self.formats += 1;
        }
        let (year, month, day) = civil_from_days(second / 86_400);
        let tod = second % 86_400;
        let (h, m, s) = (tod / 3600, tod / 60 % 60, tod % 60);

        self.iso.clear();
        push_padded(&mut self.iso, year, 4);
        self.iso.push(b'-');
        push_padded(&mut self.iso, month, 2);
        self.iso.push(b'-');
        push_padded(&mut self.iso, day, 2);
        self.iso.push(b'T');
        push_hms(&mut self.iso, h, m, s);

        self.clf.clear();
        push_padded(&mut self.clf, day, 2);
        self.clf.push(b'/');
        let name = usize::try_from(month - 1).ok().and_then(|i| MONTHS.get(i)).copied().unwrap_or(b"???");
        self.clf.extend_from_slice(name);
        self.clf.push(b'/');
        push_padded(&mut self.clf, year, 4);
        self.clf.push(b':');
        push_hms(&mut self.clf, h, m, s);
        self.clf.extend_from_slice(b" +0000");
    }
}

fn push_hms(out: &mut Vec<u8>, h: u64, m: u64, s: u64) {
    push_padded(out, h, 2);
    out.push(b':');
    push_padded(out, m, 2);
    out.push(b':');
    push_padded(out, s, 2);
}

/// Year, month (1..=12) and day (1..=31) of a day count since 1970-01-01 (proleptic Gregorian;
/// Howard Hinnant's `civil_from_days`, restricted to non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, millis: u64) -> (String, String) {
        let mut c = Clock::default();
        c.set(UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis));
        let (mut iso, mut clf) = (Vec::new(), Vec::new());
        c.push_iso(&mut iso);
        c.push_clf(&mut clf);
        (String::from_utf8(iso).unwrap(), String::from_utf8(clf).unwrap())
    }

    #[test]
    fn known_instants() {
        assert_eq!(at(0, 0), ("1970-01-01T00:00:00.000Z".into(), "01/Jan/1970:00:00:00 +0000".into()));
        // 2000-10-10T13:55:36Z, the CLF example instant.
        assert_eq!(at(971_186_136, 7), ("2000-10-10T13:55:36.007Z".into(), "10/Oct/2000:13:55:36 +0000".into()));
        // A leap day and the last second of a year.
        assert_eq!(at(951_782_400, 999).0, "2000-02-29T00:00:00.999Z");
        assert_eq!(at(1_704_067_199, 0).1, "31/Dec/2023:23:59:59 +0000");
    }

    #[test]
    fn every_day_for_a_few_centuries_is_consecutive() {
        // Day numbers map to strictly increasing, valid (y, m, d) with no gaps.
        let mut prev = civil_from_days(0);
        for d in 1..(400 * 366) {
            let cur = civil_from_days(d);
            let next_day = (prev.0, prev.1, prev.2 + 1);
            let next_month = (prev.0, prev.1 + 1, 1);
            let next_year = (prev.0 + 1, 1, 1);
            assert!(cur == next_day || cur == next_month || cur == next_year, "{prev:?} -> {cur:?}");
            assert!((1..=12).contains(&cur.1) && (1..=31).contains(&cur.2));
            prev = cur;
        }
    }

    #[test]
    fn reformats_only_on_a_new_second() {
        let mut c = Clock::default();
        let mut iso = Vec::new();
        for (ms, want_formats, want) in [
            (971_186_136_100, 1, "2000-10-10T13:55:36.100Z"),
            (971_186_136_900, 1, "2000-10-10T13:55:36.900Z"),
            (971_186_137_000, 2, "2000-10-10T13:55:37.000Z"),
        ] {
            c.set(UNIX_EPOCH + Duration::from_millis(ms));
            iso.clear();
            c.push_iso(&mut iso);
            assert_eq!(std::str::from_utf8(&iso).unwrap(), want);
            assert_eq!(c.formats, want_formats);
        }
    }
}
