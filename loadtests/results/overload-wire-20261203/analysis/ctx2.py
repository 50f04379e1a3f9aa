import sys, importlib.util
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
from collections import defaultdict, deque
pcap, port, oport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pk=list(w.packets(pcap))
waiting=defaultdict(deque); n=0
# gateway-originated packets: sport==port (to clients) or dport==oport (requests to origin)
for idx,(t,_s,sport,_d,dport,payload) in enumerate(pk):
    if dport==port and payload[:4]==b"GET ": waiting[sport].append((t,idx,payload.split(b" ")[1]))
    elif sport==port and payload.startswith(b"HTTP/1."):
        q=waiting.get(dport)
        if not q: continue
        s,si,tgt=q.popleft()
        if payload[9:12]==b"503" and tgt==b"/sheddable" and t-s>0.0008:
            n+=1
            if n>25: break
            ev=[]
            for k in range(si+1, idx+1):
                tt,_a,sp,_b,dp,pl=pk[k]
                who = "gw->client" if sp==port else "client->gw" if dp==port else "gw->origin" if dp==oport else "origin->gw" if sp==oport else "?"
                ev.append(f"{(tt-s)*1000:.2f}:{who}:{pl[:12].decode('latin-1').split(' ')[0] if who.endswith('gw') and who.startswith('origin') else pl[:14].decode('latin-1')}")
            print(f"{(t-s)*1000:.2f} ms |", " ".join(ev[:12]))
