import sys, importlib.util
spec = importlib.util.spec_from_file_location("w", __import__("os").path.join(__import__("os").path.dirname(__file__), "../../../bench/wire-latency.py")); w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
path, port = sys.argv[1], int(sys.argv[2])
t0 = next(iter(w.packets(path)))[0]
slow = [(s-t0, (t-s)*1000) for s, t, tgt, status in w.exchanges(path, port)
        if status==b"503" and tgt==b"/sheddable" and (t-s)>0.001]
for a,b in slow: print(f"{a:9.4f} {b:6.2f}")
