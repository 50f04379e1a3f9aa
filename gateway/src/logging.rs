//! The process log: a tracing subscriber writing to stderr, filtered by `RUST_LOG` or else
//! `server.log_level`, with two limits on what a client can make it write.
//!
//! - rustls logs a warning for each peer misbehaviour it meets (an IP address or an invalid name
//!   as SNI, unexpected messages, alerts): any client can send such a hello, as scanners and load
//!   tools do on every connection. The `rustls` target is capped at `error` unless the filter
//!   names `rustls` itself (`RUST_LOG=info,rustls=debug`); failed handshakes are counted by reason
//!   in `gateway_tls_handshake_failures_total` and logged at debug.
//! - An event that names a client (a `peer` field, by this code base's convention: e.g. an
//!   HTTP/2 flood answered with GOAWAY) at info or above is written at most
//!   [`CLIENT_EVENT_BURST`] times per call site per [`CLIENT_EVENT_WINDOW`]; the rest are
//!   counted, and [`ClientEvents::report`] (every window, and at exit) logs how many were
//!   suppressed per call site.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::callsite::Identifier;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Lines one client-event call site may write per [`CLIENT_EVENT_WINDOW`].
pub const CLIENT_EVENT_BURST: u32 = 10;
/// The window of [`CLIENT_EVENT_BURST`], and how often suppressed lines are reported.
pub const CLIENT_EVENT_WINDOW: Duration = Duration::from_secs(60);

/// Installs the process subscriber (once; later calls change nothing) and starts the thread
/// that reports suppressed client events. The returned handle reports what is left at exit.
pub fn init(level: &str) -> ClientEvents {
    let spec = filter_spec(std::env::var("RUST_LOG").ok().as_deref(), level);
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info,rustls=error"));
    let limiter = ClientEvents::default();
    let fmt = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    if tracing_subscriber::registry().with(filter).with(limiter.clone()).with(fmt).try_init().is_ok() {
        let _ = FILTER.set(Filter { handle, spec: Mutex::new(spec) });
        let reporter = limiter.clone();
        let spawned = std::thread::Builder::new().name("gw-log-report".into()).spawn(move || loop {
            std::thread::sleep(CLIENT_EVENT_WINDOW);
            reporter.report();
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the log report thread; suppressed client events are reported at exit");
        }
    }
    limiter
}

/// The process's live log filter, changed by the admin's `POST /logging`.
struct Filter {
    handle: tracing_subscriber::reload::Handle<EnvFilter, tracing_subscriber::Registry>,
    spec: Mutex<String>,
}

static FILTER: std::sync::OnceLock<Filter> = std::sync::OnceLock::new();

/// The filter directives in force, when this process's log was set up by [`init`].
pub fn filter() -> Option<String> {
    let f = FILTER.get()?;
    Some(f.spec.lock().map(|s| s.clone()).unwrap_or_else(|e| e.into_inner().clone()))
}

/// Replaces the log filter with `directives` (`RUST_LOG` syntax: `debug`,
/// `info,gateway::pipeline=trace`), with `rustls=error` added unless they name `rustls`.
/// Returns the directives applied; an invalid filter changes nothing. Lasts until the next
/// change or restart (a config reload does not reset it).
pub fn set_filter(directives: &str) -> Result<String, String> {
    let f = FILTER.get().ok_or("the log of this process is not managed by the gateway (embedded use)")?;
    let directives = directives.trim();
    if directives.is_empty() {
        return Err("empty filter: give a level (error, warn, info, debug, trace) or directives".into());
    }
    // No regular expressions in field filters: an admin client cannot make matching costly.
    let parse = |d: &str| EnvFilter::builder().with_regex(false).parse(d);
    parse(directives).map_err(|e| format!("invalid log filter {directives:?}: {e}"))?;
    let spec = filter_spec(Some(directives), "info");
    let filter = parse(&spec).map_err(|e| format!("invalid log filter {spec:?}: {e}"))?;
    f.handle.reload(filter).map_err(|e| format!("cannot change the log filter: {e}"))?;
    *f.spec.lock().unwrap_or_else(|e| e.into_inner()) = spec.clone();
    tracing::warn!(filter = %spec, "log filter changed through the admin port");
    Ok(spec)
}

/// Routes panics to the log (once per process): each panic is logged at error level with its
/// message, location and thread (and a backtrace when `RUST_BACKTRACE` asks for one), whether
/// a task boundary catches it or not. Without a log subscriber the previous hook prints it.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !tracing::dispatcher::has_been_set() {
                previous(info);
                return;
            }
            let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(non-string panic payload)");
            let thread = std::thread::current();
            let backtrace = std::backtrace::Backtrace::capture();
            let backtrace = (backtrace.status() == std::backtrace::BacktraceStatus::Captured).then_some(backtrace);
            tracing::error!(
                thread = thread.name().unwrap_or("?"),
                location = location.as_deref().unwrap_or("?"),
                backtrace = backtrace.map(tracing::field::display),
                "panic: {message}"
            );
        }));
    });
}

