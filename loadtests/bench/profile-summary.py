#!/usr/bin/env python3
"""profile-summary: where one proxy's CPU went, from a `perf record -g` of its processes.

    profile-summary.py PERF_DATA TITLE

Prints a markdown section: the kernel's and user space's shares of the samples, the shares of
the binaries, the kernel paths every proxy shares (inclusive: a path's share contains what it
calls, so they overlap), and the functions with the most samples of their own, kernel and user
space apart. Used by lib.sh's `profiled` (PROFILE=1 in the benchmarks).
"""

import subprocess
import sys

# Kernel paths, inclusive, in the order printed: (function, what it is).
PATHS = [
    ("entry_SYSCALL_64_after_hwframe", "in system calls (all of them, io_uring_enter included)"),
    ("io_submit_sqes", "io_uring operations issued at submission"),
    ("tcp_sendmsg", "sending (on loopback: the receiver's TCP receive path runs here too)"),
    ("tcp_v4_rcv", "TCP receive processing (on loopback, in the sender's soft interrupt)"),
    ("sock_def_readable", "waking the receiving process (an interrupt to the other CPU)"),
    ("tcp_recvmsg", "receiving"),
    ("__sys_sendto", "send(2) and sendto(2) calls"),
    ("__sys_recvfrom", "recv(2) and recvfrom(2) calls"),
    ("do_writev", "writev(2) calls"),
    ("tcp_poll", "readiness polls"),
    ("do_epoll_wait", "epoll_wait"),
    ("io_cqring_wait", "waiting for io_uring completions"),
    ("schedule", "giving up the CPU"),
    ("asm_sysvec_call_function_single", "interrupts from the other CPU"),
    ("handle_softirqs", "soft interrupts (network receive, timers)"),
]


def perf_report(data, *args):
    cmd = ["perf", "report", "-i", data, "--stdio", "-q", "-g", "none", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    return [parts for parts in map(str.split, out.splitlines()) if parts and parts[0].endswith("%")]


def pct(s):
    return float(s.rstrip("%"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, title = sys.argv[1], sys.argv[2]

    # Self samples by binary (dso), then by (dso, symbol).
    dsos = [(pct(p[0]), " ".join(p[1:])) for p in perf_report(data, "--no-children", "--sort", "dso")]
    kernel = sum(s for s, d in dsos if d.startswith("[kernel"))
    syms = []
    for parts in perf_report(data, "--no-children", "--sort", "dso,sym"):
        # "12.34%  dso  [k] symbol..." or "[.] symbol..."
        share, dso = pct(parts[0]), parts[1]
        kind = parts[2] if len(parts) > 2 else ""
        sym = " ".join(parts[3:]) if len(parts) > 3 else ""
        syms.append((share, dso, kind, sym))
    children = {}
    for parts in perf_report(data, "--children", "--sort", "sym"):
        # "children%  self%  [k] symbol"
        if len(parts) >= 4:
            children.setdefault(" ".join(parts[3:]), pct(parts[0]))

    print(f"### {title}\n")
    if not dsos:
        print("No samples (perf report read nothing).\n")
        return
    print(f"Kernel {kernel:.1f}%, user space {100 - kernel:.1f}%.\n")
    print("By binary: " + ", ".join(f"{d} {s:.1f}%" for s, d in dsos if s >= 0.5) + ".\n")
    print("| kernel path (inclusive; they overlap) | share |")
    print("| --- | --- |")
    for fn, what in PATHS:
        if fn in children and children[fn] >= 0.5:
            print(f"| `{fn}`: {what} | {children[fn]:.1f}% |")
    print()
    for label, is_kernel in (("kernel", True), ("user space", False)):
        top = [r for r in syms if (r[2] == "[k]") == is_kernel][:12]
        print(f"Top {label} functions (own samples): "
              + "; ".join(f"`{sym[:70]}` ({dso.rsplit('/', 1)[-1]}) {share:.1f}%" for share, dso, _, sym in top)
              + ".\n")


if __name__ == "__main__":
    main()
