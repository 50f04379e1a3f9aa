import sys, importlib.util, math
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
pcap, port = sys.argv[1], int(sys.argv[2])
sheddable=[(s,t) for s,t,tgt,status in w.exchanges(pcap, port) if status==b"503" and tgt==b"/sheddable"]
allr=[t for _s,t in sheddable]
slow=[t for s,t in sheddable if t-s>0.0008]   # time the answer left
for period in (0.1, 1.0):
    # find the phase that best clusters: circular mean
    ang=[2*math.pi*((x%period)/period) for x in slow]
    c=sum(math.cos(a) for a in ang)/len(ang); s_=sum(math.sin(a) for a in ang)/len(ang)
    R=math.hypot(c,s_)
    ang2=[2*math.pi*((x%period)/period) for x in allr]
    c2=sum(math.cos(a) for a in ang2)/len(ang2); s2=sum(math.sin(a) for a in ang2)/len(ang2)
    print(f"period {period}s: slow n={len(slow)} clustering R={R:.3f} (all answers R={math.hypot(c2,s2):.3f}; uniform ~{1/math.sqrt(len(slow)):.3f})")
    bins=[0]*20
    for x in slow: bins[int(((x%period)/period)*20)]+=1
    print("  ", bins)
