#!/usr/bin/env bash
# abuse-rss: the gateway's resident memory under each abuse, one after another, with a
# well-behaved client alongside (loadtests/src/bin/abuse_rss.rs does the work):
#   slowloris, slow reader, connection flood to the limit, pipelined flood, oversized headers,
#   HTTP/2 rapid reset, CONTINUATION flood, SETTINGS/PING flood, zero-window stall, and a large
#   upload to a slow upstream.
#
#   loadtests/bench/abuse-rss.sh
#   SKIP_BUILD=1 DURATION=5 loadtests/bench/abuse-rss.sh
#
# Environment (defaults in brackets):
#   DURATION [10]          seconds of each abuse
#   SETTLE [3]             seconds after each abuse before RSS is read again
#   CONNECTION_LIMIT [1024] the gateway's max_connections_per_worker (the flood opens 10% more)
#   ONLY [all]             comma-separated abuse names, e.g. "slowloris,h2 rapid reset"
#   SKIP_BUILD [0]         1: use the release binaries in the target directory as they are
#   RESULTS_DIR [loadtests/results]
#   KEEP_WORK [0]          1: keep the temporary directory
#
# The gateway (release build, one worker, io_uring) is started by the runner, with
# `--allow-root` when run as root. Nothing is pinned: the runner, the origin and the gateway
# share the machine's CPUs. VmRSS/VmHWM come from /proc/<pid>/status; the peak is reset before
# each abuse through /proc/<pid>/clear_refs (needs root or the same user).
#
# Writes loadtests/results/abuse-rss-<UTC timestamp>.{json,md} and prints the table.

set -euo pipefail

DURATION=${DURATION:-10}
SETTLE=${SETTLE:-3}
CONNECTION_LIMIT=${CONNECTION_LIMIT:-1024}
ONLY=${ONLY:-}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}
PROXY_CPU=0 LOAD_CPU=1

# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init abuse-rss

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
GATEWAY_BIN=$TARGET_DIR/release/gateway
RUNNER_BIN=$TARGET_DIR/release/abuse-rss

main() {
    take_lock
    raise_fd_limit
    build_release gateway loadtests
    [[ -x $GATEWAY_BIN && -x $RUNNER_BIN ]] || die "no gateway / abuse-rss in $TARGET_DIR/release"
    mkdir -p "$RESULTS_DIR"
    local base=$RESULTS_DIR/$BENCH-$STAMP commit args
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [[ -z $(git -C "$ROOT" status --porcelain 2>/dev/null) ]] || commit="$commit (uncommitted changes)"
    args=(--gateway "$GATEWAY_BIN" --duration "$DURATION" --settle "$SETTLE"
        --connection-limit "$CONNECTION_LIMIT" --out "$base.md" --json "$base.json"
        --command "DURATION=$DURATION SETTLE=$SETTLE loadtests/bench/abuse-rss.sh, commit $commit")
    [[ -z $ONLY ]] || args+=(--only "$ONLY")
    TMPDIR=$WORK "$RUNNER_BIN" "${args[@]}"
    cat "$base.md"
    log "wrote $base.json and $base.md"
}

main "$@"
