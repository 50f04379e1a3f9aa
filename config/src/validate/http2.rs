//! `[server.http2]`: HTTP/2 settings and flood limits, within the ranges RFC 9113 allows.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::defaults;
use crate::locate::KeyPath;
use crate::model::Http2;
use crate::problems::Problems;
use crate::raw::{IntOrStr, RawHttp2};

use super::fields::{duration, int_in, size};

/// Converts `[server.http2]`; `body_io` (`server.timeouts.body_io`) bounds `stall_timeout`.
pub(super) fn convert(raw: &RawHttp2, p: &mut Problems<'_>, path: &KeyPath, body_io: Duration) -> Http2 {
    let flood = |p: &mut Problems<'_>, key: &str, value: Option<i64>, default: u32| {
        int_in(p, &path.key(key), value, defaults::H2_FLOOD_LIMIT_RANGE, default)
    };
    Http2 {
        max_concurrent_streams: int_in(
            p,
            &path.key("max_concurrent_streams"),
            raw.max_concurrent_streams,
            defaults::H2_STREAMS_RANGE,
            defaults::H2_MAX_CONCURRENT_STREAMS,
        ),
        max_header_list_bytes: bytes_in(
            p,
            &path.key("max_header_list_bytes"),
            raw.max_header_list_bytes.as_ref(),
            defaults::H2_HEADER_LIST_RANGE,
            defaults::H2_MAX_HEADER_LIST_BYTES,
        ),
        initial_stream_window_bytes: bytes_in(
            p,
            &path.key("initial_stream_window_bytes"),
            raw.initial_stream_window_bytes.as_ref(),
            defaults::H2_WINDOW_RANGE,
            defaults::H2_INITIAL_STREAM_WINDOW_BYTES,
        ),
        initial_connection_window_bytes: bytes_in(
            p,
            &path.key("initial_connection_window_bytes"),
            raw.initial_connection_window_bytes.as_ref(),
            defaults::H2_WINDOW_RANGE,
            defaults::H2_INITIAL_CONNECTION_WINDOW_BYTES,
        ),
        max_frame_bytes: bytes_in(
            p,
            &path.key("max_frame_bytes"),
            raw.max_frame_bytes.as_ref(),
            defaults::H2_FRAME_RANGE,
            defaults::H2_MAX_FRAME_BYTES,
        ),
        flood_window: duration(p, &path.key("flood_window"), raw.flood_window.as_ref(), defaults::H2_FLOOD_WINDOW),
        max_resets: flood(p, "max_resets", raw.max_resets, defaults::H2_MAX_RESETS),
        max_control_frames: flood(p, "max_control_frames", raw.max_control_frames, defaults::H2_MAX_CONTROL_FRAMES),
        max_empty_frames: flood(p, "max_empty_frames", raw.max_empty_frames, defaults::H2_MAX_EMPTY_FRAMES),
        stall_timeout: stall_timeout(raw, p, &path.key("stall_timeout"), body_io),
    }
}

/// `stall_timeout`: at least 100 ms (a scheduling hiccup is not a stall) and at most `body_io`
/// (past it, the body I/O timeout cuts every blocked stream first and the key would do nothing).
/// Without the key: the default, lowered to `body_io` when that is shorter.
fn stall_timeout(raw: &RawHttp2, p: &mut Problems<'_>, path: &KeyPath, body_io: Duration) -> Duration {
    let Some(value) = raw.stall_timeout.as_ref() else {
        return defaults::H2_STALL_TIMEOUT.min(body_io).max(defaults::H2_MIN_STALL_TIMEOUT);
    };
    let before = p.count();
    let d = duration(p, path, Some(value), defaults::H2_STALL_TIMEOUT);
    if p.count() != before {
        return defaults::H2_STALL_TIMEOUT;
    }
    if d < defaults::H2_MIN_STALL_TIMEOUT || d > body_io {
        let min = defaults::H2_MIN_STALL_TIMEOUT;
        p.at(
            path,
            format!(
                "must be between {min:?} and server.timeouts.body_io ({body_io:?}), got {d:?}: a connection whose \
                 responses wait for flow-control window this long is closed"
            ),
        );
    }
    d
}

/// A size (integer or `"256KiB"`) within `range`, which must fit in `u32`.
fn bytes_in(
    p: &mut Problems<'_>,
    path: &KeyPath,
    raw: Option<&IntOrStr>,
    range: RangeInclusive<i64>,
    default: u32,
) -> u32 {
    let Some(raw) = raw else { return default };
    let before = p.count();
    let bytes = size(p, path, Some(raw), u64::from(default));
    if p.count() != before {
        return default;
    }
    match (i64::try_from(bytes), u32::try_from(bytes)) {
        (Ok(n), Ok(value)) if range.contains(&n) => value,
        _ => {
            let (lo, hi) = range.into_inner();
            p.at(path, format!("must be between {lo} and {hi} bytes, got {bytes}"));
            default
        }
    }
}
