import sys, importlib.util
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
from collections import defaultdict, deque
path, port = sys.argv[1], int(sys.argv[2])
waiting = defaultdict(deque); t0=None; slow=[]
for t, _s, sport, _d, dport, payload in w.packets(path):
    if t0 is None: t0=t
    if dport == port and payload[:4]==b"GET ":
        waiting[sport].append((t, payload.split(b" ")[1]))
    elif sport == port and payload.startswith(b"HTTP/1."):
        q = waiting.get(dport)
        if not q: continue
        s, tgt = q.popleft()
        if payload[9:12]==b"503" and tgt==b"/sheddable" and (t-s)>0.001:
            slow.append((s-t0, (t-s)*1000))
for a,b in slow: print(f"{a:9.4f} {b:6.2f}")
