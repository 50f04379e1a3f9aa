//! How many workers `workers = "auto"` means: CPUs allowed by the affinity mask, capped by the
//! cgroup v2 `cpu.max` quota (rounded up).

use std::path::Path;

/// The CPUs this process may run on, and what the cgroup quota allows.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuBudget {
    /// Core ids in the affinity mask.
    pub allowed: Vec<usize>,
    /// `quota / period` from cgroup `cpu.max`, if a quota is set.
    pub quota: Option<f64>,
}

impl CpuBudget {
    pub fn detect() -> Self {
        let allowed = core_affinity::get_core_ids()
            .map(|ids| ids.into_iter().map(|c| c.id).collect::<Vec<_>>())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect());
        Self { allowed, quota: cgroup_quota(Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup")) }
    }

    /// The worker count for `auto`: allowed CPUs, capped by the quota rounded up, at least 1.
    pub fn auto_workers(&self) -> usize {
        let cpus = self.allowed.len().max(1);
        match self.quota {
            Some(q) => cpus.min((q.ceil() as usize).max(1)),
            None => cpus,
        }
    }
}

/// Reads the `cpu.max` quota of this process's cgroup (v2), walking up to the root and taking
/// the smallest quota found.
pub fn cgroup_quota(proc_cgroup: &Path, root: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(proc_cgroup).ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim().trim_start_matches('/');
    let mut dir = root.join(rel);
    let mut best: Option<f64> = None;
    loop {
        if let Some(q) = std::fs::read_to_string(dir.join("cpu.max")).ok().and_then(|s| parse_cpu_max(&s)) {
            best = Some(best.map_or(q, |b: f64| b.min(q)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            break;
        }
    }
    best
}

/// `"max 100000"` -> None; `"150000 100000"` -> Some(1.5).
pub fn parse_cpu_max(s: &str) -> Option<f64> {
    let mut it = s.split_whitespace();
    let quota = it.next()?;
    let period: f64 = it.next().unwrap_or("100000").parse().ok()?;
    if quota == "max" || period <= 0.0 {
        return None;
    }
    let quota: f64 = quota.parse().ok()?;
    (quota > 0.0).then_some(quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parsing() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(1.5));
        assert_eq!(parse_cpu_max("50000 100000"), Some(0.5));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(parse_cpu_max(""), None);
    }

    #[test]
    fn quota_rounds_up_and_caps_the_affinity_mask() {
        let b = CpuBudget { allowed: vec![0, 1, 2, 3], quota: Some(1.5) };
        assert_eq!(b.auto_workers(), 2);
        let b = CpuBudget { allowed: vec![0, 1], quota: Some(8.0) };
        assert_eq!(b.auto_workers(), 2);
        let b = CpuBudget { allowed: vec![3], quota: None };
        assert_eq!(b.auto_workers(), 1);
        let b = CpuBudget { allowed: vec![0, 1], quota: Some(0.2) };
        assert_eq!(b.auto_workers(), 1);
    }

    #[test]
    fn nested_cgroup_takes_the_smallest_quota() {
        let dir = std::env::temp_dir().join(format!("gw-cgroup-{}", std::process::id()));
        let leaf = dir.join("a/b");
        std::fs::create_dir_all(&leaf).unwrap_or_default();
        std::fs::write(dir.join("cpu.max"), "max 100000").unwrap_or_default();
        std::fs::write(dir.join("a/cpu.max"), "300000 100000").unwrap_or_default();
        std::fs::write(leaf.join("cpu.max"), "max 100000").unwrap_or_default();
        let proc_file = dir.join("proc-cgroup");
        std::fs::write(&proc_file, "0::/a/b\n").unwrap_or_default();
        assert_eq!(cgroup_quota(&proc_file, &dir), Some(3.0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
