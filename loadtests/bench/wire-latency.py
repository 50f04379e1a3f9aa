#!/usr/bin/env python3
"""wire-latency: how long a proxy took to answer, seen on the wire (a pcap of loopback).

    wire-latency.py CAPTURE.pcap PORT [--json]

Pairs every request a client sent to 127.0.0.1:PORT (the first payload segment of a request
head, `GET /<path> ...`) with the first payload segment of the answer on the same connection
(`HTTP/1.1 <status>`), and reports the time between the two packets per path and status:
count, p50, p99 and max in milliseconds. The packets are stamped by the kernel when they cross
the loopback device, so this is the proxy's own time (its wake-up, its work, its send) without
the load generator's: neither how late the client sent nor how late it read the answer is in
it.

Captured with, for example:

    tcpdump -i lo -s 160 -B 16384 -w CAPTURE.pcap 'tcp port PORT'

Requests are one at a time per connection (no pipelining), as the overload benchmark sends
them; a request whose answer is not in the capture is counted as unanswered.
"""

import json
import math
import struct
import sys
from collections import defaultdict, deque


def packets(path):
    """(seconds, src, sport, dst, dport, payload) for each TCP/IPv4 segment with a payload."""
    with open(path, "rb") as f:
        header = f.read(24)
        if len(header) < 24:
            raise SystemExit(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", header[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
            magic = struct.unpack(">I", header[:4])[0]
        else:
            raise SystemExit(f"{path}: not a pcap file (magic {magic:#x})")
        scale = 1e-9 if magic == 0xA1B23C4D else 1e-6
        linktype = struct.unpack(endian + "I", header[20:24])[0]
        if linktype == 1:  # Ethernet (lo shows an all-zero one)
            link_len = 14
        elif linktype == 113:  # Linux cooked capture (-i any)
            link_len = 16
        elif linktype == 276:  # Linux cooked capture v2
            link_len = 20
        else:
            raise SystemExit(f"{path}: link type {linktype} not supported")
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _orig = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                return
            ip = data[link_len:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            off = (tcp[12] >> 4) * 4
            payload_len = total - ihl - off
            if payload_len <= 0:
                continue
            sport, dport = struct.unpack("!HH", tcp[:4])
            yield sec + frac * scale, ip[12:16], sport, ip[16:20], dport, tcp[off:]


def percentile(sorted_values, q):
    """The nearest-rank percentile: the smallest value with at least q of them at or below it."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[rank]


def exchanges(path, port, waiting=None):
    """(sent, answered, target, status) for each request to PORT paired with its answer: the
    times of the request's and the answer's first packets, the request target and the status
    as bytes. Requests left unanswered stay in `waiting` (client port -> deque)."""
    if waiting is None:
        waiting = defaultdict(deque)
    for t, _src, sport, _dst, dport, payload in packets(path):
        if dport == port and payload[:4] in (b"GET ", b"HEAD", b"POST", b"PUT ", b"DELE"):
            target = payload.split(b" ", 2)[1] if payload.count(b" ") >= 2 else b"?"
            waiting[sport].append((t, target))
        elif sport == port and payload.startswith(b"HTTP/1."):
            queue = waiting.get(dport)
            if not queue:
                continue
            sent, target = queue.popleft()
            yield sent, t, target, payload[9:12]


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    path, port = argv[1], int(argv[2])
    as_json = "--json" in argv[3:]
    waiting = defaultdict(deque)
    latencies = defaultdict(list)  # (path, status) -> [ms]
    for sent, t, target, status in exchanges(path, port, waiting):
        latencies[(target.decode("latin-1"), status.decode("latin-1"))].append((t - sent) * 1000.0)
    unanswered = sum(len(q) for q in waiting.values())
    rows = []
    for (target, status), values in sorted(latencies.items()):
        values.sort()
        rows.append(
            {
                "path": target,
                "status": status,
                "count": len(values),
                "p50_ms": percentile(values, 0.50),
                "p99_ms": percentile(values, 0.99),
                "max_ms": values[-1],
                "over_1ms": sum(1 for v in values if v > 1.0),
            }
        )
    if as_json:
        print(json.dumps({"port": port, "rows": rows, "unanswered": unanswered}, indent=2))
        return
    print(f"{'path':<14} {'status':>6} {'count':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'> 1 ms':>7}")
    for r in rows:
        print(
            f"{r['path']:<14} {r['status']:>6} {r['count']:>7} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f}"
            f" {r['max_ms']:>8.3f} {r['over_1ms']:>7}"
        )
    print(f"unanswered in the capture: {unanswered}")


if __name__ == "__main__":
    main(sys.argv)