/// The filter directives: `RUST_LOG` when set and valid, else `level` (else `info`), with
/// `rustls=error` added unless they name `rustls` themselves.
pub fn filter_spec(rust_log: Option<&str>, level: &str) -> String {
    let valid = |s: &&str| EnvFilter::try_new(s).is_ok();
    let spec = rust_log.filter(valid).or(Some(level).filter(valid)).unwrap_or("info").trim();
    let names_rustls = spec.split(',').any(|d| d.trim().starts_with("rustls"));
    match (spec.is_empty(), names_rustls) {
        (_, true) => spec.to_owned(),
        (true, false) => "rustls=error".to_owned(),
        (false, false) => format!("{spec},rustls=error"),
    }
}

/// The per-call-site limit on events that name a client; cheap to clone (one shared state).
#[derive(Clone, Default)]
pub struct ClientEvents {
    sites: Arc<Mutex<HashMap<Identifier, (&'static Metadata<'static>, Window)>>>,
}

/// One call site's count in the current window.
struct Window {
    start: Instant,
    written: u32,
    suppressed: u64,
}

impl Window {
    fn new(now: Instant) -> Self {
        Self { start: now, written: 0, suppressed: 0 }
    }

    /// Whether one more event may be written at `now`; counts it as suppressed if not.
    fn admit(&mut self, now: Instant) -> bool {
        if now.duration_since(self.start) >= CLIENT_EVENT_WINDOW {
            self.start = now;
            self.written = 0;
        }
        if self.written < CLIENT_EVENT_BURST {
            self.written += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

impl ClientEvents {
    fn admit(&self, metadata: &'static Metadata<'static>, now: Instant) -> bool {
        let Ok(mut sites) = self.sites.lock() else { return true };
        sites.entry(metadata.callsite()).or_insert_with(|| (metadata, Window::new(now))).1.admit(now)
    }

    /// Logs one line per call site with events suppressed since the last report.
    pub fn report(&self) {
        let suppressed: Vec<(&'static Metadata<'static>, u64)> = match self.sites.lock() {
            Ok(mut sites) => sites
                .values_mut()
                .filter(|(_, w)| w.suppressed > 0)
                .map(|(metadata, w)| (*metadata, std::mem::take(&mut w.suppressed)))
                .collect(),
            Err(_) => return,
        };
        for (metadata, n) in suppressed {
            tracing::warn!(
                suppressed = n,
                source = %format_args!("{}:{}", metadata.file().unwrap_or("?"), metadata.line().unwrap_or(0)),
                "client-caused log lines suppressed (at most {CLIENT_EVENT_BURST} per source per {}s)",
                CLIENT_EVENT_WINDOW.as_secs()
            );
        }
    }
}

impl<S: Subscriber> Layer<S> for ClientEvents {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let metadata = event.metadata();
        if *metadata.level() > Level::INFO || metadata.fields().field("peer").is_none() {
            return true;
        }
        self.admit(metadata, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_is_capped_unless_the_filter_names_it() {
        assert_eq!(filter_spec(None, "info"), "info,rustls=error");
        assert_eq!(filter_spec(Some("debug"), "info"), "debug,rustls=error");
        assert_eq!(filter_spec(Some("info,rustls=debug"), "warn"), "info,rustls=debug");
        assert_eq!(filter_spec(Some("info,rustls::msgs=trace"), "warn"), "info,rustls::msgs=trace");
        // An invalid RUST_LOG falls back to the config's level, an invalid level to info.
        assert_eq!(filter_spec(Some("info,[=nope"), "warn"), "warn,rustls=error");
        assert_eq!(filter_spec(None, "=="), "info,rustls=error");
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn client_events_are_limited_per_call_site_and_the_rest_reported() {
        let out = Captured::default();
        let writer = out.clone();
        let limiter = ClientEvents::default();
        let subscriber = tracing_subscriber::registry()
            .with(EnvFilter::new(filter_spec(Some("info"), "info")))
            .with(limiter.clone())
            .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..1000 {
                tracing::info!(peer = %"192.0.2.1:4000", i, "client flood");
                tracing::warn!(target: "rustls::msgs::handshake", "Illegal SNI extension");
            }
            for i in 0..3 {
                tracing::info!(peer = %"192.0.2.1:4000", i, "another client event");
                tracing::info!(i, "operator event");
            }
            limiter.report();
            limiter.report();
        });
        let text = String::from_utf8_lossy(&out.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
        let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(count("client flood"), CLIENT_EVENT_BURST as usize, "{text}");
        assert_eq!(count("another client event"), 3, "{text}");
        assert_eq!(count("operator event"), 3, "{text}");
        assert_eq!(count("Illegal SNI"), 0, "{text}");
        // One report line, for the flooding call site only; the second report finds nothing.
        assert_eq!(count("client-caused log lines suppressed"), 1, "{text}");
        assert!(text.contains("suppressed=990") && text.contains("gateway/src/logging.rs:"), "{text}");
    }

    #[test]
    fn the_allowance_comes_back_after_the_window() {
        let start = Instant::now();
        let mut window = Window::new(start);
        let admitted = (0..100).filter(|_| window.admit(start)).count();
        assert_eq!((admitted, window.suppressed), (CLIENT_EVENT_BURST as usize, 90));
        assert!(!window.admit(start + CLIENT_EVENT_WINDOW - Duration::from_millis(1)));
        assert!(window.admit(start + CLIENT_EVENT_WINDOW));
        assert_eq!(window.suppressed, 91, "suppressed lines stay counted until reported");
    }
}
