//! The standard `process_*` metrics of Prometheus client libraries, read from `/proc/self` at
//! scrape time: CPU seconds, resident and virtual memory, open and maximum file descriptors,
//! start time. A value that cannot be read (not Linux, `/proc` not mounted) is left out.

/// The process's resource use at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    /// Unix seconds.
    pub start_time: Option<f64>,
}

impl ProcessStats {
    /// Reads this process's values.
    pub fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let status = std::fs::read_to_string("/proc/self/status").ok();
        let ticks = clock_ticks();
        let fields = stat.as_deref().and_then(stat_fields);
        let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| boot_time(&s));
        Self {
            cpu_seconds: fields.as_ref().map(|f| (f.utime + f.stime) as f64 / ticks),
            resident_bytes: status.as_deref().and_then(|s| status_kib(s, "VmRSS:")).map(|k| k * 1024),
            virtual_bytes: status.as_deref().and_then(|s| status_kib(s, "VmSize:")).map(|k| k * 1024),
            open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count().saturating_sub(1) as u64),
            max_fds: std::fs::read_to_string("/proc/self/limits").ok().and_then(|l| max_open_files(&l)),
            start_time: fields.zip(boot).map(|(f, b)| b as f64 + f.start_ticks as f64 / ticks),
        }
    }
}

struct StatFields {
    utime: u64,
    stime: u64,
    start_ticks: u64,
}

/// utime, stime and starttime of `/proc/self/stat` (fields 14, 15 and 22; the command name in
/// field 2 may hold spaces and parentheses, so counting starts after its last `)`).
fn stat_fields(stat: &str) -> Option<StatFields> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut it = rest.split_whitespace();
    // `rest` starts at field 3 (state).
    let utime = it.nth(11)?.parse().ok()?;
    let stime = it.next()?.parse().ok()?;
    let start_ticks = it.nth(6)?.parse().ok()?;
    Some(StatFields { utime, stime, start_ticks })
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().next()?.parse().ok()
}

fn boot_time(stat: &str) -> Option<u64> {
    stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

fn max_open_files(limits: &str) -> Option<u64> {
    limits.lines().find_map(|l| l.strip_prefix("Max open files"))?.split_whitespace().next()?.parse().ok()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the system; no memory is touched.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_formats() {
        let stat = "4242 (gw (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 5 0 123456 1000000 500";
        let f = stat_fields(stat).unwrap();
        assert_eq!((f.utime, f.stime, f.start_ticks), (250, 50, 123456));
        assert_eq!(status_kib("Name:\tgw\nVmSize:\t  2048 kB\nVmRSS:\t 1024 kB\n", "VmRSS:"), Some(1024));
        assert_eq!(boot_time("cpu 1 2\nbtime 1764547200\n"), Some(1_764_547_200));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[test]
    fn reads_this_process() {
        let s = ProcessStats::read();
        if !std::path::Path::new("/proc/self/stat").exists() {
            eprintln!("skipped: no /proc");
            return;
        }
        assert!(s.resident_bytes.unwrap() > 0);
        assert!(s.open_fds.unwrap() >= 3);
        assert!(s.max_fds.unwrap() >= s.open_fds.unwrap());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = s.start_time.unwrap();
        assert!(start <= now + 1.0 && start > now - 86_400.0 * 365.0, "{start} vs {now}");
        assert!(s.cpu_seconds.unwrap() >= 0.0);
    }
}
