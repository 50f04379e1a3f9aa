import sys, importlib.util
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
from collections import defaultdict, deque
pcap, port = sys.argv[1], int(sys.argv[2])
last={}  # client port -> time of last packet on the connection (either direction)
waiting=defaultdict(deque); rows=[]
for t,_s,sport,_d,dport,payload in w.packets(pcap):
    cp = sport if dport==port else dport
    if dport==port and payload[:4]==b"GET ":
        waiting[sport].append((t, t-last.get(sport, -1e9), payload.split(b" ")[1]))
    elif sport==port and payload.startswith(b"HTTP/1."):
        q=waiting.get(dport)
        if q:
            s,idle,tgt=q.popleft()
            if payload[9:12]==b"503" and tgt==b"/sheddable": rows.append(((t-s)*1000, idle))
    last[cp]=t
def summ(sel,name):
    v=sorted(x[0] for x in sel)
    if v: print(f"{name}: n={len(v)} p50={v[len(v)//2]:.3f} p99={v[int(len(v)*.99)]:.3f} over1={sum(1 for x in v if x>1)}")
summ([r for r in rows if r[1] < 0.2], "idle < 200 ms")
summ([r for r in rows if 0.2 <= r[1] < 1e8], "idle >= 200 ms (parked)")
summ([r for r in rows if r[1] >= 1e8], "first request on the connection")
