#!/usr/bin/env bash
# soak: the gateway under a long mixed load, its config reloaded every RELOAD_EVERY seconds
# (and, with UPGRADE=1, its binary upgraded once halfway): does its memory or its descriptor
# count grow, and does any answer go wrong?
#
#   loadtests/bench/soak.sh
#   SOAK_SECONDS=1800 UPGRADE=1 loadtests/bench/soak.sh
#
# The gateway (release build, WORKERS workers on DRIVER, admin port on, access log off) has a
# plain HTTP/1.1 listener, an h2c listener and a TLS listener (h2 and http/1.1, certificates made
# for the run), in front of the bundled test origin (`loadtests --bin origin`). Nothing is
# pinned. For SOAK_SECONDS, at once:
#   - wrk -t1 -c32: keep-alive GET /bytes/1024 (plain);
#   - wrk -t1 -c8 with `Connection: close`: a new connection per GET /bytes/100;
#   - h2load -c8 -m16 -D 30, again and again: h2c GET /bytes/512;
#   - h2load -c4 -m8 -D 30, again and again: HTTP/2 over TLS GET /bytes/2048;
#   - soak-client.py: checked exchanges (chunked uploads echoed, chunked answers, broken
#     upstreams answered 502, a broken client answered 400, WebSocket tunnels) on the plain
#     listener.
# Every RELOAD_EVERY seconds the config file is replaced (rename) by its other variant: the
# route's added request field `x-soak-variant` switches between `a` and `b`, and a second route
# comes and goes. Every SAMPLE_EVERY seconds: the gateway's processes (VmRSS, Pss, open
# descriptors, threads) and its admin counters (open connections, requests in flight, reloads).
# After the load: SETTLE seconds, then the same once more.
#
# Environment (defaults in brackets):
#   SOAK_SECONDS [600]   how long the load runs
#   SAMPLE_EVERY [10]    seconds between samples
#   RELOAD_EVERY [30]    seconds between config reloads (0: none)
#   UPGRADE [0]          1: one binary upgrade (SIGUSR2) at half time
#   WORKERS [2], DRIVER [io_uring]
#   SETTLE [5]           seconds after the load before the last sample
#   SMOKE [0]            1: CI's smoke run (keeps the runner working): 20 s of load, a reload
#                        every 5 s, an upgrade, samples every 2 s; memory is shown, not judged;
#                        the report goes to a temporary directory unless RESULTS_DIR is set
#   SKIP_BUILD [0]       1: use the release binaries in the target directory as they are
#   GATEWAY_BIN [target/release/gateway]   the gateway binary (e.g. the profile-guided build)
#   RESULTS_DIR [loadtests/results], KEEP_WORK [0]
#
# Writes loadtests/results/soak-<UTC timestamp>.{md,tsv,json}: the samples, every load's
# outcome, the checks, and what the report judges (see `judge` below).
set -euo pipefail

SMOKE=${SMOKE:-0}
USER_RESULTS_DIR=${RESULTS_DIR:-}
if [[ $SMOKE == 1 ]]; then
    SOAK_SECONDS=${SOAK_SECONDS:-20} SAMPLE_EVERY=${SAMPLE_EVERY:-2} RELOAD_EVERY=${RELOAD_EVERY:-5} UPGRADE=${UPGRADE:-1}
fi
SOAK_SECONDS=${SOAK_SECONDS:-600}
SAMPLE_EVERY=${SAMPLE_EVERY:-10}
RELOAD_EVERY=${RELOAD_EVERY:-30}
UPGRADE=${UPGRADE:-0}
WORKERS=${WORKERS:-2}
DRIVER=${DRIVER:-io_uring}
SETTLE=${SETTLE:-5}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}

# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init soak
# A smoke run's report goes to the work directory (printed, then removed) unless asked for.
[[ $SMOKE != 1 || -n $USER_RESULTS_DIR ]] || RESULTS_DIR=$WORK/results
# The gateways of the run (an upgrade's successor too) go first, then lib.sh's cleanup.
trap 'status=$?; stop_gateways; (exit $status); cleanup' EXIT

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
GATEWAY_BIN=${GATEWAY_BIN:-$TARGET_DIR/release/gateway}
ORIGIN_BIN=$TARGET_DIR/release/origin

