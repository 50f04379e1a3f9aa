#!/usr/bin/env python3
"""soak-report: the report of loadtests/bench/soak.sh, from its work directory.

Reads the samples (samples.tsv), wrk's and h2load's outputs, soak-client.py's JSON and the
gateway's log; writes a JSON and a Markdown report; judges:

- answers: wrk saw no socket error and no status other than 2xx; every h2load run finished every
  request with 2xx (with UPGRADE=1 a run that meets the upgrade, running at the SIGUSR2 or
  starting within HANDOVER_S of it, while the first process may still accept its connections,
  is shown apart: the drain's GOAWAY tells an HTTP/2 client to send what it has not sent yet
  on a new connection, and h2load counts those requests as failed instead); soak-client.py's
  checks all passed;
- memory: over the samples of the process serving at the end, once the first half of its time
  under load has passed, the median RSS of the last third is at most 5% above that of the
  first third;
- descriptors: after the load, the gateway holds no more descriptors than before it plus its
  pooled idle upstream connections (4 of slack); no connection and no request is left open;
- reloads (without an upgrade, whose successor counts from zero): every config file written
  was loaded, none failed;
- the log: no panic.
"""

import argparse
import json
import re
import statistics
import sys


def read_samples(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = []
        for line in f:
            cells = line.rstrip("\n").split("\t")
            row = dict(zip(header, cells))
            for k in header:
                if k not in ("label", "pids"):
                    try:
                        row[k] = float(row[k])
                    except (KeyError, ValueError):
                        row[k] = -1.0
            rows.append(row)
    return rows


def wrk_summary(path):
    try:
        text = open(path).read()
    except OSError:
        return {"error": "no output"}
    out = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", text)
    out["requests"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    out["socket_errors"] = dict(zip(["connect", "read", "write", "timeout"], map(int, m.groups()))) if m else {}
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non_2xx_3xx"] = int(m.group(1)) if m else 0
    out["good"] = out["requests"] > 0 and not any(out["socket_errors"].values()) and out["non_2xx_3xx"] == 0
    return out


# Seconds after the SIGUSR2 in which the first process may still accept connections (until
# its successor serves), which then get the drain's GOAWAY at once.
HANDOVER_S = 5


def h2load_runs(path, upgrade_at):
    runs = []
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return runs
    for line in lines:
        start, end, rest = line.split(" ", 2)
        run = {"start": int(start), "end": int(end), "summary": rest}
        m = re.search(r"(\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", rest)
        if m:
            for k, v in zip(["total", "started", "done", "succeeded", "failed", "errored", "timeout"], map(int, m.groups())):
                run[k] = v
        m = re.search(r"(\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", rest)
        if m:
            run["2xx"], run["3xx"], run["4xx"], run["5xx"] = map(int, m.groups())
        run["spans_upgrade"] = (upgrade_at is not None
                                and run["start"] <= upgrade_at + HANDOVER_S and run["end"] >= upgrade_at)
        run["good"] = (run.get("total", 0) > 0 and run.get("succeeded") == run.get("total")
                       and run.get("2xx") == run.get("total"))
        runs.append(run)
    return runs


def main():
    ap = argparse.ArgumentParser()
    for a in ("--work", "--samples", "--json", "--md", "--commit", "--command", "--driver"):
        ap.add_argument(a, required=True)
    for a in ("--reloads-written", "--upgraded", "--seconds", "--workers"):
        ap.add_argument(a, type=int, required=True)
    ap.add_argument("--smoke", type=int, default=0, help="1: memory shown, not judged (too short a run)")
    args = ap.parse_args()
    w = args.work

    samples = read_samples(args.samples)
    before = next(s for s in samples if s["label"] == "before")
    after = next(s for s in samples if s["label"] == "after")
    t0_epoch = None
    try:
        t0_epoch = int(open(f"{w}/t0").read())
    except OSError:
        pass
    upgrade_at = None
    try:
        upgrade_at = int(open(f"{w}/upgrade-at").read())
    except OSError:
        pass

    loads = {
        "wrk keep-alive (plain, 32 connections)": wrk_summary(f"{w}/wrk-keepalive.txt"),
        "wrk new connection per request (plain, 8)": wrk_summary(f"{w}/wrk-close.txt"),
    }
    h2 = {"h2c (8 x 16 streams)": h2load_runs(f"{w}/h2c.runs", upgrade_at),
          "HTTP/2 over TLS (4 x 8 streams)": h2load_runs(f"{w}/h2tls.runs", upgrade_at)}
    try:
        client = json.load(open(f"{w}/client.json"))
    except (OSError, ValueError) as e:
        client = {"ok": {}, "failed": {"client output": 1}, "first_failures": [{"kind": "client", "detail": repr(e)}]}
    log = open(f"{w}/gateway.log", errors="replace").read()
    panics = len(re.findall(r"panick", log))
    log_errors = len(re.findall(r"\bERROR\b", log))
    log_warnings = len(re.findall(r"\bWARN\b", log))

    # Memory: the samples of the process serving at the end (after an upgrade, the successor
    # alone), once the first half of its time under load has passed (its warm-up: the buffer
    # pools fill as the mix's bursts come; on 5 December a process levelled 140-170 s into
    # this load, which in an upgrade run is more than 30% of the successor's 300 s).
    final = after["pids"]
    mine = [s for s in samples if s["label"] == "load" and s["pids"] == final]
    steady = [s for s in mine if s["t"] >= mine[0]["t"] + 0.5 * (mine[-1]["t"] - mine[0]["t"])] if mine else []
    memory = {"samples": len(steady)}
    if len(steady) >= 6:
        third = len(steady) // 3
        first = statistics.median(s["rss_kib"] for s in steady[:third])
        last = statistics.median(s["rss_kib"] for s in steady[-third:])
        ts = [s["t"] for s in steady]
        rs = [s["rss_kib"] for s in steady]
        mt, mr = statistics.mean(ts), statistics.mean(rs)
        var = sum((t - mt) ** 2 for t in ts)
        slope = sum((t - mt) * (r - mr) for t, r in zip(ts, rs)) / var * 60 if var else 0.0
        memory.update({"first_third_median_kib": first, "last_third_median_kib": last,
                       "growth_pct": (last - first) / first * 100 if first else 0.0,
                       "slope_kib_per_min": slope,
                       "peak_rss_kib": max(s["rss_kib"] for s in samples if s["label"] == "load")})
        memory["good"] = memory["growth_pct"] <= 5.0
    else:
        memory["good"] = False
        memory["why"] = "fewer than 6 samples of the final process after its warm-up: run longer"
    if args.smoke:
        memory["good"] = True
        memory["why"] = "not judged: a smoke run (SMOKE=1) is too short to tell growth from warm-up"

    idle_after = max(after["upstream_idle"], 0)
    descriptors = {"before": before["fds"], "after": after["fds"], "upstream_idle_after": idle_after,
                   "connections_after": after["connections"], "requests_active_after": after["requests_active"]}
    descriptors["good"] = (after["fds"] - idle_after <= before["fds"] + 4 and after["connections"] == 0
                           and after["requests_active"] == 0)

    last_load = [s for s in samples if s["label"] in ("load", "after")][-1]
    reloads = {"written": args.reloads_written, "ok": last_load["reloads_ok"], "failed": last_load["reloads_failed"],
               "upgraded": bool(args.upgraded)}
    reloads["good"] = True if args.upgraded else (reloads["ok"] == args.reloads_written and reloads["failed"] <= 0)

    answers_good = (all(l.get("good") for l in loads.values())
                    and all(r["good"] for runs in h2.values() for r in runs if not r["spans_upgrade"])
                    and all(runs for runs in h2.values())
                    and not client.get("failed") and bool(client.get("ok")))
    verdict = {"answers": answers_good, "memory": memory["good"], "descriptors": descriptors["good"],
               "reloads": reloads["good"], "no panic": panics == 0}

    report = {"command": args.command, "commit": args.commit, "seconds": args.seconds, "workers": args.workers,
              "driver": args.driver, "loads": loads, "h2load": h2, "client": client, "memory": memory,
              "descriptors": descriptors, "reloads": reloads,
              "log": {"panics": panics, "errors": log_errors, "warnings": log_warnings},
              "verdict": verdict, "samples": samples}
    json.dump(report, open(args.json, "w"), indent=1)

    md = []
    md.append(f"# Soak: {args.seconds} s of mixed load, {args.workers} workers on {args.driver}\n")
    md.append(f"`{args.command}`, commit {args.commit}.\n")
    md.append("| check | result |\n| --- | --- |")
    for k, v in verdict.items():
        md.append(f"| {k} | {'ok' if v else '**FAILED**'} |")
    md.append("\n## Loads\n")
    md.append("| load | requests | socket errors | non-2xx/3xx | ok |\n| --- | --- | --- | --- | --- |")
    for name, l in loads.items():
        errors = ", ".join(f"{k} {v}" for k, v in l.get("socket_errors", {}).items() if v) or "0"
        md.append(f"| {name} | {l.get('requests', 0)} | {errors} | {l.get('non_2xx_3xx', 0)} | {'yes' if l.get('good') else 'no'} |")
    for name, runs in h2.items():
        total = sum(r.get("total", 0) for r in runs)
        ok2xx = sum(r.get("2xx", 0) for r in runs)
        bad = [r for r in runs if not r["good"]]
        md.append(f"| {name}: {len(runs)} h2load runs | {total} | – | {total - ok2xx} not 2xx | "
                  f"{'yes' if not [r for r in bad if not r['spans_upgrade']] else 'no'} |")
        for r in bad:
            md.append(f"| ↳ run at +{r['start'] - (t0_epoch or r['start'])} s{' (meets the upgrade)' if r['spans_upgrade'] else ''} | {r.get('total', 0)} | – | {r['summary']} | {'(shown apart)' if r['spans_upgrade'] else 'no'} |")
    md.append("\n## Checked exchanges (soak-client.py)\n")
    md.append("| kind | ok | failed |\n| --- | --- | --- |")
    for kind in sorted(set(client.get("ok", {})) | set(client.get("failed", {}))):
        md.append(f"| {kind} | {client.get('ok', {}).get(kind, 0)} | {client.get('failed', {}).get(kind, 0)} |")
    for f in client.get("first_failures", [])[:10]:
        md.append(f"\n- {f['kind']}: {f.get('detail', '')}")
    md.append("\n## Memory and descriptors\n")
    if args.smoke:
        md.append(f"- RSS: {memory['why']}; peak {max(s['rss_kib'] for s in samples) / 1024:.1f} MiB.")
    elif memory.get("samples", 0) >= 6 and "growth_pct" in memory:
        md.append(f"- RSS of the serving process (median, first third of the steady samples → last third): "
                  f"{memory['first_third_median_kib'] / 1024:.1f} → {memory['last_third_median_kib'] / 1024:.1f} MiB "
                  f"({memory['growth_pct']:+.1f}%; slope {memory['slope_kib_per_min']:+.1f} KiB/min over "
                  f"{memory['samples']} samples); peak {memory['peak_rss_kib'] / 1024:.1f} MiB.")
    else:
        md.append(f"- RSS: {memory.get('why', '')}")
    md.append(f"- Descriptors: {descriptors['before']:.0f} before the load, {descriptors['after']:.0f} after it "
              f"({descriptors['upstream_idle_after']:.0f} of them pooled idle upstream connections); connections open "
              f"after: {descriptors['connections_after']:.0f}, requests in flight: {descriptors['requests_active_after']:.0f}.")
    md.append(f"- Reloads: {reloads['written']} config files written, {reloads['ok']:.0f} loaded, {reloads['failed']:.0f} failed"
              f"{' (counted by the serving process since the upgrade)' if reloads['upgraded'] else ''}.")
    md.append(f"- The gateway's log: {panics} panics, {log_errors} errors, {log_warnings} warnings.")
    md.append("\n## Samples\n")
    md.append("| t (s) | label | RSS (MiB) | Pss (MiB) | fds | threads | connections | requests in flight | requests | reloads | idle upstream |")
    md.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in samples:
        md.append(f"| {s['t']:.0f} | {s['label']} | {s['rss_kib'] / 1024:.1f} | {s['pss_kib'] / 1024:.1f} | {s['fds']:.0f} | "
                  f"{s['threads']:.0f} | {s['connections']:.0f} | {s['requests_active']:.0f} | {s['requests_total']:.0f} | "
                  f"{s['reloads_ok']:.0f} | {s['upstream_idle']:.0f} |")
    open(args.md, "w").write("\n".join(md) + "\n")
    return 0 if all(verdict.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
