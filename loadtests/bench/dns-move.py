#!/usr/bin/env python3
"""How long a host-name endpoint takes to move: the time from rewriting the gateway's hosts file
(server.hosts_file) to the first response from the new address, over N rounds, each started at a
random point of the refresh interval. Two origins on 127.0.0.2 and 127.0.0.3 with one port; the
gateway runs as a process with two workers. Prints the spread and that no reload happened.

usage: loadtests/bench/dns-move.py DNS_REFRESH GATEWAY_BINARY ROUNDS
  e.g. loadtests/bench/dns-move.py 1s target/release/gateway 30
"""
import random, http.server, socketserver, threading, socket, subprocess, time, os, sys, json, urllib.request
def origin(ip, port, body):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    s = socketserver.ThreadingTCPServer((ip, port), H); s.daemon_threads = True
    threading.Thread(target=s.serve_forever, daemon=True).start(); return s
a = origin("127.0.0.2", 0, b"A"); port = a.server_address[1]
b = origin("127.0.0.3", port, b"B")
import tempfile
d = tempfile.mkdtemp(prefix="gw-dns-move-"); hosts = d + "/hosts"
def write(ip):
    open(hosts + ".tmp", "w").write(f"{ip} origin.test\n"); os.rename(hosts + ".tmp", hosts)
write("127.0.0.2")
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
lp, ap = free(), free()
refresh = sys.argv[1]
open(d + "/gw.toml", "w").write(f'''[server]
workers = 2
admin = {{ address = "127.0.0.1:{ap}" }}
hosts_file = "{hosts}"
log_level = "warn"
[[listeners]]
name = "main"
address = "127.0.0.1:{lp}"
[[routes]]
name = "r"
cluster = "c"
[[clusters]]
name = "c"
endpoints = ["origin.test:{port}"]
dns_refresh = "{refresh}"
''')
gw = subprocess.Popen([sys.argv[2], "run", "--allow-root", "--config", d + "/gw.toml"])
def get(p):
    with urllib.request.urlopen(f"http://127.0.0.1:{p}/", timeout=5) as r: return r.read()
for _ in range(100):
    try:
        get(lp); break
    except Exception: time.sleep(0.05)
samples = []
want = b"A"
for i in range(int(sys.argv[3])):
    want = b"B" if want == b"A" else b"A"
    t0 = time.monotonic(); write("127.0.0.3" if want == b"B" else "127.0.0.2")
    while get(lp) != want: time.sleep(0.005)
    samples.append(time.monotonic() - t0)
    time.sleep(random.uniform(0.0, 1.0))  # desynchronise from the refresh timer
cfg = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{ap}/config").read())
gw.terminate(); gw.wait()
samples.sort()
print(f"dns_refresh={refresh} rounds={len(samples)} min={samples[0]*1000:.0f}ms median={samples[len(samples)//2]*1000:.0f}ms max={samples[-1]*1000:.0f}ms config_version={cfg['version']} reloads_ok={cfg['reload']['reloads_ok']}")
import shutil
shutil.rmtree(d, ignore_errors=True)