# write_config VARIANT (a or b): the gateway's config, printed.
write_config() {
    cat <<EOF
[server]
workers = $WORKERS
io_driver = "$DRIVER"
admin = { address = "127.0.0.1:$ADMIN_PORT" }
log_level = "warn"
upgrade_socket = "$WORK/upgrade.sock"
drain_timeout = "10s"

[[listeners]]
name = "plain"
address = "127.0.0.1:$PLAIN_PORT"

[[listeners]]
name = "h2c"
address = "127.0.0.1:$H2C_PORT"
protocols = ["h2"]

[[listeners]]
name = "tls"
address = "127.0.0.1:$TLS_PORT"
protocols = ["h2", "http/1.1"]
[listeners.tls]
certificates = [{ cert = "$WORK/pki/leaf-chain.pem", key = "$WORK/pki/leaf.key" }]

[[routes]]
name = "ws"
match = { path_prefix = "/ws/" }
cluster = "origin"
websocket = true
EOF
    if [[ $1 == b ]]; then
        cat <<EOF

[[routes]]
name = "only-in-b"
match = { path_prefix = "/b-only/" }
direct_response = { status = 204 }
EOF
    fi
    cat <<EOF

[[routes]]
name = "all"
match = { path_prefix = "/" }
cluster = "origin"
request_headers = { set = { "x-soak-variant" = "$1" } }

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$ORIGIN_PORT"]
EOF
}

# The gateway's processes: the one we started, or after an upgrade its successor (by its
# command line, which names this run's config).
gateway_pids() { pgrep -f -- "--config $WORK/gateway.toml" || true; }

metric() { # NAME or NAME{LABELS}: the sum of the series in METRICS (one scrape), or -1
    awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2; found = 1 } END { print found ? s : -1 }' <<<"$METRICS"
}

sample() { # LABEL: one line of samples.tsv
    local pids pid rss pss fds=0 threads=0
    read -r -a pids <<<"$(gateway_pids | tr '\n' ' ')"
    METRICS=$(curl -s --max-time 2 "http://127.0.0.1:$ADMIN_PORT/metrics" || true)
    rss=$(status_kb VmRSS "${pids[@]}")
    pss=$(pss_kb "${pids[@]}")
    for pid in "${pids[@]}"; do
        fds=$((fds + $(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)))
        threads=$((threads + $(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)))
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$(($(date +%s) - T0))" "${pids[*]}" \
        "$rss" "$pss" "$fds" "$threads" "$(metric gateway_connections_active)" \
        "$(metric gateway_requests_active)" "$(metric gateway_requests_total)" \
        "$(metric 'gateway_config_reloads_total{result="ok"}')" \
        "$(metric 'gateway_config_reloads_total{result="failed"}')" \
        "$(curl -s --max-time 2 "http://127.0.0.1:$ADMIN_PORT/clusters" |
            jq '[.clusters[].endpoints[].idle_connections] | add // -1' 2>/dev/null || echo -1)" >>"$WORK/samples.tsv"
}

# stop_gateways: a successor started by an upgrade is not ours to `stop` (lib.sh): TERM every
# gateway process of this run, and wait for them to exit (10 s at most).
stop_gateways() {
    local pids i
    pids=$(gateway_pids)
    [[ -n $pids ]] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        [[ -n $(gateway_pids) ]] || return 0
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $(gateway_pids) 2>/dev/null || true
}

# h2load_loop NAME URL ARGS...: h2load runs of 30 s back to back until the end of the load;
# each run's totals appended to WORK/NAME.runs.
h2load_loop() {
    local name=$1 url=$2
    shift 2
    local start left
    while (($(date +%s) + 5 < T_END)); do
        start=$(date +%s)
        left=$((T_END - start))
        h2load "$@" -D $((left < 30 ? left : 30)) "$url" >"$WORK/$name.last" 2>&1 || true
        # One line per run: start, end, h2load's request totals;its status codes.
        echo "$start $(date +%s) $(grep -oP 'requests: \K.*' "$WORK/$name.last" || echo "no summary");$(
            grep -oP 'status codes: \K.*' "$WORK/$name.last" || true)" >>"$WORK/$name.runs"
    done
}

