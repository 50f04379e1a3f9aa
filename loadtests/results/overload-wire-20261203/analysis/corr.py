import sys, bisect, importlib.util
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
pcap, port, steal = sys.argv[1], int(sys.argv[2]), sys.argv[3]
S=[]
for line in open(steal):
    p=line.split()
    if len(p)==3: S.append((float(p[0]), int(p[1]), int(p[2])))
ts=[s[0] for s in S]
def steal_around(t, win=0.15):
    i=bisect.bisect_left(ts, t-win); j=bisect.bisect_left(ts, t+win)
    if i>=len(S) or j>=len(S): return None
    return (S[j][1]-S[i][1], S[j][2]-S[i][2])
sheddable=[(s,t) for s,t,tgt,status in w.exchanges(pcap, port) if status==b"503" and tgt==b"/sheddable"]
alls=[s for s,_t in sheddable]
slow=[(s,(t-s)*1000) for s,t in sheddable if t-s>0.001]
# steal in windows around slow vs around random sheddable
import random
random.seed(1)
def frac(events):
    r=[steal_around(e) for e in events]; r=[x for x in r if x]
    if not r: return None
    return (len(r), sum(1 for a,b in r if a>0)/len(r), sum(1 for a,b in r if b>0)/len(r))
print("slow", len(slow), "steal>0 in ±150ms (n, cpu0, cpu1):", frac([s for s,_ in slow]))
print("all ", len(alls), "steal>0 in ±150ms (n, cpu0, cpu1):", frac(random.sample(alls, min(2000,len(alls)))))
# p99 of sheddable 503s outside any steal window
lat={}
vals_in=[]; vals_out=[]
for s,t in sheddable:
    st=steal_around(s,0.15)
    if st is None: continue
    (vals_in if (st[0]>0) else vals_out).append((t-s)*1000)
for name,v in (("steal on cpu0 nearby",vals_in),("no steal nearby",vals_out)):
    v.sort()
    if v: print(name, len(v), "p50 %.3f p99 %.3f over1 %d" % (v[len(v)//2], v[int(len(v)*0.99)], sum(1 for x in v if x>1)))
