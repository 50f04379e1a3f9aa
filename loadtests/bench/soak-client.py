#!/usr/bin/env python3
"""soak-client: the soak's checking client (loadtests/bench/soak.sh).

Until --seconds have passed, one exchange after another through the gateway's plain listener,
each checked against what the gateway must answer:

- GET /headers on a keep-alive connection: 200, and the request field the route adds
  (`x-soak-variant: a` or `b`, whichever config is live) reached the origin;
- POST /echo with a chunked body of 1 to 200,000 random bytes: 200 and the same bytes back;
- GET /chunked/20000: 200 and the origin's 20,000 pattern bytes (chunked on both sides);
- GET /delay/20: 200;
- GET /bad/cl-and-te, /bad/no-response, /bad/garbage (a broken upstream): 502;
- a request with two different Content-Length fields (broken client): 400 and a close;
- a WebSocket tunnel to /ws/echo: 101, then 64 KiB echoed back, then a clean close.

Prints one JSON object: counts per kind of exchange, ok and failed, and the first failures.
Exit status 0 even with failures: soak.sh judges.
"""

import argparse
import base64
import http.client
import json
import os
import random
import socket
import time


def pattern(n):
    return bytes(ord("a") + i % 26 for i in range(n))


PATTERN_20000 = pattern(20000)


class Checks:
    def __init__(self):
        self.ok = {}
        self.failed = {}
        self.first_failures = []

    def result(self, kind, good, detail=""):
        table = self.ok if good else self.failed
        table[kind] = table.get(kind, 0) + 1
        if not good and len(self.first_failures) < 20:
            self.first_failures.append({"kind": kind, "at": round(time.time(), 3), "detail": detail[:300]})


def keep_alive_exchanges(host, port, checks, rng):
    """A few exchanges on one keep-alive connection (http.client reconnects if it closed)."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        for _ in range(rng.randint(1, 8)):
            pick = rng.random()
            if pick < 0.4:
                conn.request("GET", "/headers", headers={"x-soak": "1"})
                r = conn.getresponse()
                body = r.read()
                lines = body.decode("latin-1").lower().splitlines()
                good = r.status == 200 and ("x-soak-variant: a" in lines or "x-soak-variant: b" in lines)
                checks.result("headers", good, f"status {r.status}, body {body[:200]!r}")
            elif pick < 0.7:
                size = rng.randint(1, 200_000)
                data = os.urandom(size)
                pieces = [data[i : i + 16384] for i in range(0, size, 16384)]
                conn.request("POST", "/echo", body=iter(pieces), encode_chunked=True,
                             headers={"Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream"})
                r = conn.getresponse()
                body = r.read()
                checks.result("echo", r.status == 200 and body == data, f"status {r.status}, {len(body)} of {size} bytes")
            elif pick < 0.9:
                conn.request("GET", "/chunked/20000")
                r = conn.getresponse()
                body = r.read()
                checks.result("chunked", r.status == 200 and body == PATTERN_20000, f"status {r.status}, {len(body)} bytes")
            else:
                conn.request("GET", "/delay/20")
                r = conn.getresponse()
                r.read()
                checks.result("delay", r.status == 200, f"status {r.status}")
    except (OSError, http.client.HTTPException) as e:
        checks.result("keep-alive connection", False, repr(e))
    finally:
        conn.close()


def broken_upstream(host, port, checks, rng):
    path = rng.choice(["/bad/cl-and-te", "/bad/no-response", "/bad/garbage"])
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        checks.result("broken upstream 502", r.status == 502, f"{path}: status {r.status}")
    except (OSError, http.client.HTTPException) as e:
        checks.result("broken upstream 502", False, f"{path}: {e!r}")
    finally:
        conn.close()


def read_until_close(sock, limit=65536):
    got = b""
    while len(got) < limit:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def broken_client(host, port, checks):
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: soak\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
            got = read_until_close(s)
        checks.result("broken client 400", got.startswith(b"HTTP/1.1 400 "), repr(got[:100]))
    except OSError as e:
        checks.result("broken client 400", False, repr(e))


def websocket(host, port, checks):
    key = base64.b64encode(os.urandom(16)).decode()
    try:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall((f"GET /ws/echo HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 101 "):
                checks.result("websocket", False, repr(head[:100]))
                return
            data = os.urandom(65536)
            s.sendall(data)
            got = rest
            while len(got) < len(data):
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            s.shutdown(socket.SHUT_WR)
            tail = read_until_close(s)
        checks.result("websocket", got == data and tail == b"", f"{len(got)} of {len(data)} bytes echoed, {len(tail)} after")
    except OSError as e:
        checks.result("websocket", False, repr(e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    checks = Checks()
    host = "127.0.0.1"
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        pick = rng.random()
        if pick < 0.75:
            keep_alive_exchanges(host, args.port, checks, rng)
        elif pick < 0.85:
            broken_upstream(host, args.port, checks, rng)
        elif pick < 0.93:
            broken_client(host, args.port, checks)
        else:
            websocket(host, args.port, checks)
    print(json.dumps({"ok": checks.ok, "failed": checks.failed, "first_failures": checks.first_failures}))


if __name__ == "__main__":
    main()
