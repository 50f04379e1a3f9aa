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

use nix::unistd::{Gid, Group, Uid, User};

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
        Self { euid: nix::unistd::geteuid().as_raw(), egid: nix::unistd::getegid().as_raw() }
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

/// Switches this process (every thread: glibc applies set*id to all of them, and nix calls
/// glibc) to `account` for good: supplementary groups, then real, effective and saved gid, then
/// uid. Verifies that the ids took and that neither root uid nor root gid can be regained.
pub fn switch(account: &Account) -> Result<(), String> {
    let (uid, gid) = (Uid::from_raw(account.uid), Gid::from_raw(account.gid));
    nix::unistd::setgroups(&[gid]).map_err(|e| format!("setgroups([{gid}]): {e}"))?;
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| format!("setresgid({gid}): {e}"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| format!("setresuid({uid}): {e}"))?;
    verify(account.uid, account.gid)
}

/// Checks that every id is the target's and that root cannot be regained.
fn verify(uid: u32, gid: u32) -> Result<(), String> {
    let ids = nix::unistd::getresuid().map_err(|e| format!("getresuid: {e}"))?;
    let (r, e, s) = (ids.real.as_raw(), ids.effective.as_raw(), ids.saved.as_raw());
    if (r, e, s) != (uid, uid, uid) {
        return Err(format!("after the switch the uids are {r}/{e}/{s}, not {uid}"));
    }
    let ids = nix::unistd::getresgid().map_err(|e| format!("getresgid: {e}"))?;
    let (r, e, s) = (ids.real.as_raw(), ids.effective.as_raw(), ids.saved.as_raw());
    if (r, e, s) != (gid, gid, gid) {
        return Err(format!("after the switch the gids are {r}/{e}/{s}, not {gid}"));
    }
    // These only succeed if privileges were kept; then we report and the caller exits.
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() || nix::unistd::seteuid(Uid::from_raw(0)).is_ok() {
        return Err("root could be regained after the switch (setuid(0) succeeded)".into());
    }
    if nix::unistd::setgid(Gid::from_raw(0)).is_ok() || nix::unistd::setegid(Gid::from_raw(0)).is_ok() {
        return Err("the root group could be regained after the switch (setgid(0) succeeded)".into());
    }
    Ok(())
}

/// The uid and primary gid of the user `name` (the system's account database, NSS included).
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let user = User::from_name(name).ok()??;
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

/// The gid of the group `name`.
pub fn lookup_group(name: &str) -> Option<u32> {
    Some(Group::from_name(name).ok()??.gid.as_raw())
}

/// The name of the group `gid`, for the log.
fn group_name(gid: u32) -> Option<String> {
    Some(Group::from_gid(Gid::from_raw(gid)).ok()??.name)
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
