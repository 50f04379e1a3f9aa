//! The `gateway` command: run the gateway, or check a configuration file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook::iterator::Signals;

#[global_allocator]
static GLOBAL: gateway::runtime::alloc::Mimalloc = gateway::runtime::alloc::Mimalloc;

const DEFAULT_CONFIG: &str = "/etc/gateway/gateway.toml";

/// The exit status after a worker thread died (`EX_SOFTWARE`): the supervisor restarts.
const EXIT_WORKER_DIED: u8 = 70;

#[derive(Parser)]
#[command(name = "gateway", version, about = "Thread-per-core io_uring edge HTTP gateway")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Configuration file (for the default `run`).
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (the default).
    Run {
        /// Take over the listening sockets of the gateway serving on this upgrade socket
        /// (`server.upgrade_socket`); it drains and exits once this one serves.
        #[arg(long)]
        takeover: Option<PathBuf>,
        /// Run as root when started as root without `server.user` (otherwise refused). With
        /// `server.user` set the gateway switches to that user and this flag changes nothing.
        #[arg(long)]
        allow_root: bool,
    },
    /// Validate a configuration file: exit 0 with a summary, or 1 with every error.
    Check,
    /// Ask the gateway running with this configuration to drain (`POST /drain` on its admin
    /// port, with its admin token): for a Kubernetes preStop hook or a script. Exit 0 once
    /// asked (with `--wait`: once it has exited), 1 with the reason otherwise.
    Drain {
        /// The admin address to use instead of the configured one (required when the
        /// configuration binds port 0).
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
        /// Wait until the gateway has exited (its admin port refuses connections), at most
        /// `server.drain_timeout` plus 5 s.
        #[arg(long)]
        wait: bool,
    },
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    let cli = Cli::parse();
    let path = cli.config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    match cli.command.unwrap_or(Command::Run { takeover: None, allow_root: false }) {
        Command::Check => check(&path),
        Command::Drain { admin, wait } => drain(&path, admin, wait),
        Command::Run { takeover, allow_root } => run(&path, takeover.as_deref(), allow_root),
    }
}

/// Turns transparent huge pages off for this process (and a successor it starts: the setting
/// is inherited). mimalloc asks for huge pages on its arenas, so the memory the gateway touches
/// grows in 2 MiB steps. Idle plain keep-alive connections then cost 1.43 KiB each instead of
/// 0.42-0.78, and idle TLS connections 12.4-12.7 instead of 11.4. CPU per request did not move,
/// HTTP/1.1 on either driver or HTTP/2 over TLS (`loadtests/results/thp-20261202.md`): the
/// gateway's working set is small.
fn no_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r != 0 {
        // Before logging is set up; the process works the same, with larger steps of memory.
        eprintln!("note: could not turn transparent huge pages off: {}", std::io::Error::last_os_error());
    }
}

/// Validates the file, then reads every TLS certificate, key and CA file it names.
fn check(path: &std::path::Path) -> ExitCode {
    let config = match gateway_config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(errors) = gateway::tls::load_config(&config, None) {
        for e in errors {
            eprintln!("{}: {e}", path.display());
        }
        return ExitCode::FAILURE;
    }
    let budgets = gateway_config::timeouts::budgets(&config);
    if !budgets.is_empty() {
        println!("retries and timeouts per route (worst case of all tries against the route timeout):");
        print!("{}", gateway_config::timeouts::table(&budgets));
    }
    let problems: Vec<String> = budgets.iter().filter_map(|b| b.problem()).collect();
    if !problems.is_empty() {
        for p in problems {
            eprintln!("{}: {p}", path.display());
        }
        return ExitCode::FAILURE;
    }
    println!("{}: ok: {}", path.display(), config.summary());
    ExitCode::SUCCESS
}

