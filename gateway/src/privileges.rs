//! Who the process runs as: refuse root without an explicit choice, and switch from root to
//! `server.user` once the listening sockets are bound.
//!
//! The rules, decided once at start by [`plan`]:
//!
//! - started as root with `server.user`: bind every listener and the admin port, then switch to
//!   that user (and its primary group, or `server.group`) for good, before any worker starts;
//!   [`switch`] verifies that root cannot be regained. No capability is kept: the listeners are
//!   already bound and a binary upgrade inherits them, so only a reload that adds a listener on
//!   a port below 1024 needs one, and that reload fails with the bind error (the running config
//!   stays). Hosts that need that run the gateway as the packaged systemd unit does: as a plain
//!   user with the ambient capability `CAP_NET_BIND_SERVICE`.
//! - started as root without `server.user`: refused unless `--allow-root` was given.
//! - started as another user: `server.user` naming that user is ignored (logged); naming
//!   another user is refused (only root can switch).

use std::ffi::{CStr, CString};

/// A user (and group) to run as, resolved from the system's account database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub user: String,
    pub uid: u32,
    pub group: String,
    pub gid: u32,
}

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run as started; the note, if any, is logged at start.
    Stay { note: Option<String> },
    /// Started as root: switch to this account once the sockets are bound.
    Switch(Account),
}

/// The process's identity when [`plan`] runs.
#[derive(Debug, Clone, Copy)]
pub struct Current {
    pub euid: u32,
    pub egid: u32,
}

impl Current {
    pub fn of_this_process() -> Self {
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        unsafe { Self { euid: libc::geteuid(), egid: libc::getegid() } }
    }
}

/// Decides who to run as, from `server.user` / `server.group` and `--allow-root`.
/// `users` and `groups` look names up (the system's database in [`plan_for_this_process`]).
/// An `Err` is the message to print before exiting 1.
pub fn plan(
    current: Current,
    user: Option<&str>,
    group: Option<&str>,
    allow_root: bool,
    users: impl Fn(&str) -> Option<(u32, u32)>,
    groups: impl Fn(&str) -> Option<u32>,
) -> Result<Plan, String> {
    let Some(user) = user else {
        if current.euid != 0 {
            return Ok(Plan::Stay { note: None });
        }
        if allow_root {
            return Ok(Plan::Stay {
                note: Some("running as root (--allow-root); set server.user to switch to an unprivileged user".into()),
            });
        }
        return Err("refusing to run as root: set server.user (e.g. user = \"nobody\" in [server]) to switch to \
             that user once the listeners are bound, or pass --allow-root to run as root anyway"
            .into());
    };
    let (uid, primary_gid) = users(user).ok_or_else(|| format!("server.user: no such user {user:?}"))?;
    let gid = match group {
        Some(name) => groups(name).ok_or_else(|| format!("server.group: no such group {name:?}"))?,
        None => primary_gid,
    };
    if current.euid != 0 {
        if uid != current.euid {
            return Err(format!(
                "server.user = {user:?} (uid {uid}) but the gateway was started as uid {}: only root can switch \
                 users; start it as root, or remove server.user",
                current.euid
            ));
        }
        if gid != current.egid {
            return Err(format!(
                "server.group: gid {gid} but the gateway was started with gid {}: only root can switch groups; \
                 start it as root, or remove server.group",
                current.egid
            ));
        }
        return Ok(Plan::Stay {
            note: Some(format!("server.user = {user:?} is the user the gateway runs as: nothing to switch")),
        });
    }
    if uid == 0 {
        return Err(format!(
            "server.user = {user:?} is root (uid 0): name an unprivileged user, or remove server.user and pass \
             --allow-root to run as root"
        ));
    }
    let group = group.map_or_else(|| group_name(gid).unwrap_or_else(|| gid.to_string()), str::to_owned);
    Ok(Plan::Switch(Account { user: user.to_owned(), uid, group, gid }))
}

/// [`plan`] for this process, with the system's account database.
pub fn plan_for_this_process(user: Option<&str>, group: Option<&str>, allow_root: bool) -> Result<Plan, String> {
    plan(Current::of_this_process(), user, group, allow_root, lookup_user, lookup_group)
}

/// Switches this process (every thread: glibc applies set*id to all of them) to `account` for
/// good: supplementary groups, then real, effective and saved gid, then uid. Verifies that the
/// ids took and that neither root uid nor root gid can be regained.
pub fn switch(account: &Account) -> Result<(), String> {
    let gid = account.gid;
    let uid = account.uid;
    // SAFETY: plain system calls on values we own; setgroups reads one gid_t from `groups`.
    unsafe {
        let groups = [gid as libc::gid_t];
        if libc::setgroups(1, groups.as_ptr()) != 0 {
            return Err(format!("setgroups([{gid}]): {}", std::io::Error::last_os_error()));
        }
        if libc::setresgid(gid, gid, gid) != 0 {
            return Err(format!("setresgid({gid}): {}", std::io::Error::last_os_error()));
        }
        if libc::setresuid(uid, uid, uid) != 0 {
            return Err(format!("setresuid({uid}): {}", std::io::Error::last_os_error()));
        }
    }
    verify(uid, gid)
}

