//! The process-level `metrics` recorder, for rare events recorded through the `metrics` facade
//! (admin requests and the like), never on the request path: the facade hashes keys and takes
//! shared atomics per call, which is fine a few times a second and not per request.
//!
//! Its output is appended after the gateway's own families by
//! [`super::prometheus::render_prometheus`]. A family of the recorder whose name collides with
//! one of ours (including a histogram's `_bucket`, `_sum` and `_count` series) is left out, so a
//! mistaken `counter!` cannot make the exposition invalid.

use ::metrics::{Recorder, SetRecorderError};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use super::histogram::BOUNDS_SECONDS;
use super::metrics::{Kind, FAMILIES, RECORDER_FAMILIES, WORKER_FAMILIES};

/// A `metrics` recorder rendering the Prometheus text format, with the help texts of
/// [`RECORDER_FAMILIES`] registered. Install it once with [`ProcessRecorder::install`].
#[derive(Debug)]
pub struct ProcessRecorder {
    recorder: PrometheusRecorder,
}

/// A cheap, cloneable reader of a [`ProcessRecorder`], kept in
/// [`super::prometheus::ProcessInfo::recorder`].
#[derive(Debug, Clone)]
pub struct ProcessHandle(PrometheusHandle);

impl ProcessRecorder {
    /// A recorder whose histograms use the gateway's latency buckets.
    pub fn new() -> Self {
        let builder = PrometheusBuilder::new();
        // `set_buckets` fails only for an empty list.
        let builder = builder.set_buckets(&BOUNDS_SECONDS).unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        for family in RECORDER_FAMILIES {
            let (name, help) = (family.name.into(), family.help.into());
            match family.kind {
                Kind::Counter => recorder.describe_counter(name, None, help),
                Kind::Gauge => recorder.describe_gauge(name, None, help),
                Kind::Histogram => recorder.describe_histogram(name, None, help),
            }
        }
        Self { recorder }
    }

    /// A reader of this recorder; stays valid after [`Self::install`].
    pub fn handle(&self) -> ProcessHandle {
        ProcessHandle(self.recorder.handle())
    }

    /// The recorder itself, e.g. for `metrics::with_local_recorder` in tests.
    pub fn recorder(&self) -> &PrometheusRecorder {
        &self.recorder
    }

    /// Installs this recorder as the process's global `metrics` recorder.
    ///
    /// # Errors
    ///
    /// A global recorder was already installed.
    pub fn install(self) -> Result<ProcessHandle, SetRecorderError<PrometheusRecorder>> {
        let handle = self.handle();
        ::metrics::set_global_recorder(self.recorder)?;
        Ok(handle)
    }
}

impl Default for ProcessRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessHandle {
    /// Appends the recorder's families to `out`, leaving out any family whose name collides with
    /// one rendered by the gateway itself, and blank lines.
    pub fn render_into(&self, out: &mut String) {
        let text = self.0.render();
        let mut skip_family = false;
        for line in text.lines() {
            if let Some(header) = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
                let name = header.split(' ').next().unwrap_or_default();
                skip_family = family_collides(name);
                if skip_family {
                    continue;
                }
            } else if line.is_empty() || line.starts_with('#') || skip_family || series_collides(sample_name(line)) {
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
}

const SERIES_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// Whether a recorder family named `name` could produce a series name we render, or one of ours
/// could produce its name.
fn family_collides(name: &str) -> bool {
    series_collides(name) || SERIES_SUFFIXES.iter().any(|suffix| ours().any(|ours| is_concat(ours.name, name, suffix)))
}

/// Whether `series` is a series name we render.
fn series_collides(series: &str) -> bool {
    ours().any(|family| {
        family.name == series
            || (family.kind == Kind::Histogram && SERIES_SUFFIXES.iter().any(|s| is_concat(series, family.name, s)))
    })
}

fn ours() -> impl Iterator<Item = &'static super::metrics::Family> {
    WORKER_FAMILIES.iter().map(|w| &w.family).chain(FAMILIES)
}

/// `whole == head + tail`, without allocating.
fn is_concat(whole: &str, head: &str, tail: &str) -> bool {
    whole.strip_prefix(head).is_some_and(|rest| rest == tail)
}

fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    line.get(..end).unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collisions_cover_histogram_series() {
        assert!(family_collides("gateway_requests_total"));
        assert!(family_collides("gateway_route_request_duration_seconds"));
        assert!(family_collides("gateway_route_request_duration_seconds_count"));
        assert!(!family_collides("gateway_requests"), "its _count, _sum and _bucket are free");
        assert!(!family_collides("gateway_admin_requests_total"));
        assert!(series_collides("gateway_cluster_upstream_duration_seconds_bucket"));
        assert!(!series_collides("gateway_admin_requests_total"));
    }

    #[test]
    fn recorder_families_do_not_collide_with_ours() {
        for family in RECORDER_FAMILIES {
            assert!(!family_collides(family.name), "{} collides with a rendered family", family.name);
        }
    }

    #[test]
    fn renders_recorded_counters_with_help_and_drops_colliding_families() {
        let recorder = ProcessRecorder::new();
        ::metrics::with_local_recorder(recorder.recorder(), || {
            ::metrics::counter!(super::super::metrics::ADMIN_REQUESTS.name, "path" => "/metrics").increment(2);
            ::metrics::counter!("gateway_requests_total").increment(7);
            ::metrics::gauge!("gateway_route_request_duration_seconds_sum").set(1.0);
        });
        let mut out = String::new();
        recorder.handle().render_into(&mut out);
        assert_eq!(
            out,
            "# HELP gateway_admin_requests_total Requests served by the admin listener, by path.\n\
             # TYPE gateway_admin_requests_total counter\n\
             gateway_admin_requests_total{path=\"/metrics\"} 2\n"
        );
    }
}
