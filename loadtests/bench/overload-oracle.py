#!/usr/bin/env python3
"""The floor under the overload scenario (overload.sh): an oracle proxy, simulated.

The oracle knows the origin's capacity at every instant (it is told of the halving), keeps
exactly that many requests at the origin (or that many minus RESERVE for the classes after the
first), and queues with strict priority at zero cost: critical first (no bound), normal next
(each waits at most NORMAL_WAIT_MS, then is shed), sheddable never waits. The origin serves in
FIFO order in exactly SERVICE_MS; OVERHEAD_MS is added to every latency (what the unloaded phase
of a real run measures above SERVICE_MS). Arrivals are those of `overload-load`: evenly spaced at
RATE per second, the class drawn by weight for each request.

No real proxy can do better than this on the same load: it shows which of overload.sh's targets
any policy can meet. Example (the defaults are overload.sh's):

    python3 loadtests/bench/overload-oracle.py --seeds 1 2 3 --reserve 0 1 2

`--hold` makes each reserved slot the gateway's `first_class_reserve` instead: one slot, held for
critical only for SERVICE_MS x min(critical share, 1 / capacity) after it frees from a full
origin, then open to every class:

    python3 loadtests/bench/overload-oracle.py --seeds 1 2 3 --reserve 0 1 --hold
"""

import argparse
import collections
import heapq
import random


def simulate(args, seed, reserve):
    rng = random.Random(seed)
    names, weights = zip(*args.mix)
    service = args.service_ms / 1000.0
    overhead = args.overhead_ms / 1000.0
    normal_wait = args.normal_wait_ms / 1000.0
    halve_at = args.duration_s / 2 if args.halve else float("inf")
    count = int(args.rate * args.duration_s)
    arrivals = [(i / args.rate, rng.choices(names, weights)[0]) for i in range(count)]

    def capacity(t):
        return args.capacity // 2 if t >= halve_at else args.capacity

    share = weights[0] / sum(weights)
    held_since = [None]  # --hold: when the last free slot freed from a full origin

    def hold_end(now):
        """--hold: when the hold on the last free slot ends (None: nothing is held)."""
        c = capacity(now)
        if not args.hold or reserve == 0 or held_since[0] is None or len(busy) != c - 1:
            return None
        return held_since[0] + service * min(share, 1.0 / c)

    def others_may_start(now):
        """Whether a class after the first may take a slot now."""
        c = capacity(now)
        if not args.hold:
            return len(busy) < c - reserve
        end = hold_end(now)
        return len(busy) < c and (end is None or now >= end - 1e-9)

    busy = []  # completion times at the origin
    critical, normal = collections.deque(), collections.deque()
    latency = {name: [] for name in names}
    critical_by_phase = ([], [])

    def start(now, arrived, name):
        heapq.heappush(busy, now + service)
        if len(busy) >= capacity(now):
            held_since[0] = None
        value = now + service + overhead - arrived
        latency[name].append(value)
        if name == "critical":
            critical_by_phase[0 if arrived < halve_at else 1].append(value)

    i = 0
    while i < len(arrivals) or busy:
        next_arrival = arrivals[i][0] if i < len(arrivals) else float("inf")
        end = hold_end(busy[0] if busy else 0.0) if normal else None
        next_hold = end if end is not None else float("inf")
        if busy and busy[0] <= next_arrival and busy[0] <= next_hold:
            now = heapq.heappop(busy)
            held_since[0] = now if len(busy) == capacity(now) - 1 else (None if len(busy) >= capacity(now) else held_since[0])
        elif next_hold < next_arrival:
            now = next_hold
        else:
            now, name = arrivals[i]
            i += 1
            if name == "critical":
                critical.append(now)
            elif name == "normal":
                normal.append(now)
            elif others_may_start(now) and not critical and not normal:
                start(now, now, name)
                continue
        while normal and now - normal[0] > normal_wait:
            normal.popleft()
        while len(busy) < capacity(now) and (critical or normal):
            if critical:
                start(now, critical.popleft(), "critical")
            elif others_may_start(now):
                start(now, normal.popleft(), "normal")
            else:
                break

    served = sum(len(v) for v in latency.values())
    if args.halve:
        capacity_requests = (args.capacity + args.capacity // 2) / service * args.duration_s / 2
    else:
        capacity_requests = args.capacity / service * args.duration_s
    return latency, critical_by_phase, served / capacity_requests


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000.0


def mix(text):
    out = []
    for part in text.split(","):
        name, weight = part.split("=")
        out.append((name, float(weight)))
    if [n for n, _ in out] != ["critical", "normal", "sheddable"]:
        raise argparse.ArgumentTypeError("the mix must name critical, normal and sheddable, in that order")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capacity", type=int, default=8)
    p.add_argument("--service-ms", type=float, default=40.0)
    p.add_argument("--overhead-ms", type=float, default=0.7, help="added to every latency")
    p.add_argument("--rate", type=float, default=600.0, help="requests per second, all classes")
    p.add_argument("--duration-s", type=float, default=30.0)
    p.add_argument("--mix", type=mix, default=mix("critical=10,normal=30,sheddable=60"))
    p.add_argument("--no-halve", dest="halve", action="store_false", help="the capacity stays whole")
    p.add_argument("--normal-wait-ms", type=float, default=40.0, help="the normal class's wait bound")
    p.add_argument("--unloaded-p99-ms", type=float, default=41.1, help="the reference for the ratios")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--reserve", type=int, nargs="+", default=[0], help="origin slots kept for critical")
    p.add_argument("--hold", action="store_true",
                   help="a reserve > 0 is the gateway's first_class_reserve: one slot, held for a moment")
    args = p.parse_args()
    if args.capacity < 2 or args.service_ms <= 0 or args.rate <= 0 or args.duration_s <= 0:
        p.error("--capacity >= 2, --service-ms, --rate and --duration-s > 0")

    print("| reserve | seed | critical p50 / p99 ms | p99 / unloaded | p99 before / after halving ms "
          "| normal served | goodput % of capacity |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for reserve in args.reserve:
        for seed in args.seeds:
            latency, by_phase, goodput = simulate(args, seed, reserve)
            c = latency["critical"]
            phases = " / ".join("%.1f" % percentile(v, 0.99) if v else "–" for v in by_phase)
            print("| %d | %d | %.1f / %.1f | %.2fx | %s | %d | %.1f |" % (
                reserve, seed, percentile(c, 0.5), percentile(c, 0.99),
                percentile(c, 0.99) / args.unloaded_p99_ms, phases, len(latency["normal"]), 100.0 * goodput))


if __name__ == "__main__":
    main()
