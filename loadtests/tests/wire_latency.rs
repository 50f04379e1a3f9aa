//! `bench/wire-latency.py` (the overload benchmark's answers at the wire) on a capture written
//! here: requests pair with the first answer on their own connection, in order, per path and
//! status; packets without payload, other ports and a request left unanswered are handled.
//! Needs `python3`; says it skipped without it.

use std::path::Path;
use std::process::Command;

const PROXY: u16 = 8080;

/// A pcap (microsecond timestamps, Ethernet link type as `tcpdump -i lo` writes it) of `packets`:
/// (seconds, source port, destination port, TCP payload).
fn pcap(packets: &[(f64, u16, u16, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [0xa1b2_c3d4u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4], 65_535u32.to_le_bytes(), 1u32.to_le_bytes()] {
        out.extend_from_slice(&v);
    }
    for &(t, sport, dport, payload) in packets {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]); // IPv4
        let total = (20 + 20 + payload.len()) as u16;
        frame.extend_from_slice(&[0x45, 0]);
        frame.extend_from_slice(&total.to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
        frame.extend_from_slice(&sport.to_be_bytes());
        frame.extend_from_slice(&dport.to_be_bytes());
        frame.extend_from_slice(&[0; 8]); // sequence and acknowledgement numbers
        frame.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]); // data offset 5, PSH|ACK
        frame.extend_from_slice(payload);
        let (secs, micros) = (t.trunc() as u32, ((t.fract() * 1e6).round()) as u32);
        for v in [secs, micros, frame.len() as u32, frame.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&frame);
    }
    out
}

#[test]
fn requests_pair_with_their_answers_per_path_and_status() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3 to run bench/wire-latency.py");
        return;
    }
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nhost: a\r\n\r\n").into_bytes();
    let (shed, crit, other) = (get("/sheddable"), get("/critical"), get("/x"));
    let capture = pcap(&[
        // Two connections interleaved; each answer belongs to its own connection's request.
        (100.0000, 40001, PROXY, &shed),
        (100.0001, 40002, PROXY, &crit),
        (100.0003, PROXY, 40001, b"HTTP/1.1 503 Service Unavailable\r\n\r\n"),
        (100.0004, 40001, PROXY, &shed),
        (100.0015, PROXY, 40001, b"HTTP/1.1 503 Service Unavailable\r\n\r\n"),
        (100.0401, PROXY, 40002, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
        // The rest of a body, and traffic to another port: not answers.
        (100.0402, PROXY, 40002, b"more body"),
        (100.0403, 40003, 9999, b"GET /sheddable HTTP/1.1\r\n\r\n"),
        (100.0404, 9999, 40003, b"HTTP/1.1 503 x\r\n\r\n"),
        // A request never answered in the capture.
        (100.0500, 40004, PROXY, &other),
    ]);
    let dir = std::env::temp_dir().join(format!("wire-latency-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("capture.pcap");
    std::fs::write(&file, capture).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/wire-latency.py");
    let out = Command::new("python3").arg(&script).arg(&file).arg(PROXY.to_string()).arg("--json").output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["unanswered"], 1, "{report}");
    let rows = report["rows"].as_array().unwrap();
    let row = |path: &str, status: &str| {
        rows.iter()
            .find(|r| r["path"] == path && r["status"] == status)
            .unwrap_or_else(|| panic!("{path} {status}: {report}"))
    };
    assert_eq!(rows.len(), 2, "{report}");
    let shed = row("/sheddable", "503");
    assert_eq!((shed["count"].as_u64(), shed["over_1ms"].as_u64()), (Some(2), Some(1)), "{shed}");
    let near = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 0.01;
    assert!(near(&shed["p50_ms"], 0.3) && near(&shed["max_ms"], 1.1), "{shed}");
    let crit = row("/critical", "200");
    assert!(crit["count"] == 1 && near(&crit["p99_ms"], 40.0), "{crit}");
}
