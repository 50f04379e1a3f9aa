#!/usr/bin/env python3
"""tls-idle: opens N TLS connections to HOST:PORT, completes the handshake on each, then holds
them all open, idle, until it is terminated.

    tls-idle.py --port 8443 --count 2000 [--host 127.0.0.1] [--alpn http/1.1] [--tls 1.3]
                [--plain] [--request]

--plain: plain TCP connections instead (no TLS). --request: on each connection, one
`GET / HTTP/1.1` and its whole answer (Content-Length framed) before it goes idle, so that the
proxy holds a keep-alive connection that has served a request.

Prints `READY opened=N failed=F seconds=S` on stdout once every connection has been tried, then
sleeps until SIGTERM/SIGINT (the kernel closes the sockets). Used by tls-h2.sh to measure a
proxy's memory per idle TLS connection. The certificate is not verified (the benchmark checks
the proxies with curl first); verifying would only cost client CPU. Exits 1 if fewer than half
of the connections could be opened.
"""

import argparse
import signal
import socket
import ssl
import sys
import time


def main() -> int:
    args = parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    version = ssl.TLSVersion.TLSv1_3 if args.tls == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = version
    ctx.maximum_version = version
    if args.alpn:
        ctx.set_alpn_protocols(args.alpn.split(","))

    held = []
    failed = 0
    first_error = ""
    start = time.monotonic()
    for _ in range(args.count):
        try:
            raw = socket.create_connection((args.host, args.port), timeout=args.timeout)
            conn = raw if args.plain else ctx.wrap_socket(raw, server_hostname="localhost")
            if args.request:
                one_request(conn)
            held.append(conn)
        except (OSError, ssl.SSLError, ValueError) as err:
            failed += 1
            first_error = first_error or repr(err)
    elapsed = time.monotonic() - start
    print(f"READY opened={len(held)} failed={failed} seconds={elapsed:.2f}", flush=True)
    if first_error:
        print(f"first error: {first_error}", file=sys.stderr, flush=True)
    if len(held) * 2 < args.count:
        return 1

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    return 0


def one_request(conn) -> None:
    """Sends GET / and reads the answer to its end (Content-Length framing); raises ValueError
    for anything but a 200 with a Content-Length."""
    conn.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("connection closed before the answer's head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        raise ValueError(f"answer {lines[0]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        raise ValueError("answer without Content-Length")
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("connection closed in the answer's body")
        body += chunk


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--alpn", default="http/1.1", help="comma-separated ALPN list, '' for none")
    p.add_argument("--tls", choices=["1.2", "1.3"], default="1.3")
    p.add_argument("--timeout", type=float, default=10.0, help="connect + handshake timeout, s")
    p.add_argument("--plain", action="store_true", help="plain TCP, no TLS")
    p.add_argument("--request", action="store_true", help="one GET / on each connection first")
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())
