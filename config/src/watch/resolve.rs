//! Which directory entries decide what a path reads, found by following its symlinks one hop at a
//! time the way the kernel does.

use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Symlink hops followed before giving up, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// One name in one directory, the directory given by its symlink-free path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Entry {
    pub dir: PathBuf,
    pub name: OsString,
}

/// Every directory entry whose replacement, rename, removal or creation can change what `path`
/// reads: each symlink passed through on the way (in any component, not only the last), then
/// the file reached, or the first entry found missing. Watching the directories of these entries
/// sees every such change. `path` must be absolute.
pub(super) fn entries(path: &Path) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut resolved = PathBuf::new();
    // Components still to walk, the next one last.
    let mut pending = parts(path);
    let mut links = 0;
    while let Some(part) = pending.pop() {
        let name = match part {
            Part::Root(root) => {
                resolved.push(root);
                continue;
            }
            Part::Parent => {
                resolved.pop();
                continue;
            }
            Part::Name(name) => name,
        };
        let candidate = resolved.join(&name);
        let entry = Entry { dir: resolved.clone(), name };
        match fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                entries.push(entry);
                links += 1;
                match fs::read_link(&candidate) {
                    Ok(target) if links <= MAX_LINKS => pending.extend(parts(&target)),
                    // A loop or a link that vanished while read: what was found so far is what
                    // decides, and the next event or check resolves again.
                    _ => break,
                }
            }
            Ok(_) => {
                if !pending.iter().any(|p| matches!(p, Part::Name(_))) {
                    entries.push(entry);
                }
                resolved = candidate;
            }
            Err(_) => {
                entries.push(entry);
                break;
            }
        }
    }
    entries
}

enum Part {
    Root(OsString),
    Parent,
    Name(OsString),
}

/// The components of `path` in reverse order, `.` dropped.
fn parts(path: &Path) -> Vec<Part> {
    let mut parts: Vec<Part> = path
        .components()
        .filter_map(|c| match c {
            Component::Prefix(_) | Component::RootDir => Some(Part::Root(c.as_os_str().to_owned())),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(name) => Some(Part::Name(name.to_owned())),
        })
        .collect();
    parts.reverse();
    parts
}
