//! The active health checker: ONE per process, on its own thread with a small monoio runtime
//! (epoll driver), never on a worker and never per worker, so health traffic does not grow
//! with the worker count and checks never compete with requests for a worker's ring.
//!
//! It follows the published config snapshot: on every new version it starts one task per
//! endpoint of every cluster with a `health_check` (each after a random initial delay of up to
//! one interval, so checks of many endpoints do not go out in bursts), restarts the tasks whose
//! settings changed, and stops the tasks of endpoints that are gone (their entries leave the
//! [`HealthRegistry`]). A check connects (TLS when the cluster has `tls`), sends
//! `GET <path> HTTP/1.1` with `connection: close` and `user-agent: gateway-health-check`, and
//! must read the status line within `timeout`; the result goes to the endpoint's
//! [`EndpointHealth`], which the workers read.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use gateway_config::{Config, HealthCheck, UpstreamTls};
use monoio::net::TcpStream;

use crate::runtime::stream::Stream;
use crate::upstream::balancer::XorShift;
use crate::upstream::health::{EndpointHealth, HealthKey, HealthRegistry, Transition};
use crate::worker::Shared;

/// How often the checker looks for a new config version and for shutdown.
const TICK: Duration = Duration::from_millis(100);
/// How often (in ticks) registry entries of endpoints no longer configured are dropped again
/// (an entry still held by a worker's cluster state or a stopping task survives a sweep).
const SWEEP_TICKS: u64 = 50;
/// The longest status line read (and the read buffer's size).
const MAX_STATUS_LINE: usize = 1024;

/// Starts the checker thread; it ends once the process drains.
pub fn start(shared: Arc<Shared>) -> io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("health-check".into()).spawn(move || {
        let runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build();
        match runtime {
            Ok(mut rt) => rt.block_on(run(shared)),
            Err(e) => tracing::error!(error = %e, "health checker cannot start its runtime; endpoints stay healthy"),
        }
    })
}

/// What one endpoint's task checks, and how.
#[derive(Debug, Clone, PartialEq)]
struct Spec {
    check: HealthCheck,
    /// The `Host` field.
    host: String,
    tls: Option<UpstreamTls>,
    cluster: String,
}

struct Task {
    spec: Rc<Spec>,
    stop: Rc<Cell<bool>>,
}

async fn run(shared: Arc<Shared>) {
    let mut tasks: HashMap<HealthKey, Task> = HashMap::new();
    // The config the tasks follow: a new snapshot with the same version can carry new
    // endpoints (host names re-resolved), so the config itself is compared.
    let mut following: Option<Arc<Config>> = None;
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64);
    let rng = XorShift::new(seed);
    let mut keep = HashSet::new();
    let mut ticks: u64 = 0;
    while !shared.draining.load(Ordering::Acquire) {
        let snap = shared.snapshot.load_full();
        if !following.as_ref().is_some_and(|f| Arc::ptr_eq(f, &snap.config)) {
            following = Some(Arc::clone(&snap.config));
            keep = reconcile(&shared.health, &snap.config, &mut tasks, &rng);
        }
        ticks += 1;
        if ticks.is_multiple_of(SWEEP_TICKS) {
            sweep(&shared.health, &keep);
        }
        monoio::time::sleep(TICK).await;
    }
    for task in tasks.values() {
        task.stop.set(true);
    }
}

/// Brings the tasks in line with `config` (see the module docs); returns the configured keys.
fn reconcile(
    registry: &HealthRegistry,
    config: &Config,
    tasks: &mut HashMap<HealthKey, Task>,
    rng: &XorShift,
) -> HashSet<HealthKey> {
    let mut keep: HashSet<HealthKey> = HashSet::new();
    for cluster in &config.clusters {
        for endpoint in &cluster.endpoints {
            let key = (cluster.name.clone(), endpoint.address);
            let health = registry.endpoint(&cluster.name, endpoint.address);
            keep.insert(key.clone());
            let Some(check) = &cluster.health_check else {
                if let Some(old) = tasks.remove(&key) {
                    old.stop.set(true);
                }
                // Not checked: healthy, whatever an earlier config's checks found.
                health.reset();
                continue;
            };
            let spec = Spec {
                check: check.clone(),
                host: check.host.clone().unwrap_or_else(|| endpoint.name.clone()),
                tls: cluster.tls.clone(),
                cluster: cluster.name.clone(),
            };
            if tasks.get(&key).is_some_and(|t| *t.spec == spec) {
                continue;
            }
            if let Some(old) = tasks.remove(&key) {
                old.stop.set(true);
            }
            let task = Task { spec: Rc::new(spec), stop: Rc::new(Cell::new(false)) };
            let interval_ms = check.interval.as_millis().max(1) as usize;
            let jitter = Duration::from_millis(rng.below(interval_ms) as u64);
            monoio::spawn(check_loop(endpoint.address, Rc::clone(&task.spec), health, Rc::clone(&task.stop), jitter));
            tasks.insert(key, task);
        }
    }
    tasks.retain(|key, task| {
        let kept = keep.contains(key);
        if !kept {
            task.stop.set(true);
        }
        kept
    });
    sweep(registry, &keep);
    keep
}

