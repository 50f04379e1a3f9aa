//! abuse-rss: the gateway's resident memory under each abuse, with a well-behaved client
//! alongside. Starts the given gateway binary (one worker, io_uring) in front of an origin and
//! a slow upstream, then for each abuse: RSS before, the abuse for `--duration` seconds while
//! the good client keeps requesting, RSS at its end, just after it stops and after `--settle`
//! seconds, with the gateway's counters. Writes a Markdown report and its JSON.
//!
//! `loadtests/bench/abuse-rss.sh` builds and runs it; see loadtests/README.md.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use loadtests::abuse::attacks::{self, Abuse, Scale, SlowSink, Tally};
use loadtests::abuse::report::{self, AbuseResult, Memory};

#[derive(Parser)]
#[command(about = "The gateway's RSS under each abuse, with a well-behaved client alongside")]
struct Args {
    /// The gateway binary (a release build).
    #[arg(long)]
    gateway: PathBuf,
    /// Seconds each abuse runs.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds after each abuse before RSS is read again.
    #[arg(long, default_value_t = 3)]
    settle: u64,
    /// The gateway's max_connections_per_worker (the connection flood opens 10% more).
    #[arg(long, default_value_t = 1024)]
    connection_limit: usize,
    /// Markdown report path.
    #[arg(long)]
    out: PathBuf,
    /// JSON results path.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only these abuses (comma-separated names as in the report, e.g. "slowloris,slow reader").
    #[arg(long)]
    only: Option<String>,
    /// The command line to print in the report (the wrapper script's).
    #[arg(long, default_value = "")]
    command: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("abuse-rss: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    raise_fd_limit();
    let origin = loadtests::Origin::spawn("127.0.0.1:0", loadtests::OriginConfig::default())
        .map_err(|e| format!("origin: {e}"))?;
    let sink = SlowSink::spawn(64 * 1024).map_err(|e| format!("slow upstream: {e}"))?;
    let work = std::env::temp_dir().join(format!("abuse-rss-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let config = work.join("gateway.toml");
    std::fs::write(&config, gateway_config(origin.addr(), sink.addr, args.connection_limit))
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let scale = Scale {
        slowloris: 1000,
        slow_readers: 200,
        connection_limit: args.connection_limit,
        threads: 8,
        zero_window_conns: 10,
        upload_bytes: 8 << 20,
    };
    eprintln!("abuse-rss: origin {}, slow upstream {}", origin.addr(), sink.addr);
    let load_start = load_average();
    let mut results = Vec::new();
    let wanted = |a: Abuse| args.only.as_deref().is_none_or(|list| list.split(',').any(|n| n.trim() == a.name()));
    for abuse in attacks::ALL.into_iter().filter(|a| wanted(*a)) {
        // A fresh gateway per abuse: memory an allocator keeps after one abuse would otherwise
        // show up as the next one's.
        let log = work.join(format!("gateway-{}.log", results.len()));
        let mut gw = Gateway::start(&args.gateway, &config, &log)?;
        warm_up(&gw);
        eprintln!("abuse-rss: {} for {} s (gateway pid {} on {})", abuse.name(), args.duration, gw.pid(), gw.listener);
        let r = one_abuse(&mut gw, abuse, &scale, args)?;
        eprintln!(
            "abuse-rss:   before {} peak {} after {} settled {} MiB; good {} ok {} failed",
            report::mib(r.before.rss_kib),
            report::mib(r.peak_kib),
            report::mib(r.after.rss_kib),
            report::mib(r.settled.rss_kib),
            r.good.ok,
            r.good.failed
        );
        results.push(r);
        gw.stop();
    }
    let text = document(args, &scale, &results, (load_start, load_average()));
    std::fs::write(&args.out, text).map_err(|e| format!("{}: {e}", args.out.display()))?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({ "duration_s": args.duration, "settle_s": args.settle, "results": results });
        std::fs::write(path, format!("{json:#}\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// Two seconds of the good client, then a second of rest: connections, pools and allocator
/// arenas that any traffic creates exist before "before" is read.
fn warm_up(gw: &Gateway) {
    let stop = Arc::new(AtomicBool::new(false));
    let warm = attacks::good_client(gw.listener, "/bytes/1024", Arc::clone(&stop));
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let _ = warm.join();
    thread::sleep(Duration::from_secs(1));
}

fn one_abuse(gw: &mut Gateway, abuse: Abuse, scale: &Scale, args: &Args) -> Result<AbuseResult, String> {
    let before = gw.memory()?;
    gw.reset_peak();
    let metrics_before = report::parse_metrics(&gw.admin_get("/metrics")?);
    let peak = Arc::new(AtomicU64::new(before.rss_kib));
    let (stop_attack, stop_good, stop_sampler) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let sampler = {
        let (peak, stop, pid) = (Arc::clone(&peak), Arc::clone(&stop_sampler), gw.pid());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(m) = read_memory(pid) {
                    peak.fetch_max(m.rss_kib.max(m.hwm_kib), Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let good = attacks::good_client(gw.listener, "/bytes/1024", Arc::clone(&stop_good));
    let tally = Arc::new(Tally::default());
    let attacker = {
        let (stop, tally, scale, addr) = (Arc::clone(&stop_attack), Arc::clone(&tally), *scale, gw.listener);
        thread::spawn(move || abuse.run(addr, &scale, &stop, &tally))
    };
    thread::sleep(Duration::from_secs(args.duration));
    let at_end = gw.memory()?;
    let metrics_end = report::parse_metrics(&gw.admin_get("/metrics")?);
    stop_attack.store(true, Ordering::Relaxed);
    let _ = attacker.join();
    stop_good.store(true, Ordering::Relaxed);
    let good = good.join().map_err(|_| "the good client panicked".to_owned())?;
    let after = gw.memory()?;
    thread::sleep(Duration::from_secs(args.settle));
    let settled = gw.memory()?;
    let metrics_settled = report::parse_metrics(&gw.admin_get("/metrics")?);
    let open_after =
        report::changes(&metrics_settled, &metrics_settled, &["gateway_connections_active", "gateway_requests_active"]);
    stop_sampler.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let peak_kib = peak.load(Ordering::Relaxed).max(settled.hwm_kib).max(at_end.rss_kib);
    let counters = report::changes(&metrics_before, &metrics_end, families(abuse));
    Ok(AbuseResult {
        name: abuse.name().to_owned(),
        what: abuse.describe(scale),
        attacker: tally.summary(abuse.unit()),
        before,
        peak_kib,
        at_end,
        after,
        settled,
        good,
        counters,
        open_after,
    })
}

/// The metric families that tell what the gateway did about each abuse.
fn families(abuse: Abuse) -> &'static [&'static str] {
    const CONN: [&str; 3] =
        ["gateway_connections_accepted_total", "gateway_connections_rejected_total", "gateway_connections_active"];
    match abuse {
        Abuse::Slowloris => &[
            "gateway_connections_accepted_total",
            "gateway_connections_active",
            "gateway_header_read_timeouts_total",
            "gateway_requests_rejected_total",
        ],
        Abuse::SlowReader => &[
            "gateway_connections_accepted_total",
            "gateway_connections_active",
            "gateway_requests_active",
            "gateway_upstream_requests_active",
            "gateway_downstream_bytes_out_total",
            "gateway_admission_decisions_total",
        ],
        Abuse::ConnectionFlood => &CONN,
        Abuse::PipelinedFlood => {
            &["gateway_requests_total", "gateway_requests_rejected_total", "gateway_connections_accepted_total"]
        }
        Abuse::OversizedHeaders => &["gateway_requests_rejected_total", "gateway_connections_accepted_total"],
        Abuse::H2RapidReset | Abuse::H2Continuation | Abuse::H2ControlFlood | Abuse::H2ZeroWindow => &[
            "gateway_h2_abuse_total",
            "gateway_h2_connections_total",
            "gateway_h2_streams_total",
            "gateway_h2_protocol_errors_total",
            "gateway_requests_active",
            "gateway_upstream_requests_active",
            "gateway_admission_decisions_total",
        ],
        Abuse::SlowUpload => &[
            "gateway_requests_active",
            "gateway_upstream_requests_active",
            "gateway_downstream_bytes_in_total",
            "gateway_upstream_timeouts_total",
            "gateway_requests_rejected_total",
        ],
    }
}

fn gateway_config(origin: SocketAddr, slow: SocketAddr, limit: usize) -> String {
    format!(
        r#"[server]
workers = 1
io_driver = "io_uring"
admin = {{ address = "127.0.0.1:0" }}
drain_timeout = "2s"
log_level = "info"
watch = false

[server.limits]
max_connections_per_worker = {limit}

[[listeners]]
name = "main"
address = "127.0.0.1:0"
protocols = ["h2", "http/1.1"]

[[routes]]
name = "hello"
match = {{ path = "/" }}
direct_response = {{ status = 200, body = "hello\n" }}

[[routes]]
name = "upload"
match = {{ path_prefix = "/upload" }}
cluster = "slow"
timeout = "60s"

[[routes]]
name = "origin"
cluster = "origin"
timeout = "60s"

[[clusters]]
name = "origin"
endpoints = ["{origin}"]

[[clusters]]
name = "slow"
endpoints = ["{slow}"]
"#
    )
}

fn document(args: &Args, scale: &Scale, results: &[AbuseResult], load: (String, String)) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut s = String::from("# abuse-rss: the gateway's memory under abuse\n\n");
    if !args.command.is_empty() {
        s.push_str(&format!("Command: `{}`\n\n", args.command));
    }
    s.push_str(&format!(
        "Machine: {cpus} CPUs ({cpu}), Linux {}. **Shared with other builders during the run**: figures of \
         memory are unaffected, latencies of the good client are not precise (load average at the start \
         {}, at the end {}).\n\n",
        kernel.trim(),
        load.0,
        load.1
    ));
    s.push_str(&format!(
        "Gateway: release build, `workers = 1`, `io_driver = \"io_uring\"`, `max_connections_per_worker = {}`, \
         other limits and timeouts at their defaults (header read 10 s, idle 60 s, body I/O 30 s, head 64 KiB, \
         HTTP/2 100 streams and the flood limits), one h2c + HTTP/1.1 listener; routes: `/` answered by the \
         gateway, `/upload` to an upstream that reads 64 KiB/s per connection, everything else to the bundled \
         origin. Each abuse runs {} s while a good client sends `GET /bytes/1024` (proxied) on a keep-alive \
         connection every 10 ms; then the abuser closes everything and RSS is read again at once and after {} s. \
         Each abuse gets a fresh gateway process, warmed up by 2 s of the good client; \"before\" is its RSS \
         at rest after that. Threads: {} per threaded abuse.\n\n",
        scale.connection_limit, args.duration, args.settle, scale.threads
    ));
    s.push_str(&report::markdown(results, Duration::from_secs(args.settle)));
    s
}

/// The gateway process and its addresses (read from its log).
struct Gateway {
    child: Child,
    listener: SocketAddr,
    admin: SocketAddr,
}

impl Gateway {
    fn start(bin: &Path, config: &Path, log: &Path) -> Result<Self, String> {
        let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new(bin);
        command.arg("run").arg("--config").arg(config).env("RUST_LOG", "info").stdout(Stdio::null()).stderr(file);
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--allow-root");
        }
        let child = command.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut gw = Self { child, listener: ([127, 0, 0, 1], 0).into(), admin: ([127, 0, 0, 1], 0).into() };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let addr = |marker: &str| -> Option<SocketAddr> {
                let line = text.lines().find(|l| l.contains(marker))?;
                line.split("address=").nth(1)?.split_whitespace().next()?.parse().ok()
            };
            if let (Some(l), Some(a), true) =
                (addr("listener bound"), addr("admin listening"), text.contains("serving"))
            {
                gw.listener = l;
                gw.admin = a;
                return Ok(gw);
            }
            if let Ok(Some(status)) = gw.child.try_wait() {
                return Err(format!("the gateway exited during startup ({status}):\n{text}"));
            }
            if Instant::now() > deadline {
                return Err(format!("the gateway did not start within 15 s:\n{text}"));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn memory(&mut self) -> Result<Memory, String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("the gateway exited ({status})"));
        }
        read_memory(self.pid()).ok_or_else(|| "cannot read the gateway's /proc status".to_owned())
    }

    /// Resets VmHWM to the current RSS (`clear_refs` 5); without permission the peak is only
    /// what the sampler saw.
    fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }

    fn admin_get(&self, path: &str) -> Result<String, String> {
        let mut s =
            TcpStream::connect_timeout(&self.admin, Duration::from_secs(5)).map_err(|e| format!("admin: {e}"))?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n").as_bytes())
            .map_err(|e| format!("admin: {e}"))?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| format!("admin {path}: {e}"))?;
        Ok(text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
    }

    fn stop(mut self) {
        // SAFETY: signals our own child, by its pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn read_memory(pid: u32) -> Option<Memory> {
    report::parse_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// Many connections on both sides: the soft descriptor limit up to the hard one (the gateway
/// inherits it).
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit read and write one struct we own.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