main() {
    take_lock
    raise_fd_limit
    install_tools wrk h2load:nghttp2-client openssl python3 curl jq
    build_release gateway loadtests
    [[ -x $GATEWAY_BIN && -x $ORIGIN_BIN ]] || die "no gateway ($GATEWAY_BIN) / origin in $TARGET_DIR/release"
    # An upgrade starts the binary from the path the gateway was started from.
    GATEWAY_BIN=$(realpath "$GATEWAY_BIN")
    make_test_pki "$WORK/pki"

    pick_port
    ORIGIN_PORT=$PORT
    start_pinned 0-$(($(nproc) - 1)) "$WORK/origin.log" "$ORIGIN_BIN" --listen "127.0.0.1:$ORIGIN_PORT"
    wait_ready origin "$PID" "$ORIGIN_PORT" || die "the origin did not start"
    pick_port
    PLAIN_PORT=$PORT
    pick_port
    H2C_PORT=$PORT
    pick_port
    TLS_PORT=$PORT
    pick_port
    ADMIN_PORT=$PORT
    write_config a >"$WORK/gateway.toml"
    gateway_root_args "$GATEWAY_BIN"
    start_pinned 0-$(($(nproc) - 1)) "$WORK/gateway.log" "$GATEWAY_BIN" run --config "$WORK/gateway.toml" \
        "${GATEWAY_ROOT_ARGS[@]}"
    GATEWAY_PID=$PID
    wait_ready gateway "$GATEWAY_PID" "$PLAIN_PORT" || {
        cat "$WORK/gateway.log" >&2
        die "the gateway did not start"
    }
    wait_port "$PLAIN_PORT" || die "the gateway does not answer"
    curl -sf -o /dev/null "http://127.0.0.1:$PLAIN_PORT/bytes/10" || die "no answer through the gateway"

    T0=$(date +%s)
    T_END=$((T0 + SOAK_SECONDS))
    echo "$T0" >"$WORK/t0"
    printf 'label\tt\tpids\trss_kib\tpss_kib\tfds\tthreads\tconnections\trequests_active\trequests_total\treloads_ok\treloads_failed\tupstream_idle\n' \
        >"$WORK/samples.tsv"
    sample before
    log "load for ${SOAK_SECONDS}s: reload every ${RELOAD_EVERY}s, upgrade $UPGRADE, sample every ${SAMPLE_EVERY}s"

    local loads=()
    wrk -t1 -c32 -d"${SOAK_SECONDS}s" --timeout 10s "http://127.0.0.1:$PLAIN_PORT/bytes/1024" >"$WORK/wrk-keepalive.txt" 2>&1 &
    loads+=($!)
    wrk -t1 -c8 -d"${SOAK_SECONDS}s" --timeout 10s -H 'Connection: close' "http://127.0.0.1:$PLAIN_PORT/bytes/100" \
        >"$WORK/wrk-close.txt" 2>&1 &
    loads+=($!)
    h2load_loop h2c "http://127.0.0.1:$H2C_PORT/bytes/512" -c8 -m16 &
    loads+=($!)
    h2load_loop h2tls "https://127.0.0.1:$TLS_PORT/bytes/2048" -c4 -m8 &
    loads+=($!)
    python3 "$SCRIPT_DIR/soak-client.py" --port "$PLAIN_PORT" --seconds "$SOAK_SECONDS" >"$WORK/client.json" 2>"$WORK/client.err" &
    loads+=($!)

    local variant=a next_sample=$((T0 + SAMPLE_EVERY)) next_reload=$((T0 + RELOAD_EVERY)) reloads=0
    local upgrade_at=$((T0 + SOAK_SECONDS / 2)) upgraded=0 now
    while now=$(date +%s) && ((now < T_END)); do
        if ((RELOAD_EVERY > 0 && now >= next_reload)); then
            variant=$([[ $variant == a ]] && echo b || echo a)
            write_config "$variant" >"$WORK/gateway.toml.new"
            mv "$WORK/gateway.toml.new" "$WORK/gateway.toml"
            reloads=$((reloads + 1))
            next_reload=$((next_reload + RELOAD_EVERY))
        fi
        if ((UPGRADE == 1 && upgraded == 0 && now >= upgrade_at)); then
            log "upgrade: SIGUSR2 to $(gateway_pids | head -1)"
            kill -USR2 "$GATEWAY_PID"
            echo "$now" >"$WORK/upgrade-at"
            upgraded=1
        fi
        if ((now >= next_sample)); then
            sample load
            next_sample=$((next_sample + SAMPLE_EVERY))
        fi
        sleep 0.5
    done
    local pid
    for pid in "${loads[@]}"; do wait "$pid" || true; done
    sleep "$SETTLE"
    sample after
    log "load done; $reloads config files written"

    report "$reloads" "$upgraded"
}

# report RELOADS UPGRADED: the report's files, and its verdict.
report() {
    local base=$RESULTS_DIR/$BENCH-$STAMP commit
    mkdir -p "$RESULTS_DIR"
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [[ -z $(git -C "$ROOT" status --porcelain 2>/dev/null) ]] || commit="$commit (uncommitted changes)"
    cp "$WORK/samples.tsv" "$base.tsv"
    local judged=0
    python3 "$SCRIPT_DIR/soak-report.py" --work "$WORK" --samples "$base.tsv" --json "$base.json" --md "$base.md" \
        --reloads-written "$1" --upgraded "$2" --seconds "$SOAK_SECONDS" --workers "$WORKERS" --driver "$DRIVER" --smoke "$SMOKE" \
        --commit "$commit" --command "SOAK_SECONDS=$SOAK_SECONDS RELOAD_EVERY=$RELOAD_EVERY UPGRADE=$UPGRADE WORKERS=$WORKERS DRIVER=$DRIVER loadtests/bench/soak.sh" || judged=$?
    cat "$base.md"
    log "wrote $base.md, $base.tsv and $base.json"
    ((judged == 0)) || die "the soak failed a check (above)"
}

main "$@"
