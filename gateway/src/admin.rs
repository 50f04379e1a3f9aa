//! The gateway's admin endpoints (served by the `gateway-admin` server on its own thread).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use gateway_admin::{Handler, Request, Response};

use crate::runtime::Shared;
use crate::stats::WorkerStats;
use crate::ServerInfo;

pub fn handler(shared: Arc<Shared>, stats: Vec<Arc<WorkerStats>>, info: ServerInfo, started: Instant) -> Handler {
    Arc::new(move |req: &Request| {
        if req.method != "GET" && req.method != "HEAD" {
            return Response::text(405, "method not allowed\n");
        }
        match req.path.as_str() {
            "/healthz" => Response::text(200, "ok\n"),
            "/ready" => {
                if shared.draining.load(Ordering::Acquire) {
                    Response::text(503, "draining\n")
                } else {
                    Response::text(200, "ready\n")
                }
            }
            "/stats" => Response::json(200, &crate::stats::to_json(&stats)),
            "/server_info" => {
                let snap = shared.snapshot.load();
                let mut v = serde_json::to_value(&info).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("uptime_seconds".into(), started.elapsed().as_secs().into());
                    obj.insert("config_version".into(), snap.version.into());
                    obj.insert("draining".into(), shared.draining.load(Ordering::Acquire).into());
                }
                Response::json(200, &v)
            }
            _ => Response::text(404, "not found\n"),
        }
    })
}