/// Checks that every id is the target's and that root cannot be regained.
fn verify(uid: u32, gid: u32) -> Result<(), String> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: getresuid/getresgid write three ids into the locals.
    let ok = unsafe { libc::getresuid(&mut r, &mut e, &mut s) == 0 };
    if !ok || (r, e, s) != (uid, uid, uid) {
        return Err(format!("after the switch the uids are {r}/{e}/{s}, not {uid}"));
    }
    // SAFETY: as above.
    let ok = unsafe { libc::getresgid(&mut r, &mut e, &mut s) == 0 };
    if !ok || (r, e, s) != (gid, gid, gid) {
        return Err(format!("after the switch the gids are {r}/{e}/{s}, not {gid}"));
    }
    // SAFETY: these calls only succeed if privileges were kept; then we report and exit.
    unsafe {
        if libc::setuid(0) == 0 || libc::seteuid(0) == 0 {
            return Err("root could be regained after the switch (setuid(0) succeeded)".into());
        }
        if libc::setgid(0) == 0 || libc::setegid(0) == 0 {
            return Err("the root group could be regained after the switch (setgid(0) succeeded)".into());
        }
    }
    Ok(())
}

/// The uid and primary gid of the user `name`.
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: getpwnam_r fills `pwd` with pointers into `buf`, which outlives its use here.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(cname.as_ptr(), &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        (rc == 0 && !result.is_null()).then_some((pwd.pw_uid, pwd.pw_gid))
    }
}

/// The gid of the group `name`.
pub fn lookup_group(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: getgrnam_r fills `grp` with pointers into `buf`, which outlives its use here.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        (rc == 0 && !result.is_null()).then_some(grp.gr_gid)
    }
}

/// The name of the group `gid`, for the log.
fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: getgrgid_r fills `grp` with pointers into `buf`; the name is copied out before
    // `buf` is dropped.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        if rc != 0 || result.is_null() || grp.gr_name.is_null() {
            return None;
        }
        Some(CStr::from_ptr(grp.gr_name).to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ROOT: Current = Current { euid: 0, egid: 0 };
    const ALICE: Current = Current { euid: 1000, egid: 1000 };

    fn users(name: &str) -> Option<(u32, u32)> {
        match name {
            "root" => Some((0, 0)),
            "nobody" => Some((65534, 65534)),
            "alice" => Some((1000, 1000)),
            _ => None,
        }
    }

    fn groups(name: &str) -> Option<u32> {
        match name {
            "nogroup" => Some(65534),
            "alice" => Some(1000),
            "staff" => Some(50),
            _ => None,
        }
    }

    fn decide(current: Current, user: Option<&str>, group: Option<&str>, allow_root: bool) -> Result<Plan, String> {
        plan(current, user, group, allow_root, users, groups)
    }

    #[test]
    fn root_without_user_or_flag_is_refused_naming_both_fixes() {
        let e = decide(ROOT, None, None, false).unwrap_err();
        assert!(e.starts_with("refusing to run as root"), "{e}");
        assert!(e.contains("server.user") && e.contains("--allow-root"), "{e}");
    }

    #[test]
    fn root_with_allow_root_stays_and_says_so() {
        let Plan::Stay { note: Some(note) } = decide(ROOT, None, None, true).unwrap() else { panic!() };
        assert!(note.contains("--allow-root"), "{note}");
    }

    #[test]
    fn root_with_user_switches_to_its_ids() {
        let plan = decide(ROOT, Some("nobody"), Some("nogroup"), false).unwrap();
        let expected = Account { user: "nobody".into(), uid: 65534, group: "nogroup".into(), gid: 65534 };
        assert_eq!(plan, Plan::Switch(expected));
        // The user wins over --allow-root.
        assert!(matches!(decide(ROOT, Some("nobody"), Some("nogroup"), true).unwrap(), Plan::Switch(_)));
        let Plan::Switch(a) = decide(ROOT, Some("alice"), Some("staff"), false).unwrap() else { panic!() };
        assert_eq!((a.uid, a.gid), (1000, 50));
    }

    #[test]
    fn root_user_unknown_names_and_root_as_target_are_refused() {
        assert!(decide(ROOT, Some("ghost"), None, false).unwrap_err().contains("no such user \"ghost\""));
        assert!(decide(ROOT, Some("nobody"), Some("ghosts"), false).unwrap_err().contains("no such group"));
        assert!(decide(ROOT, Some("root"), None, true).unwrap_err().contains("is root (uid 0)"));
    }

    #[test]
    fn non_root_ignores_its_own_name_and_refuses_another() {
        assert_eq!(decide(ALICE, None, None, false).unwrap(), Plan::Stay { note: None });
        assert_eq!(decide(ALICE, None, None, true).unwrap(), Plan::Stay { note: None });
        let Plan::Stay { note: Some(note) } = decide(ALICE, Some("alice"), None, false).unwrap() else { panic!() };
        assert!(note.contains("nothing to switch"), "{note}");
        let e = decide(ALICE, Some("nobody"), None, false).unwrap_err();
        assert!(e.contains("only root can switch users"), "{e}");
        let e = decide(ALICE, Some("alice"), Some("staff"), false).unwrap_err();
        assert!(e.contains("only root can switch groups"), "{e}");
    }

    #[test]
    fn the_system_database_knows_root() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_group("root"), Some(0));
        assert_eq!(lookup_user("no-such-user-here"), None);
    }
}