fn drain(path: &std::path::Path, admin: Option<std::net::SocketAddr>, wait: bool) -> ExitCode {
    let config = match gateway_config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let result = gateway::drain::request_for(&config, admin, wait).and_then(|r| gateway::drain::drain(&r));
    match result {
        Ok(done) => {
            println!("{done}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gateway drain: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(path: &std::path::Path, takeover: Option<&std::path::Path>, allow_root: bool) -> ExitCode {
    let (log_level, user, group) = match gateway_config::load(path) {
        Ok(c) => (c.server.log_level, c.server.user, c.server.group),
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let client_events = gateway::logging::init(&log_level);
    // Decided before anything is bound or taken over: a refused process touches nothing.
    let switch_to = match gateway::privileges::plan_for_this_process(user.as_deref(), group.as_deref(), allow_root) {
        Ok(gateway::privileges::Plan::Switch(account)) => Some(account),
        Ok(gateway::privileges::Plan::Stay { note }) => {
            if let Some(note) = note {
                tracing::warn!("{note}");
            }
            None
        }
        Err(message) => {
            tracing::error!("{message}");
            return ExitCode::FAILURE;
        }
    };
    // Register signal handlers before any worker exists so no signal is lost.
    let mut signals = match Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR2]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot install signal handlers");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(config = %path.display(), version = env!("CARGO_PKG_VERSION"), "starting");
    // The path this binary was started from: after a package upgrade replaced the file, SIGUSR2
    // starts the new binary from it.
    let exe = std::env::current_exe().ok();
    let (inherited, predecessor) = match takeover {
        None => (gateway::upgrade::Inherited::default(), None),
        Some(socket) => match gateway::upgrade::receive(socket) {
            Ok((inherited, stream)) => {
                tracing::info!(socket = %socket.display(), listeners = inherited.listeners.len(), "took over the listening sockets");
                (inherited, Some(stream))
            }
            Err(e) => {
                tracing::error!(socket = %socket.display(), error = %e, "takeover failed");
                return ExitCode::FAILURE;
            }
        },
    };
    let gateway = match gateway::Gateway::start_from_file_as(path, inherited, switch_to.as_ref()) {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "startup failed");
            return ExitCode::FAILURE;
        }
    };
    let summary = gateway.snapshot().config.summary();
    tracing::info!(summary = %summary, pid = std::process::id(), "serving");
    if let Some(stream) = predecessor {
        // systemd follows the new main process (needs NotifyAccess=all in the unit).
        gateway::sdnotify::notify(&format!("MAINPID={}", std::process::id()));
        if let Err(e) = gateway::upgrade::confirm(stream) {
            tracing::warn!(error = %e, "could not tell the previous process to drain");
        }
    }
    gateway::sdnotify::ready(&format!("serving: {summary}"));
    let watchdog = start_watchdog(&gateway);
    let mut failed = false;
    'serve: loop {
        for signal in signals.pending() {
            if signal == SIGHUP {
                // For log rotation (logrotate renamed the file, then sent SIGHUP).
                gateway.reopen_access_log();
                let _ = gateway.reload("SIGHUP");
            } else if signal == SIGUSR2 {
                start_successor(&gateway, exe.as_deref(), path, allow_root);
            } else {
                tracing::info!(signal, "draining: stop accepting, finishing in-flight requests");
                break 'serve;
            }
        }
        if gateway.handed_over() {
            tracing::info!("draining: a successor process took over the listening sockets");
            break;
        }
        if gateway.is_draining() {
            tracing::info!("draining (requested through the admin port)");
            break;
        }
        if let Some(worker) = gateway.dead_workers().first() {
            // A worker whose thread ended is not restarted in place: its listener sockets
            // closed with it. The process fails on purpose so that the supervisor (systemd's
            // Restart=, Kubernetes) starts a whole one; the other workers drain first.
            tracing::error!(
                worker,
                "a worker thread died (panic outside any connection): draining, then exiting with status {EXIT_WORKER_DIED} so that the supervisor restarts the gateway"
            );
            failed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if !gateway.handed_over() {
        // After a handover systemd follows the successor: this process must not say it stops.
        gateway::sdnotify::stopping();
    }
    watchdog.store(true, std::sync::atomic::Ordering::Release);
    gateway.shutdown();
    client_events.report();
    tracing::info!("stopped");
    if failed {
        return ExitCode::from(EXIT_WORKER_DIED);
    }
    ExitCode::SUCCESS
}

/// Starts a new process of the binary at `exe` that takes over this one's sockets (binary
/// upgrade); this process drains once it serves. It runs as this process does now (after a
/// switch to `server.user`, as that user) and gets `--allow-root` if this one did.
fn start_successor(
    gateway: &gateway::Gateway,
    exe: Option<&std::path::Path>,
    config: &std::path::Path,
    allow_root: bool,
) {
    let Some(socket) = gateway.snapshot().config.server.upgrade_socket.clone() else {
        tracing::warn!("SIGUSR2: no server.upgrade_socket configured; no upgrade");
        return;
    };
    let Some(exe) = exe else {
        tracing::warn!("SIGUSR2: the path of this binary is unknown; no upgrade");
        return;
    };
    let mut command = std::process::Command::new(exe);
    command.arg("run").arg("--config").arg(config).arg("--takeover").arg(&socket);
    if allow_root {
        command.arg("--allow-root");
    }
    // The successor must not inherit this process's connections (io_uring accepts them without
    // close-on-exec): they would stay open after this process exits. It gets the listening
    // sockets over the upgrade socket; keep only stdin, stdout and stderr. The descriptors are
    // marked close-on-exec rather than closed here: the pipe on which the standard library
    // reports a failed exec to this process (e.g. a binary the dropped user may not execute)
    // must stay open until the exec, so that the failure is an error here, not an abort there.
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the child between fork and exec; close_range and fcntl are
    // async-signal-safe and touch only the child's descriptor table.
    unsafe {
        command.pre_exec(|| {
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) != 0 {
                // Kernels before 5.11: mark them one by one.
                for fd in 3..4096 {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
            }
            Ok(())
        });
    }
    match command.spawn() {
        Ok(child) => tracing::info!(pid = child.id(), exe = %exe.display(), "SIGUSR2: started the successor"),
        Err(e) => tracing::error!(exe = %exe.display(), error = %e, "SIGUSR2: cannot start the successor"),
    }
}

/// Pings systemd's watchdog at half its interval while every worker keeps ticking. Returns the
/// flag that stops it.
fn start_watchdog(gateway: &gateway::Gateway) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let Some(interval) = gateway::sdnotify::watchdog_interval() else { return stop };
    let mut liveness = gateway.liveness();
    let flag = std::sync::Arc::clone(&stop);
    let period = interval / 2;
    tracing::info!(interval = ?interval, "systemd watchdog enabled");
    let spawned = std::thread::Builder::new().name("gw-watchdog".into()).spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::sleep(period);
            if liveness.check(period) {
                gateway::sdnotify::notify("WATCHDOG=1");
            } else {
                tracing::error!("a worker stopped ticking: withholding the systemd watchdog ping");
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the watchdog thread");
    }
    stop
}
