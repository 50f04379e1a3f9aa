#!/usr/bin/env python3
"""One bad endpoint of three, the gateway, nginx and HAProxy side by side, each with its defaults.

Two good origins answer "ok"; the third endpoint refuses connections (a port bound, then
closed), resets every connection (SO_LINGER 0 after reading the request), accepts and never
answers, or (not in the default cases) never answers a SYN, like a host gone behind a
firewall (`unreachable`: a listener whose accept queue is full), answers with a malformed
head (`garbage`: a field line without a colon), or answers every request with a 500
(`failing`). Each proxy is configured with only the three endpoints, round robin and, for the
gateway, a 2 s route timeout (nginx has no whole-request timeout; its proxy_read_timeout
defaults to 60 s; HAProxy needs its timeouts set: connect 5 s, client and server 60 s, and
keeps its defaults otherwise: 3 retries on a connection failure, to the same server without
`option redispatch`, no health checks). 200 GETs (or, with `--method POST`, POSTs of a 5-byte body) from 8
concurrent keep-alive clients (HTTP/1.1). Prints, per proxy and case: successes, the requests
that reached the bad endpoint (not countable when it refuses) and the good origins, attempts per
request, the slowest request and the run's wall time.

    python3 loadtests/bench/bad-endpoint.py [--gateway target/release/gateway] [--nginx /usr/sbin/nginx]
        [--haproxy /usr/sbin/haproxy] [--method GET|POST] [--cases refusing,resetting,hanging,unreachable,garbage,failing]
        [--proxies gateway,nginx,haproxy] [--gateway-balancer round_robin|p2c|...]

A functional comparison, not a benchmark: debug and release builds give the same counts.
"""

import argparse
import http.client
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

REQUESTS, CLIENTS = 200, 8


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Origin:
    """An HTTP/1.1 origin: 'ok' (keep-alive), 'reset' or 'hang'; counts requests."""

    def __init__(self, mode):
        self.mode, self.requests, self.lock = mode, 0, threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        buf = b""
        conn.settimeout(120)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                with self.lock:
                    self.requests += 1
                if self.mode == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if self.mode == "failing":
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nfail")
                    continue
                if self.mode == "garbage":
                    # A head no HTTP/1.1 parser accepts (a field line without a colon).
                    conn.sendall(b"HTTP/1.1 200 OK\r\nthis is not a field\r\ncontent-length: 2\r\n\r\nok")
                    continue
                if self.mode == "hang":
                    while conn.recv(65536):
                        pass
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        except OSError:
            return
        finally:
            conn.close()


class Unreachable:
    """An endpoint whose SYNs go unanswered, like a host gone behind a firewall: a listener with
    a full accept queue (backlog 0, filled, never accepted) drops every further SYN, so a
    connect to it waits until the connecting side gives up."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            self.fill.append(c)
        time.sleep(0.2)


def bad_endpoint(kind):
    if kind == "refusing":
        return None, free_port()
    if kind == "unreachable":
        u = Unreachable()
        return u, u.port
    o = Origin({"resetting": "reset", "hanging": "hang", "garbage": "garbage", "failing": "failing"}[kind])
    return o, o.port


def gateway_config(port, endpoints, balancer="round_robin"):
    eps = ", ".join(f'"127.0.0.1:{p}"' for p in endpoints)
    return f"""[server]
workers = 2
admin = false
log_level = "error"

[[listeners]]
name = "main"
address = "127.0.0.1:{port}"

[[routes]]
name = "r"
cluster = "c"
timeout = "2s"

[[clusters]]
name = "c"
endpoints = [{eps}]
balancer = "{balancer}"
"""


def nginx_config(port, endpoints, d):
    servers = "".join(f"        server 127.0.0.1:{p};\n" for p in endpoints)
    return f"""worker_processes 2;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream up {{
{servers}    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://up; }}
    }}
}}
"""


def haproxy_config(port, endpoints):
    servers = "".join(f"    server s{i} 127.0.0.1:{p}\n" for i, p in enumerate(endpoints))
    return f"""global
    nbthread 2

defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend main
    bind 127.0.0.1:{port}
    default_backend up

backend up
    balance roundrobin
{servers}"""


def wait_listening(port, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def client(port, n, method):
    """n requests on one keep-alive connection: (status or 0, seconds) each."""
    out, conn = [], None
    for _ in range(n):
        started = time.time()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=150)
            conn.request(method, "/", body=b"hello" if method == "POST" else None)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            status = 0
            conn = None
        out.append((status, time.time() - started))
    return out


def run(proxy, binary, kind, method, balancer):
    good = [Origin("ok"), Origin("ok")]
    bad, bad_port = bad_endpoint(kind)
    endpoints = [good[0].port, bad_port, good[1].port]
    port = free_port()
    d = tempfile.mkdtemp(prefix=f"bad-endpoint-{proxy}-")
    if proxy == "gateway":
        path = os.path.join(d, "gateway.toml")
        with open(path, "w") as f:
            f.write(gateway_config(port, endpoints, balancer))
        # --allow-root: the harness machines run everything as root.
        cmd = [binary, "run", "--allow-root", "--config", path]
    elif proxy == "haproxy":
        path = os.path.join(d, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(haproxy_config(port, endpoints))
        cmd = [binary, "-db", "-f", path]
    else:
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(nginx_config(port, endpoints, d))
        cmd = [binary, "-p", d, "-c", path]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_listening(port):
            sys.exit(f"{proxy} did not start: {' '.join(cmd)}")
        started = time.time()
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = [r for part in pool.map(lambda _: client(port, REQUESTS // CLIENTS, method), range(CLIENTS)) for r in part]
        wall = time.time() - started
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(d, ignore_errors=True)
    ok = sum(1 for s, _ in results if s == 200)
    good_n = good[0].requests + good[1].requests
    bad_n = getattr(bad, "requests", None)
    attempts = f"{(good_n + bad_n) / REQUESTS:.3f}" if bad_n is not None else "n/a"
    slowest = max(t for _, t in results)
    bad_text = str(bad_n) if bad_n is not None else "n/a (never connected)" if kind == "unreachable" else "n/a (refused)"
    print(f"| {proxy} | {method} | {kind} | {ok}/{REQUESTS} | {bad_text} | {good_n} | {attempts} | {slowest:.3f} s | {wall:.2f} s |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gateway", default="target/release/gateway")
    p.add_argument("--nginx", default="/usr/sbin/nginx")
    p.add_argument("--cases", default="refusing,resetting,hanging")
    p.add_argument("--haproxy", default="/usr/sbin/haproxy")
    p.add_argument("--proxies", default="gateway,nginx,haproxy")
    p.add_argument("--method", default="GET", choices=["GET", "POST"])
    p.add_argument("--gateway-balancer", default="round_robin",
                   help="the gateway's balancer (round_robin, as nginx's and HAProxy's defaults; p2c is the gateway's own default)")
    a = p.parse_args()
    print("| proxy | method | bad endpoint | 200s | requests at the bad endpoint | at the good ones | attempts per request | slowest request | wall |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in a.cases.split(","):
        for proxy in a.proxies.split(","):
            binary = {"gateway": a.gateway, "nginx": a.nginx, "haproxy": a.haproxy}[proxy]
            run(proxy, binary, kind, a.method, a.gateway_balancer)


if __name__ == "__main__":
    main()
