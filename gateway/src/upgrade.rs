//! Zero-downtime binary upgrade: a new process takes over the listening sockets of the running
//! one over a Unix socket (SCM_RIGHTS), then the old one drains and exits.
//!
//! The sockets are the same kernel objects in both processes, so their accept queues are never
//! closed: no connection waiting in a backlog is lost (closing an SO_REUSEPORT socket drops the
//! connections queued on it, which binding fresh sockets in the new process could not avoid).
//!
//! Protocol, on a connection to the old process's upgrade socket:
//! 1. old -> new: one message of a 4-byte length, a JSON description of the sockets (listeners
//!    by name with their addresses and socket counts, then whether an admin socket follows),
//!    and the descriptors themselves as SCM_RIGHTS in the same message;
//! 2. the new process starts serving on them (and binds any listener the old one lacked);
//! 3. new -> old: `READY\n`; the old process stops accepting, drains and exits. If the new
//!    process fails before `READY`, the old one keeps serving as if nothing happened.

use std::collections::HashMap;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

/// The most descriptors one handoff carries (the kernel's SCM_MAX_FD is 253).
pub const MAX_FDS: usize = 250;
/// How long the old process waits for the new one to say it serves.
const READY_WAIT: Duration = Duration::from_secs(60);

/// What the old process hands over.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Description {
    listeners: Vec<ListenerDescription>,
    admin: bool,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ListenerDescription {
    name: String,
    address: SocketAddr,
    sockets: usize,
}

/// Listening sockets received from the previous process, by listener name.
#[derive(Debug, Default)]
pub struct Inherited {
    pub listeners: HashMap<String, (SocketAddr, Vec<TcpListener>)>,
    pub admin: Option<TcpListener>,
}

impl Inherited {
    /// Takes the sockets of listener `name` if it was bound to `address` (any port when the
    /// configured port is 0).
    pub fn take(&mut self, name: &str, address: SocketAddr) -> Option<(SocketAddr, Vec<TcpListener>)> {
        let (bound, _) = self.listeners.get(name)?;
        let same = *bound == address || (address.port() == 0 && bound.ip() == address.ip());
        if !same {
            return None;
        }
        self.listeners.remove(name)
    }
}

/// Sends the offered listeners and the admin socket (if any) to a successor.
pub type SendOffer<'f> = dyn FnMut(&[Offered<'_>], Option<BorrowedFd<'_>>) -> io::Result<()> + 'f;

/// One listener's sockets as the old process holds them (duplicates of the workers' sockets).
pub struct Offered<'a> {
    pub name: &'a str,
    pub address: SocketAddr,
    pub sockets: Vec<BorrowedFd<'a>>,
}

/// The new process's side: connects to `path`, receives the sockets, and returns them with
/// the connection on which to say `READY` once serving.
pub fn receive(path: &Path) -> io::Result<(Inherited, UnixStream)> {
    let stream = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", path.display())))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let (bytes, fds) = recv_with_fds(&stream)?;
    let len = bytes.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes).unwrap_or(0) as usize;
    let json = bytes.get(4..4 + len).ok_or_else(|| io::Error::other("truncated upgrade description"))?;
    let description: Description = serde_json::from_slice(json).map_err(io::Error::other)?;
    let mut fds = fds.into_iter();
    let mut inherited = Inherited::default();
    for l in description.listeners {
        let sockets: Vec<TcpListener> = fds.by_ref().take(l.sockets).map(TcpListener::from).collect();
        if sockets.len() != l.sockets {
            return Err(io::Error::other("fewer descriptors than described"));
        }
        inherited.listeners.insert(l.name, (l.address, sockets));
    }
    if description.admin {
        inherited.admin = fds.next().map(TcpListener::from);
    }
    stream.set_read_timeout(None)?;
    Ok((inherited, stream))
}

/// Tells the old process that the new one serves: it stops accepting and drains.
pub fn confirm(mut stream: UnixStream) -> io::Result<()> {
    stream.write_all(b"READY\n")
}

/// Serves takeover requests on `path` until `stop`. `offer` lists the sockets to hand over
/// (called at each request); `on_handed_over` runs once a new process confirmed it serves.
pub fn serve(
    path: PathBuf,
    stop: Arc<AtomicBool>,
    offer: impl Fn(&mut SendOffer<'_>) -> io::Result<()> + Send + 'static,
    on_handed_over: impl Fn() + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // A socket file left by an earlier process (or the one being replaced) is replaced: the
    // old process keeps its own listening descriptor either way.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    set_owner_only(&path);
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("gw-upgrade".into()).spawn(move || {
        while !stop.load(Ordering::Acquire) {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "upgrade socket accept failed");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let _ = stream.set_nonblocking(false);
            match hand_over(stream, &offer) {
                Ok(()) => {
                    tracing::info!("upgrade: the new process serves; draining this one");
                    on_handed_over();
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "upgrade abandoned; this process keeps serving"),
            }
        }
    })
}

