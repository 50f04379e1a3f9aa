//! Per-worker counters.
//!
//! Each worker owns one [`WorkerStats`] and is its only writer. Counters are `AtomicU64` used
//! with relaxed loads and stores only (never read-modify-write), which compiles to plain moves
//! on x86-64 and aarch64: no lock prefix and no contention on the request path, yet the admin
//! thread can read them at any time without a lock. Totals are summed at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with exactly one writer thread.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one. Only the owning worker may call this.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `n`. Only the owning worker may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// Subtracts `n` (for gauges). Only the owning worker may call this.
    #[inline]
    pub fn sub(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_sub(n), Ordering::Relaxed);
    }

    /// The current value; any thread.
    #[inline]
    pub fn value(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! worker_stats {
    ($( $(#[doc = $doc:expr])* $name:ident ),* $(,)?) => {
        /// Counters of one worker. Names and meanings are listed in [`WorkerStats::FIELDS`].
        #[derive(Debug, Default)]
        pub struct WorkerStats {
            $( $(#[doc = $doc])* pub $name: Counter, )*
        }

        impl WorkerStats {
            /// Every counter's name and help text, in a stable order.
            pub const FIELDS: &'static [(&'static str, &'static str)] = &[
                $( (stringify!($name), concat!($($doc),*)), )*
            ];

            /// Current values, in the order of [`WorkerStats::FIELDS`].
            pub fn values(&self) -> Vec<u64> {
                vec![$( self.$name.value(), )*]
            }
        }
    };
}

worker_stats! {
    /// Panics caught at a request's boundary (HTTP/1.1; answered 500 when nothing was sent yet).
    panics_request,
    /// Panics caught at an HTTP/2 stream's boundary (answered 500 or reset).
    panics_stream,
    /// Panics caught at a connection's boundary (the connection closed).
    panics_connection,
    /// Downstream connections accepted.
    connections_accepted,
    /// Times the worker stopped accepting because it was at its connection limit.
    connections_rejected,
    /// Downstream connections currently open (gauge).
    connections_active,
    /// Idle HTTP/1.1 connections (plain, and TLS on io_uring) parked without a task, included in connections_active (gauge).
    connections_parked,
    /// Requests whose head was parsed completely.
    requests_total,
    /// Requests currently being handled (gauge).
    requests_active,
    /// Responses with a 1xx status (final responses only; 100 Continue is not counted).
    responses_1xx,
    /// Responses with a 2xx status.
    responses_2xx,
    /// Responses with a 3xx status.
    responses_3xx,
    /// Responses with a 4xx status.
    responses_4xx,
    /// Responses with a 5xx status.
    responses_5xx,
    /// Requests refused for malformed or over-limit input (400, 413, 414, 417, 426, 431, 501, 505).
    requests_rejected,
    /// Connections closed because the request head did not arrive within the header-read timeout.
    header_read_timeouts,
    /// Bytes read from downstream clients.
    downstream_bytes_in,
    /// Bytes written to downstream clients.
    downstream_bytes_out,
    /// New upstream connections opened.
    upstream_connects,
    /// Upstream connection attempts that failed or timed out.
    upstream_connect_errors,
    /// Requests sent on a pooled (reused) upstream connection.
    upstream_reuses,
    /// Requests retried once on a fresh connection after a reused connection failed before any response byte.
    upstream_stale_retries,
    /// Pooled upstream connections dropped when taken: the upstream had closed them, or sent bytes while they were idle.
    upstream_idle_discards,
    /// Tries sent again after a failed try, under the route's retry policy.
    upstream_retries,
    /// Retries not made because the cluster's retry budget was used up.
    upstream_retries_budget_exhausted,
    /// Requests answered 504 at once because their incoming deadline (grpc-timeout or the deadline header) had expired.
    requests_deadline_expired,
    /// Upstream responses refused as malformed (answered 502).
    upstream_protocol_errors,
    /// Upstream exchanges that hit the route timeout (answered 504).
    upstream_timeouts,
    /// Requests currently waiting on or exchanging with an upstream (gauge).
    upstream_requests_active,
    /// Requests refused with 503 because their priority class had no capacity (shed).
    requests_shed,
    /// Of `requests_shed`, those refused on arrival because their class's queue stood (the
    /// queue-delay signal).
    requests_shed_standing,
    /// Requests refused with 503 because a cluster cap was reached (overflow).
    requests_overflow,
    /// Requests refused with 429 by a rate limit.
    requests_rate_limited,
    /// Requests delayed by a rate limit in delay mode (then served).
    requests_delayed,
    /// Requests that waited in a cluster's priority queue for an upstream slot.
    requests_queued,
    /// WebSocket tunnels established (the upstream answered 101 and it was relayed).
    websocket_upgrades,
    /// WebSocket tunnels currently open (gauge).
    websocket_active,
    /// TLS handshakes completed.
    tls_handshakes,
    /// TLS handshakes completed by resuming an earlier session.
    tls_resumptions,
    /// TLS handshakes failed: no protocol version in common (e.g. a TLS 1.0/1.1 client).
    tls_failed_protocol_version,
    /// TLS handshakes failed: no cipher suite or signature scheme in common.
    tls_failed_no_shared_cipher,
    /// TLS handshakes failed: no certificate for the requested (or missing) SNI name.
    tls_failed_unknown_sni,
    /// TLS handshakes failed: client certificate missing, invalid or untrusted (mTLS).
    tls_failed_client_certificate,
    /// TLS handshakes failed: malformed or unexpected handshake messages.
    tls_failed_bad_message,
    /// TLS handshakes failed: the client closed the connection during the handshake.
    tls_failed_eof,
    /// TLS handshakes failed: not completed within the handshake timeout.
    tls_failed_timeout,
    /// TLS handshakes failed for another reason (I/O error, internal).
    tls_failed_other,
    /// Connections refused for their PROXY protocol header: the bytes start no PROXY header the listener accepts.
    pp_failed_missing,
    /// Connections refused for their PROXY protocol header: a v1 line over 107 bytes or a v2 header over 2064 bytes.
    pp_failed_too_long,
    /// Connections refused for their PROXY protocol header: a malformed v1 line (protocol, addresses or ports).
    pp_failed_bad_v1,
    /// Connections refused for their PROXY protocol header: a v2 version other than 2.
    pp_failed_bad_version,
    /// Connections refused for their PROXY protocol header: a v2 command other than LOCAL or PROXY.
    pp_failed_bad_command,
    /// Connections refused for their PROXY protocol header: an unknown v2 address family or transport, or a datagram one.
    pp_failed_bad_family,
    /// Connections refused for their PROXY protocol header: a v2 length too short for its addresses.
    pp_failed_bad_length,
    /// Connections refused for their PROXY protocol header: not complete within proxy_protocol_timeout.
    pp_failed_timeout,
    /// Connections refused for their PROXY protocol header: the peer closed (or reset) before the header was complete.
    pp_failed_closed,
    /// Connections refused for their PROXY protocol header: a peer outside the listener's trusted_proxies.
    pp_failed_untrusted_peer,
    /// HTTP/2 connections served (TLS with ALPN h2, or cleartext with prior knowledge).
    h2_connections,
    /// HTTP/2 streams (requests) accepted.
    h2_streams,
    /// HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for resetting streams too fast.
    h2_abuse_reset_flood,
    /// HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for a PING/SETTINGS/PRIORITY flood.
    h2_abuse_control_flood,
    /// HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for a flood of empty frames.
    h2_abuse_empty_frames,
    /// HTTP/2 connections closed for a header block (HEADERS + CONTINUATION) over the limit.
    h2_abuse_header_block,
    /// HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for leaving responses without
    /// flow-control window for `server.http2.stall_timeout`.
    h2_abuse_stall,
    /// HTTP/2 connections refused at once because their source was cut for stalling flow control
    /// within the last minute and already holds its few allowed connections.
    h2_abuse_penalized,
    /// HTTP/2 connections ended by a protocol error (the h2 layer sent or received GOAWAY with an error).
    h2_protocol_errors,
}

impl WorkerStats {
    /// Counts a final response status.
    #[inline]
    pub fn count_status(&self, status: u16) {
        match status {
            100..=199 => self.responses_1xx.inc(),
            200..=299 => self.responses_2xx.inc(),
            300..=399 => self.responses_3xx.inc(),
            400..=499 => self.responses_4xx.inc(),
            _ => self.responses_5xx.inc(),
        }
    }
}

impl WorkerStats {
    /// Counts a failed TLS handshake by its reason label (see `tls::handshake_failure_reason`).
    pub fn count_tls_failure(&self, reason: &str) {
        let c = match reason {
            "protocol_version" => &self.tls_failed_protocol_version,
            "no_shared_cipher" => &self.tls_failed_no_shared_cipher,
            "unknown_sni" | "no_certificate" => &self.tls_failed_unknown_sni,
            "bad_client_certificate" | "client_certificate_required" => &self.tls_failed_client_certificate,
            "bad_message" | "decode_error" => &self.tls_failed_bad_message,
            "eof" => &self.tls_failed_eof,
            "timeout" => &self.tls_failed_timeout,
            _ => &self.tls_failed_other,
        };
        c.inc();
    }
}

impl WorkerStats {
    /// Counts a connection refused for its PROXY protocol header, by reason label.
    pub fn count_proxy_protocol_error(&self, reason: &str) {
        let c = match reason {
            "missing" => &self.pp_failed_missing,
            "too_long" => &self.pp_failed_too_long,
            "bad_v1" => &self.pp_failed_bad_v1,
            "bad_version" => &self.pp_failed_bad_version,
            "bad_command" => &self.pp_failed_bad_command,
            "bad_family" => &self.pp_failed_bad_family,
            "bad_length" => &self.pp_failed_bad_length,
            "timeout" => &self.pp_failed_timeout,
            "closed" => &self.pp_failed_closed,
            _ => &self.pp_failed_untrusted_peer,
        };
        c.inc();
    }
}

/// Renders workers' stats as JSON: `{"workers":[{...},...],"totals":{...}}`. Gauges sum too.
pub fn to_json(workers: &[std::sync::Arc<WorkerStats>]) -> serde_json::Value {
    let mut totals = vec![0u64; WorkerStats::FIELDS.len()];
    let mut per_worker = Vec::with_capacity(workers.len());
    for (id, w) in workers.iter().enumerate() {
        let values = w.values();
        let mut obj = serde_json::Map::new();
        obj.insert("worker".into(), id.into());
        for ((name, _), (v, t)) in WorkerStats::FIELDS.iter().zip(values.iter().zip(totals.iter_mut())) {
            *t += *v;
            obj.insert((*name).into(), (*v).into());
        }
        per_worker.push(serde_json::Value::Object(obj));
    }
    let totals: serde_json::Map<String, serde_json::Value> =
        WorkerStats::FIELDS.iter().zip(totals).map(|((name, _), v)| ((*name).to_string(), v.into())).collect();
    serde_json::json!({ "workers": per_worker, "totals": totals })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counters_sum_into_totals() {
        let a = Arc::new(WorkerStats::default());
        let b = Arc::new(WorkerStats::default());
        a.requests_total.add(3);
        b.requests_total.inc();
        a.count_status(204);
        b.count_status(503);
        b.connections_active.add(2);
        b.connections_active.sub(1);
        let json = to_json(&[a, b]);
        assert_eq!(json["totals"]["requests_total"], 4);
        assert_eq!(json["totals"]["responses_2xx"], 1);
        assert_eq!(json["totals"]["responses_5xx"], 1);
        assert_eq!(json["workers"][1]["connections_active"], 1);
        assert_eq!(json["workers"][0]["worker"], 0);
    }

    #[test]
    fn every_field_has_help() {
        for (name, help) in WorkerStats::FIELDS {
            assert!(!help.trim().is_empty(), "{name} has no help text");
        }
    }
}
pub mod histogram;
pub mod metrics;
pub mod process;
pub mod prometheus;
pub mod series;