/// Drops registry entries of endpoints not in `keep` that nothing else holds any more. An entry
/// a worker already took for a config newer than `keep` is held by that worker, so it stays and
/// the next reconcile finds it.
fn sweep(registry: &HealthRegistry, keep: &HashSet<HealthKey>) {
    registry.retain(|key, entry| keep.contains(key) || Arc::strong_count(entry) > 1);
}

async fn check_loop(
    address: SocketAddr,
    spec: Rc<Spec>,
    health: Arc<EndpointHealth>,
    stop: Rc<Cell<bool>>,
    jitter: Duration,
) {
    let tls = spec.tls.as_ref().and_then(|t| {
        let server_name = rustls_pki_types::ServerName::try_from(t.sni.clone()).ok()?;
        match crate::tls::client_config(t, &[b"http/1.1"]) {
            Ok(config) => Some((config, server_name)),
            Err(e) => {
                tracing::error!(cluster = %spec.cluster, error = %e, "health check TLS config");
                None
            }
        }
    });
    monoio::time::sleep(jitter).await;
    while !stop.get() {
        let result = check_once(address, &spec, tls.as_ref()).await;
        if stop.get() {
            break;
        }
        let (passed, status) = match result {
            Ok(status) => (spec.check.expects(status), Some(status)),
            Err(_) => (false, None),
        };
        let c = &spec.check;
        match health.record(passed, status, c.healthy_threshold, c.unhealthy_threshold) {
            Some(Transition::ToUnhealthy) => {
                tracing::warn!(cluster = %spec.cluster, endpoint = %address, ?status, "endpoint failed its health checks: unhealthy")
            }
            Some(Transition::ToHealthy) => {
                tracing::info!(cluster = %spec.cluster, endpoint = %address, "endpoint passed its health checks: healthy")
            }
            None => {}
        }
        monoio::time::sleep(spec.check.interval).await;
    }
}

type ClientTls = (Arc<rustls::ClientConfig>, rustls_pki_types::ServerName<'static>);

/// One check: the status code of the endpoint's answer, within the check's timeout.
async fn check_once(address: SocketAddr, spec: &Spec, tls: Option<&ClientTls>) -> io::Result<u16> {
    let exchange = async {
        let tcp = TcpStream::connect_addr(address).await?;
        tcp.set_nodelay(true)?;
        let mut stream = match tls {
            None => Stream::Tcp(tcp),
            Some((config, name)) => {
                use monoio::io::IntoPollIo;
                let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
                Stream::TlsClient(Box::new(connector.connect(name.clone(), tcp.into_poll_io()?).await?))
            }
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nhost: {}\r\nuser-agent: gateway-health-check\r\naccept: */*\r\nconnection: close\r\n\r\n",
            spec.check.path, spec.host
        )
        .into_bytes();
        let len = request.len();
        stream.write_all_range(request, 0..len).await.0?;
        let mut buf = Vec::with_capacity(MAX_STATUS_LINE);
        loop {
            let (res, b) = stream.read_append(buf).await;
            buf = b;
            if res? == 0 || buf.contains(&b'\n') || buf.len() == buf.capacity() {
                break;
            }
        }
        status_line(&buf)
    };
    crate::runtime::timeout(spec.check.timeout, exchange).await.map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
}

/// The code of an `HTTP/1.x NNN ...` status line.
fn status_line(buf: &[u8]) -> io::Result<u16> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not an HTTP/1.x status line");
    let rest = buf.strip_prefix(b"HTTP/1.").ok_or_else(bad)?;
    let code = rest.get(2..5).filter(|_| rest.get(1) == Some(&b' ')).ok_or_else(bad)?;
    let text = std::str::from_utf8(code).map_err(|_| bad())?;
    text.parse::<u16>().ok().filter(|c| (100..=599).contains(c)).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(status_line(b"HTTP/1.1 200 OK\r\n").ok(), Some(200));
        assert_eq!(status_line(b"HTTP/1.0 503 x\r\n").ok(), Some(503));
        assert_eq!(status_line(b"HTTP/1.1 204\r\n").ok(), Some(204));
        for bad in [&b""[..], b"HTTP/1.1 2", b"HTTP/2 200", b"HTTP/1.1 abc", b"HTTP/1.1 099 x", b"SSH-2.0"] {
            assert!(status_line(bad).is_err(), "{bad:?}");
        }
    }
}