fn hand_over(mut stream: UnixStream, offer: &impl Fn(&mut SendOffer<'_>) -> io::Result<()>) -> io::Result<()> {
    offer(&mut |listeners, admin| {
        let description = Description {
            listeners: listeners
                .iter()
                .map(|l| ListenerDescription { name: l.name.to_owned(), address: l.address, sockets: l.sockets.len() })
                .collect(),
            admin: admin.is_some(),
        };
        let json = serde_json::to_vec(&description).map_err(io::Error::other)?;
        let mut message = u32::try_from(json.len()).map_err(io::Error::other)?.to_be_bytes().to_vec();
        message.extend_from_slice(&json);
        let fds: Vec<BorrowedFd<'_>> = listeners.iter().flat_map(|l| l.sockets.iter().copied()).chain(admin).collect();
        if fds.len() > MAX_FDS {
            return Err(io::Error::other(format!("{} sockets to hand over, at most {MAX_FDS}", fds.len())));
        }
        send_with_fds(&stream, &message, &fds)
    })?;
    stream.set_read_timeout(Some(READY_WAIT))?;
    let mut reply = [0u8; 6];
    stream.read_exact(&mut reply)?;
    if &reply != b"READY\n" {
        return Err(io::Error::other("the new process did not confirm"));
    }
    Ok(())
}

fn set_owner_only(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

/// Sends `bytes` with `fds` attached (SCM_RIGHTS) in one message.
fn send_with_fds(stream: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("the descriptors do not fit the control message"));
    }
    let sent = rustix::net::sendmsg(stream, &[IoSlice::new(bytes)], &mut control, SendFlags::empty())?;
    if sent != bytes.len() {
        return Err(io::Error::other("short write of the upgrade description"));
    }
    Ok(())
}

/// Receives one message and the descriptors attached to it (close-on-exec).
fn recv_with_fds(stream: &UnixStream) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut bytes = vec![0u8; 64 * 1024];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received =
        rustix::net::recvmsg(stream, &mut [IoSliceMut::new(&mut bytes)], &mut control, RecvFlags::CMSG_CLOEXEC)?;
    // Owned as they are drained: every descriptor received is closed unless handed on.
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if received.flags.contains(ReturnFlags::CTRUNC) || fds.len() > MAX_FDS {
        return Err(io::Error::other("too many descriptors in the upgrade message"));
    }
    bytes.truncate(received.bytes);
    Ok((bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn sockets_cross_a_unix_socket_and_keep_their_queue() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        // A connection waits in the backlog before the handoff.
        let _early = std::net::TcpStream::connect(address).unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let message = b"\x00\x00\x00\x02{}";
        send_with_fds(&a, message, &[listener.as_fd()]).unwrap();
        drop(listener);
        let (bytes, fds) = recv_with_fds(&b).unwrap();
        assert_eq!(bytes, message);
        assert_eq!(fds.len(), 1);
        let inherited = TcpListener::from(fds.into_iter().next().unwrap());
        assert_eq!(inherited.local_addr().unwrap(), address);
        // The queued connection survived the old descriptor's close.
        inherited.set_nonblocking(false).unwrap();
        let (conn, _) = inherited.accept().unwrap();
        drop(conn);
    }

    #[test]
    fn a_message_with_more_descriptors_than_expected_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let fds: Vec<BorrowedFd<'_>> = (0..MAX_FDS + 2).map(|_| listener.as_fd()).collect();
        let (a, b) = UnixStream::pair().unwrap();
        send_with_fds(&a, b"x", &fds).unwrap();
        let err = recv_with_fds(&b).unwrap_err();
        assert!(err.to_string().contains("too many descriptors"), "{err}");
    }

    #[test]
    fn inherited_listeners_match_by_name_and_address() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = l.local_addr().unwrap();
        let mut inherited = Inherited::default();
        inherited.listeners.insert("main".into(), (address, vec![l]));
        assert!(inherited.take("other", address).is_none());
        assert!(inherited.take("main", "127.0.0.1:1".parse().unwrap()).is_none());
        assert!(inherited.take("main", "127.0.0.1:0".parse().unwrap()).is_some(), "port 0 takes any port");
    }
}
