//! systemd's notification protocol (`sd_notify(3)`), without libsystemd: one datagram per
//! state change to the socket named by `$NOTIFY_SOCKET`. A no-op when the variable is unset
//! (not started by systemd with `Type=notify`).

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Sends `state` (e.g. `"READY=1"`). Returns whether a message was sent.
pub fn notify(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return false };
    let Ok(socket) = UnixDatagram::unbound() else { return false };
    let bytes = path.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|addr| socket.send_to_addr(state.as_bytes(), &addr))
        }
        None => socket.send_to(state.as_bytes(), &path),
    };
    if let Err(e) = &sent {
        tracing::warn!(error = %e, "sd_notify failed");
    }
    sent.is_ok()
}

/// `READY=1` with a status line and the main PID.
pub fn ready(status: &str) -> bool {
    notify(&format!("READY=1\nSTATUS={status}\nMAINPID={}", std::process::id()))
}

/// `RELOADING=1` with the monotonic timestamp systemd's `Type=notify-reload` expects.
pub fn reloading() -> bool {
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()))
}

pub fn stopping() -> bool {
    notify("STOPPING=1\nSTATUS=draining")
}

/// The watchdog interval systemd asked for (`WatchdogSec=`), if it is meant for this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Some(pid) = std::env::var("WATCHDOG_PID").ok().and_then(|p| p.parse::<u32>().ok()) {
        if pid != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0) / 1_000
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic_clock_moves_forward() {
        let a = super::monotonic_usec();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::monotonic_usec() > a);
    }
}
