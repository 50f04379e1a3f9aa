//! What one request did: filled in while it is handled, reported once at its end to the
//! per-worker stats, the route and cluster metrics and the access log.

use crate::pipeline::deadline::Incoming;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant, SystemTime};

use crate::accesslog::{valid_request_id, Entry};
use crate::request::Request;
use crate::worker::{Local, Worker};

/// Per-connection, reused for every request (its buffers keep their capacity).
#[derive(Default)]
pub struct Exchange {
    pub started: Option<Instant>,
    /// The status sent downstream; 0 while none was sent.
    pub status: u16,
    /// Index into the snapshot's routes.
    pub route: Option<usize>,
    /// The request came over TLS (HSTS applies).
    pub tls: bool,
    /// The gateway answered the client's `Expect: 100-continue` itself (an upstream's 100 is
    /// then not forwarded).
    pub continued: bool,
    /// Index into the snapshot's clusters.
    pub cluster: Option<usize>,
    /// Index into that cluster's endpoints, of the last try.
    pub endpoint: Option<usize>,
    pub upstream: Option<SocketAddr>,
    /// The request's address when it is not the connection's (behind a trusted proxy).
    client_ip: Option<std::net::IpAddr>,
    /// From sending the request upstream to the response head.
    pub upstream_elapsed: Option<Duration>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The request id: the client's `x-request-id` when valid, else one generated here.
    pub request_id: Vec<u8>,
    /// The client's deadline (`grpc-timeout`, `server.deadline_header`), if it sent one.
    pub deadline: Incoming,
    /// Request fields the access log needs, copied out of the read buffer (which body
    /// streaming may reuse before the request ends). Filled only when the log is on.
    fields: Vec<u8>,
    method: Range<usize>,
    path: Range<usize>,
    query: Option<Range<usize>>,
    host: Option<Range<usize>>,
    user_agent: Option<Range<usize>>,
    referer: Option<Range<usize>>,
    version: &'static str,
}

/// The request fields the access log records, whichever protocol carried them.
struct LogFields<'a> {
    method: &'a [u8],
    path: &'a [u8],
    query: Option<&'a [u8]>,
    host: Option<&'a [u8]>,
    user_agent: Option<&'a [u8]>,
    referer: Option<&'a [u8]>,
}

impl Exchange {
    /// Starts accounting for a new request; `head_len`: the bytes its head took on the wire
    /// (HTTP/1.1; 0 for HTTP/2, whose body bytes alone are counted).
    pub fn begin(&mut self, worker: &Worker, req: &Request<'_>, head_len: usize, deadline_header: Option<&str>) {
        self.reset();
        self.bytes_in = head_len as u64;
        self.tls = req.client.tls.is_some();
        self.version = req.version.as_str();
        self.client_ip = (req.addr != req.client.peer.ip()).then_some(req.addr);
        let mut client_id = None;
        let mut ua = None;
        let mut referer = None;
        for (name, value) in req.fields.iter() {
            if name.eq_ignore_ascii_case(b"x-request-id") {
                client_id = Some(value);
            } else if name.eq_ignore_ascii_case(b"user-agent") {
                ua = Some(value);
            } else if name.eq_ignore_ascii_case(b"referer") {
                referer = Some(value);
            } else {
                self.deadline.observe(name, value, deadline_header);
            }
        }
        self.set_request_id(worker, client_id);
        if worker.access_log_enabled() {
            self.keep_fields(LogFields {
                method: req.method_bytes,
                path: req.path,
                query: req.query,
                host: req.authority,
                user_agent: ua,
                referer,
            });
        }
    }

    /// Clears what the previous request on the connection left.
    fn reset(&mut self) {
        self.started = Some(Instant::now());
        self.status = 0;
        self.continued = false;
        self.route = None;
        self.cluster = None;
        self.endpoint = None;
        self.upstream = None;
        self.client_ip = None;
        self.upstream_elapsed = None;
        self.bytes_in = 0;
        self.bytes_out = 0;
        self.request_id.clear();
        self.deadline = Incoming::default();
    }

    /// The client's `x-request-id` when valid, else a new one.
    fn set_request_id(&mut self, worker: &Worker, client_id: Option<&[u8]>) {
        match client_id.filter(|v| valid_request_id(v)) {
            Some(id) => self.request_id.extend_from_slice(id),
            None => self.request_id.extend_from_slice(worker.next_request_id().as_bytes()),
        }
    }

    /// Copies the fields the access log needs out of the request (whose buffers may be reused).
    fn keep_fields(&mut self, f: LogFields<'_>) {
        self.fields.clear();
        let mut keep = |bytes: &[u8]| {
            let start = self.fields.len();
            self.fields.extend_from_slice(bytes);
            start..self.fields.len()
        };
        self.method = keep(f.method);
        self.path = keep(f.path);
        self.query = f.query.map(&mut keep);
        self.host = f.host.map(&mut keep);
        self.user_agent = f.user_agent.map(&mut keep);
        self.referer = f.referer.map(&mut keep);
    }

    /// Reports the finished request: stats, metrics, access log. Returns the clock reading it
    /// took (the request's end), for the caller's next timer.
    pub fn finish(&self, worker: &Worker, local: &Local, client: std::net::IpAddr) -> Instant {
        #[cfg(feature = "fault-injection")]
        super::fault::on_finish();
        let now = Instant::now();
        let elapsed = self.started.map(|s| now.saturating_duration_since(s)).unwrap_or_default();
        if self.status != 0 {
            worker.stats.count_status(self.status);
        }
        if let Some(r) = self.route.and_then(|r| local.route(r)) {
            r.metrics.observe(self.status, elapsed);
        }
        if let (Some(c), Some(up)) = (self.cluster.and_then(|c| local.clusters.get(c)), self.upstream_elapsed) {
            c.metrics().observe(self.status, up);
            if let Some(e) = self.endpoint.and_then(|i| c.endpoints.get(i)) {
                e.gauge.observe(self.status, up);
            }
        }
        if !worker.access_log_enabled() {
            return now;
        }
        let config = &local.snap.config;
        let field = |r: &Range<usize>| self.fields.get(r.clone()).unwrap_or_default();
        let entry = Entry {
            start: SystemTime::now().checked_sub(elapsed).unwrap_or_else(SystemTime::now),
            client: self.client_ip.unwrap_or(client),
            method: field(&self.method),
            path: field(&self.path),
            query: self.query.as_ref().map(field),
            version: self.version,
            host: self.host.as_ref().map(field),
            status: self.status,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            duration: elapsed,
            upstream: self.upstream,
            upstream_duration: self.upstream_elapsed,
            route: self.route.and_then(|r| config.routes.get(r)).map(|r| r.name.as_str()),
            cluster: self.cluster.and_then(|c| config.clusters.get(c)).map(|c| c.name.as_str()),
            request_id: &self.request_id,
            user_agent: self.user_agent.as_ref().map(field),
            referer: self.referer.as_ref().map(field),
        };
        worker.log(&entry);
        now
    }
}
