#!/usr/bin/env bash
# overload: a capacity-limited origin under three times its capacity, with request classes,
# through the gateway (overload handling off and on), nginx and HAProxy (their best static
# equivalents), in the same run.
#
#   loadtests/bench/overload.sh
#
# Issue 18's runs (the gateway on its defaults; the operator runs each for 1, 2 and 4 workers):
#
#   GATEWAY_WORKERS=1 loadtests/bench/overload.sh                       # both phases, all proxies
#   GATEWAY_WORKERS=2 PROXIES=gateway-on loadtests/bench/overload.sh
#   GATEWAY_WORKERS=4 PROXIES=gateway-on loadtests/bench/overload.sh
#   SCENARIO=load-dependent GATEWAY_WORKERS=N loadtests/bench/overload.sh   # no false shedding
#   SCENARIO=noisy GATEWAY_WORKERS=N loadtests/bench/overload.sh            # no false shedding
#
# Scenarios (SCENARIO):
#   pool            the origin has CAPACITY workers of SERVICE_MS each and a FIFO queue; the load
#                   is LOAD_FACTOR x its capacity, two phases (capacity halves at the midpoint)
#   load-dependent  the origin has no concurrency limit; each request takes SERVICE_MS plus
#                   PER_INFLIGHT_MS for every other request in service at its start. The
#                   reference phase runs at USUAL_RPS, then LOAD_FACTOR (2) x USUAL_RPS: the
#                   gateway must shed < 0.5% of the requests
#   noisy           no concurrency limit; service times log-normal, median SERVICE_MS, p99/p50
#                   P99_RATIO, independent of load; same phases: the gateway must shed none
# In the last two, nginx and HAProxy (tuned for the pool's capacity) mean nothing: PROXIES
# defaults to gateway-on.
#
# Environment (defaults in brackets):
#   SCENARIO [pool]        pool | load-dependent | noisy (above)
#   GATEWAY_WORKERS [1]    the gateway's `workers`; all of them run on PROXY_CPU (the gateway
#                          pins its workers round-robin over the CPUs of its affinity mask)
#   ADMIN_SAMPLING [1]     1: the gateway's admin port on a free port, `/metrics?per_worker=1`
#                          sampled once a second in the loaded phase (per-worker concurrency
#                          limits, served and shed counts)
#   USUAL_RPS [500]        load-dependent, noisy: the usual rate (the reference phase's)
#   PER_INFLIGHT_MS [0.2]  load-dependent: ms added per other request in service
#   P99_RATIO [3]          noisy: p99/p50 of the service time
#   ORIGIN_SEED [1]        noisy: seed of the service-time draws
#   DURATION [30]          seconds of the overloaded phase of each run
#   UNLOADED_DURATION [10] seconds of the unloaded phase before it (its latency is the reference)
#   ROUNDS [1]             interleaved rounds: every proxy once per round, in a balanced order
#                          (lib.sh `in_round_order`: every proxy in every place equally often)
#   GATEWAY_OVERLOAD_EXTRA [""]  TOML lines added to the gateway's [overload] table (an A/B of a
#                          default: GATEWAY_OVERLOAD_EXTRA='first_class_reserve = false')
#   PROXIES ["gateway-off gateway-on nginx haproxy"; other scenarios: "gateway-on"]
#   CAPACITY [8]           requests the origin serves at once (pool)
#   SERVICE_MS [40; other scenarios: 20]  service time of each request at the origin
#                          (pool: 8 / 40 ms = 200 req/s; the time without load, the median)
#   LOAD_FACTOR [3; other scenarios: 2]  overloaded rate = LOAD_FACTOR x the origin's capacity
#                          in req/s (pool) or x USUAL_RPS
#   UNLOADED_PERCENT [10]  pool: unloaded rate = this % of the origin's capacity in req/s
#   HALVE [1; other scenarios: 0]  1: the origin's capacity halves at the midpoint of the
#                          overloaded phase (pool only)
#   MIX ["critical=10,normal=30,sheddable=60"]  weights of the three classes (names are fixed)
#   ROUTE_TIMEOUT_MS [2000]   every proxy's upstream timeout per request
#   CLIENT_TIMEOUT_MS [ROUTE_TIMEOUT_MS + 1000]  the load generator's timeout (so that a
#                          proxy's own 504 is seen, and waiting beyond it is measured)
#   HEADROOM [CAPACITY]    the check "origin in flight <= CAPACITY + HEADROOM"
#   NGINX_POOL [CAPACITY - ceil(0.3 x CAPACITY)]  nginx: concurrent normal + sheddable requests
#   NGINX_SHEDDABLE [max(1, CAPACITY / 8)]        nginx: concurrent sheddable requests
#   HAPROXY_QUEUE_MS [SERVICE_MS]                 HAProxy: `timeout queue`
#   SEED [1]               seed of the load generator's class choice
#   RETRIES [2]            repeat a run whose origin or proxy was killed from outside (SIGTERM,
#                          SIGKILL, SIGINT: on a shared machine, someone's pkill) at most this often
#   PROXY_CPU [0]          CPU the proxies are pinned to
#   LOAD_CPU [1]           CPU the origin and the load generator share
#   SKIP_BUILD [0]         1: use the existing binaries instead of building them
#   GATEWAY_BIN            a gateway binary to use instead of the one built here
#   RESULTS_DIR [loadtests/results]
#   CAPTURE [1]            1: capture the proxy port's loopback traffic in the overloaded phase
#                          (tcpdump on LOAD_CPU) and report each class's answers as the wire saw
#                          them (loadtests/bench/wire-latency.py: from the request's packet to
#                          the answer's, without the load generator's own delays)
#   KEEP_WORK [0]          1: keep the temporary directory (configs, logs, raw load reports,
#                          every request of the overloaded phase in overload-records.csv)
#
# Each run starts a fresh origin (loadtests `capacity-origin`) and a fresh proxy, measures the
# unloaded phase, resets the origin's statistics and halving clock, then runs the overloaded
# phase (loadtests `overload-load`, open loop). nginx and HAProxy are tuned with the origin's
# capacity (they cannot learn it); the gateway is not. See loadtests/README.md.
#
# Runs of this script on one machine take turns (a lock file in TMPDIR). Writes
# loadtests/results/overload-<UTC timestamp>.{json,md} (other scenarios:
# overload-<scenario>-<UTC timestamp>.{json,md}) and prints the tables.

set -euo pipefail

SCENARIO=${SCENARIO:-pool}
GATEWAY_WORKERS=${GATEWAY_WORKERS:-1}
GATEWAY_OVERLOAD_EXTRA=${GATEWAY_OVERLOAD_EXTRA:-}
ADMIN_SAMPLING=${ADMIN_SAMPLING:-1}
USUAL_RPS=${USUAL_RPS:-500}
PER_INFLIGHT_MS=${PER_INFLIGHT_MS:-0.2}
P99_RATIO=${P99_RATIO:-3}
ORIGIN_SEED=${ORIGIN_SEED:-1}
DURATION=${DURATION:-30}
UNLOADED_DURATION=${UNLOADED_DURATION:-10}
ROUNDS=${ROUNDS:-1}
if [[ $SCENARIO == pool ]]; then
    PROXIES=${PROXIES:-"gateway-off gateway-on nginx haproxy"}
    SERVICE_MS=${SERVICE_MS:-40}
    LOAD_FACTOR=${LOAD_FACTOR:-3}
    HALVE=${HALVE:-1}
else
    PROXIES=${PROXIES:-"gateway-on"}
    SERVICE_MS=${SERVICE_MS:-20}
    LOAD_FACTOR=${LOAD_FACTOR:-2}
    HALVE=${HALVE:-0}
fi
CAPACITY=${CAPACITY:-8}
UNLOADED_PERCENT=${UNLOADED_PERCENT:-10}
MIX=${MIX:-"critical=10,normal=30,sheddable=60"}
ROUTE_TIMEOUT_MS=${ROUTE_TIMEOUT_MS:-2000}
CLIENT_TIMEOUT_MS=${CLIENT_TIMEOUT_MS:-$((ROUTE_TIMEOUT_MS + 1000))}
HEADROOM=${HEADROOM:-$CAPACITY}
NGINX_POOL=${NGINX_POOL:-$((CAPACITY - (3 * CAPACITY + 9) / 10))}
NGINX_SHEDDABLE=${NGINX_SHEDDABLE:-$((CAPACITY / 8 > 1 ? CAPACITY / 8 : 1))}
HAPROXY_QUEUE_MS=${HAPROXY_QUEUE_MS:-$SERVICE_MS}
SEED=${SEED:-1}
RETRIES=${RETRIES:-2}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}
CAPTURE=${CAPTURE:-1}

# Shared with the other benchmarks: log/die, cleanup on exit, tools, ports, pinned processes,
# CPU accounting, nginx config parts, write_report. bench_init sets ROOT, RESULTS_DIR, STAMP, WORK.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init overload
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $SCENARIO == pool ]] || RESULT_NAME=${RESULT_NAME:-overload-$SCENARIO-$STAMP}
# The per-worker sampling and the reports of the other scenarios.
# shellcheck source=SCRIPTDIR/overload-parts.sh
source "$SCRIPT_DIR/overload-parts.sh"

SKIPPED_JSON=()       # {"proxy":..,"round":..,"reason":..}
GATEWAY_BIN=${GATEWAY_BIN:-}
GATEWAY_SKIP=""       # why no gateway row can run (build failed, no binary)
ORIGIN_BIN=""
LOAD_BIN=""
HAPROXY=""
LOADAVG=""
CAP_RPS=""            # the origin's nominal capacity in req/s
RATE=""               # overloaded rate
UNLOADED_RATE=""
PROXY_PIDS=()         # the current run's proxy processes
PROXY_PORT=""
ADMIN_PORT=""          # the current gateway run's admin port (empty: no sampling)
CONFIG_NOTE=""        # what the current run's config deviates from the documented one
INTERRUPTED=""        # why the current run was discarded

main() {
    check_params
    if ((CAPTURE == 1 && EUID != 0)) && ! command -v tcpdump >/dev/null; then
        log "no tcpdump, and not root to install it or capture: CAPTURE=0 (the sheddable check from send)"
        CAPTURE=0
    fi
    if ((CAPTURE == 1)); then install_tools nginx haproxy tcpdump python3; else install_tools nginx haproxy; fi
    HAPROXY=$(sbin_path haproxy)
    check_cpus
    build
    raise_fd_limit
    take_lock
    run_rounds
    report
}

# ---------------------------------------------------------------------------------------------
# Setup

check_params() {
    local v
    whole_numbers DURATION UNLOADED_DURATION ROUNDS CAPACITY SERVICE_MS LOAD_FACTOR UNLOADED_PERCENT HALVE \
        ROUTE_TIMEOUT_MS CLIENT_TIMEOUT_MS HEADROOM NGINX_POOL NGINX_SHEDDABLE HAPROXY_QUEUE_MS SEED RETRIES \
        PROXY_CPU LOAD_CPU GATEWAY_WORKERS ADMIN_SAMPLING USUAL_RPS ORIGIN_SEED
    case $SCENARIO in
    pool | load-dependent | noisy) ;;
    *) die "SCENARIO must be pool, load-dependent or noisy, not '$SCENARIO'" ;;
    esac
    [[ $PER_INFLIGHT_MS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "PER_INFLIGHT_MS must be a number >= 0"
    [[ $P99_RATIO =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v r="$P99_RATIO" 'BEGIN { exit !(r >= 1) }' ||
        die "P99_RATIO must be a number >= 1"
    ((GATEWAY_WORKERS > 0 && USUAL_RPS > 0)) || die "GATEWAY_WORKERS and USUAL_RPS must be > 0"
    [[ $ADMIN_SAMPLING == 0 || $ADMIN_SAMPLING == 1 ]] || die "ADMIN_SAMPLING must be 0 or 1"
    [[ $SCENARIO == pool || $HALVE == 0 ]] || die "HALVE=1 needs SCENARIO=pool (the $SCENARIO origin has no capacity)"
    ((DURATION >= 2 && UNLOADED_DURATION > 0 && ROUNDS > 0 && CAPACITY > 0 && SERVICE_MS > 0)) ||
        die "DURATION >= 2, UNLOADED_DURATION, ROUNDS, CAPACITY, SERVICE_MS > 0"
    ((LOAD_FACTOR > 0 && UNLOADED_PERCENT > 0 && ROUTE_TIMEOUT_MS > 0 && CLIENT_TIMEOUT_MS > 0)) ||
        die "LOAD_FACTOR, UNLOADED_PERCENT, ROUTE_TIMEOUT_MS, CLIENT_TIMEOUT_MS must be > 0"
    ((NGINX_POOL > 0 && NGINX_SHEDDABLE > 0)) || die "NGINX_POOL and NGINX_SHEDDABLE must be > 0"
    [[ $HALVE == 0 || $HALVE == 1 ]] || die "HALVE must be 0 or 1"
    [[ $MIX =~ ^critical=[0-9]+,normal=[0-9]+,sheddable=[0-9]+$ ]] ||
        die "MIX must be critical=N,normal=N,sheddable=N (the routes and the checks use these classes)"
    for v in $PROXIES; do
        case $v in
        gateway-off | gateway-on | nginx | haproxy) ;;
        *) die "unknown proxy '$v' in PROXIES (gateway-off gateway-on nginx haproxy)" ;;
        esac
    done
    CAP_RPS=$(awk -v c="$CAPACITY" -v s="$SERVICE_MS" 'BEGIN { printf "%.6g", c * 1000 / s }')
    if [[ $SCENARIO == pool ]]; then
        RATE=$(awk -v r="$CAP_RPS" -v f="$LOAD_FACTOR" 'BEGIN { printf "%.6g", r * f }')
        UNLOADED_RATE=$(awk -v r="$CAP_RPS" -v p="$UNLOADED_PERCENT" 'BEGIN { printf "%.6g", r * p / 100 }')
    else
        RATE=$((USUAL_RPS * LOAD_FACTOR))
        UNLOADED_RATE=$USUAL_RPS
    fi
}

# Builds the loadtests binaries and the gateway in release. A gateway that does not build (it is
# being worked on) skips the gateway rows; the loadtests binaries must build.
build() {
    local wants_gateway=0
    [[ " $PROXIES " == *" gateway-"* ]] && wants_gateway=1
    if [[ $SKIP_BUILD == 1 ]]; then
        log "SKIP_BUILD=1: using the binaries in $TARGET_DIR/release as they are"
    else
        local pkgs=(-p loadtests)
        [[ $wants_gateway == 1 && -z $GATEWAY_BIN ]] && pkgs=(-p gateway -p loadtests)
        log "building: cargo build --release ${pkgs[*]}"
        if ! (cd "$ROOT" && cargo build --release "${pkgs[@]}") >"$WORK/build.log" 2>&1; then
            tail -n 15 "$WORK/build.log" >&2
            [[ ${#pkgs[@]} == 4 ]] || die "the loadtests binaries do not build"
            GATEWAY_SKIP="the release build failed (cargo build --release -p gateway)"
            log "the gateway does not build: building the loadtests binaries alone"
            (cd "$ROOT" && cargo build --release -p loadtests) >"$WORK/build.log" 2>&1 || {
                tail -n 15 "$WORK/build.log" >&2
                die "the loadtests binaries do not build"
            }
        fi
    fi
    ORIGIN_BIN=$TARGET_DIR/release/capacity-origin
    LOAD_BIN=$TARGET_DIR/release/overload-load
    [[ -x $ORIGIN_BIN && -x $LOAD_BIN ]] || die "no capacity-origin / overload-load in $TARGET_DIR/release"
    if [[ $wants_gateway == 1 && -z $GATEWAY_SKIP ]]; then
        GATEWAY_BIN=${GATEWAY_BIN:-$TARGET_DIR/release/gateway}
        [[ -x $GATEWAY_BIN ]] || GATEWAY_SKIP="no gateway binary at $GATEWAY_BIN"
    fi
}

skip() { # PROXY ROUND REASON
    log "SKIP $1 (round $2): $3"
    SKIPPED_JSON+=("$(jq -cn --arg p "$1" --argjson r "$2" --arg why "$3" '{proxy: $p, round: $r, reason: $why}')")
}

# ---------------------------------------------------------------------------------------------
# Processes

# sample_rss OUT PID...: appends the summed VmRSS (kB) of the PIDs to OUT once a second.
sample_rss() {
    local out=$1
    shift
    while :; do
        status_kb VmRSS "$@" >>"$out"
        sleep 1
    done
}

start_origin() { # DIR
    local dir=$1 halve=()
    pick_port
    ORIGIN_PORT=$PORT
    ((HALVE == 1)) && halve=(--halve-at-s "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')")
    case $SCENARIO in
    load-dependent) halve+=(--mode load-dependent --per-inflight-ms "$PER_INFLIGHT_MS") ;;
    noisy) halve+=(--mode noisy --p99-ratio "$P99_RATIO" --seed "$ORIGIN_SEED") ;;
    esac
    start_pinned "$LOAD_CPU" "$dir/origin.log" "$ORIGIN_BIN" --listen "127.0.0.1:$ORIGIN_PORT" \
        --capacity "$CAPACITY" --service-ms "$SERVICE_MS" "${halve[@]}"
    ORIGIN_PID=$PID
    wait_ready "capacity-origin" "$ORIGIN_PID" "$ORIGIN_PORT" || {
        cat "$dir/origin.log" >&2
        die "the origin did not start"
    }
}

origin_get() { # PATH
    curl -sS --max-time 5 "http://127.0.0.1:$ORIGIN_PORT$1"
}

# start_proxy NAME DIR: writes NAME's config, starts it on CPU PROXY_CPU; sets PROXY_PIDS,
# PROXY_PORT, CONFIG_NOTE. Returns 1 with SKIP_REASON set if it cannot run.
start_proxy() {
    local name=$1 dir=$2 logfile
    pick_port
    PROXY_PORT=$PORT
    CONFIG_NOTE=""
    ADMIN_PORT=""
    case $name in
    gateway-off | gateway-on)
        if ((ADMIN_SAMPLING == 1)); then
            pick_port
            ADMIN_PORT=$PORT
        fi
        [[ -z $GATEWAY_SKIP ]] || {
            SKIP_REASON=$GATEWAY_SKIP
            return 1
        }
        gateway_config "$name" "$dir" || return 1
        logfile=$dir/gateway.log
        gateway_root_args "$GATEWAY_BIN"
        start_pinned "$PROXY_CPU" "$logfile" "$GATEWAY_BIN" run --config "$dir/proxy.conf" "${GATEWAY_ROOT_ARGS[@]}"
        ;;
    nginx)
        nginx_config "$dir"
        logfile=$dir/error.log
        start_nginx "$PROXY_CPU" "$dir" "$dir/proxy.conf"
        ;;
    haproxy)
        haproxy_config "$dir"
        logfile=$dir/haproxy.log
        start_pinned "$PROXY_CPU" "$logfile" "$HAPROXY" -db -f "$dir/proxy.conf"
        ;;
    esac
    local pid=$PID
    if wait_ready "$name" "$pid" "$PROXY_PORT" && answers_ok "$PROXY_PORT" /critical; then
        read -r -a PROXY_PIDS <<<"$pid $(descendants "$pid")"
        log "$name: on 127.0.0.1:$PROXY_PORT (CPU $PROXY_CPU), processes ${PROXY_PIDS[*]}"
        return 0
    fi
    tail -n 15 "$logfile" >&2 2>/dev/null || true
    stop "$pid"
    SKIP_REASON="did not start or did not answer 200 ok on /critical (see its log above)"
    return 1
}

# gateway_config NAME DIR: the documented config; for gateway-off, if this build does not know
# the overload keys yet, the same config without them (which has no overload handling either).
gateway_config() {
    local name=$1 dir=$2 enabled=false out
    [[ $name == gateway-on ]] && enabled=true
    write_gateway_config "$enabled" 1 >"$dir/proxy.conf"
    if out=$("$GATEWAY_BIN" check --config "$dir/proxy.conf" 2>&1); then
        return 0
    fi
    if [[ $name == gateway-on ]]; then
        SKIP_REASON="the gateway rejects the config: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
        return 1
    fi
    write_gateway_config false 0 >"$dir/proxy.conf"
    "$GATEWAY_BIN" check --config "$dir/proxy.conf" >/dev/null 2>&1 || {
        SKIP_REASON="the gateway rejects the config: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
        return 1
    }
    CONFIG_NOTE="this gateway build rejects [overload] and priority ($(tr '\n' ' ' <<<"$out" | cut -c1-200)); ran the same config without them"
    log "gateway-off: $CONFIG_NOTE"
}

write_gateway_config() { # ENABLED WITH_OVERLOAD_KEYS
    local class
    cat <<EOF
[server]
workers = $GATEWAY_WORKERS
admin = $(if [[ -n $ADMIN_PORT ]]; then echo "{ address = \"127.0.0.1:$ADMIN_PORT\" }"; else echo false; fi)
log_level = "warn"
EOF
    [[ $2 == 1 ]] && printf '\n[overload]\nenabled = %s\n' "$1"
    [[ $2 == 1 && -n $GATEWAY_OVERLOAD_EXTRA ]] && printf '%s\n' "$GATEWAY_OVERLOAD_EXTRA"
    cat <<EOF

[[listeners]]
name = "bench"
address = "127.0.0.1:$PROXY_PORT"
EOF
    for class in critical normal sheddable; do
        printf '\n[[routes]]\nname = "%s"\nmatch = { path_prefix = "/%s" }\ncluster = "origin"\n' "$class" "$class"
        [[ $2 == 1 ]] && printf 'priority = "%s"\n' "$class"
        printf 'timeout = "%sms"\n' "$ROUTE_TIMEOUT_MS"
    done
    cat <<EOF

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$ORIGIN_PORT"]
EOF
    # gateway-on runs on the defaults: the adaptive in-flight limit is on by default (no
    # adaptive_concurrency key, no capacity numbers).
    return 0
}

# nginx: one worker, upstream keep-alive. limit_conn reserves origin capacity for critical:
# normal + sheddable together may hold NGINX_POOL origin slots, sheddable NGINX_SHEDDABLE of
# them; beyond that nginx answers 503 at once. Critical is never limited.
nginx_config() {
    local dir=$1
    {
        write_nginx_common "$dir" 16384 20000
        echo "http {"
        write_nginx_http_common "$dir"
        cat <<EOF

    # Requests of a class share a key; an empty key is not limited.
    map \$uri \$pool_key {
        ~^/(normal|sheddable) pool;
        default "";
    }
    map \$uri \$sheddable_key {
        ~^/sheddable sheddable;
        default "";
    }
    limit_conn_zone \$pool_key zone=pool:1m;
    limit_conn_zone \$sheddable_key zone=sheddable:1m;
    limit_conn_status 503;
    limit_conn_log_level info;

    upstream origin {
        server 127.0.0.1:$ORIGIN_PORT;
        keepalive 64;
        keepalive_requests 10000000;
    }
    server {
        listen 127.0.0.1:$PROXY_PORT backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_connect_timeout ${ROUTE_TIMEOUT_MS}ms;
        proxy_send_timeout ${ROUTE_TIMEOUT_MS}ms;
        proxy_read_timeout ${ROUTE_TIMEOUT_MS}ms;
        proxy_next_upstream off;
        location /critical {
            proxy_pass http://origin;
        }
        location /normal {
            limit_conn pool $NGINX_POOL;
            proxy_pass http://origin;
        }
        location /sheddable {
            limit_conn pool $NGINX_POOL;
            limit_conn sheddable $NGINX_SHEDDABLE;
            proxy_pass http://origin;
        }
    }
}
EOF
    } >"$dir/proxy.conf"
}

# HAProxy: one thread; the origin server gets maxconn CAPACITY, the rest waits in HAProxy's
# queue ordered by priority class (critical first) for at most HAPROXY_QUEUE_MS (then 503);
# sheddable is refused at once while anything is queued.
haproxy_config() {
    local dir=$1
    cat >"$dir/proxy.conf" <<EOF
global
    nbthread 1
    maxconn 8000

defaults
    mode http
    timeout connect ${ROUTE_TIMEOUT_MS}ms
    timeout client 120s
    timeout http-keep-alive 120s
    timeout server ${ROUTE_TIMEOUT_MS}ms
    timeout queue ${HAPROXY_QUEUE_MS}ms
    option http-keep-alive
    retries 0

frontend bench
    bind 127.0.0.1:$PROXY_PORT
    maxconn 8000
    # Lower classes leave the queue first.
    http-request set-priority-class int(-10) if { path_beg /critical }
    http-request set-priority-class int(0) if { path_beg /normal }
    http-request set-priority-class int(10) if { path_beg /sheddable }
    http-request deny deny_status 503 if { path_beg /sheddable } { queue(origin) gt 0 }
    default_backend origin

backend origin
    http-reuse always
    server origin 127.0.0.1:$ORIGIN_PORT maxconn $CAPACITY
EOF
}

# ---------------------------------------------------------------------------------------------
# Runs

run_rounds() {
    local round p
    : >"$WORK/runs.jsonl"
    LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
    if [[ $SCENARIO == pool ]]; then
        log "origin: capacity $CAPACITY x ${SERVICE_MS} ms = $CAP_RPS req/s$( ((HALVE == 1)) && echo ", halving at ${DURATION}/2 s")"
    else
        log "origin: $SCENARIO, no concurrency limit, service ${SERVICE_MS} ms$([[ $SCENARIO == load-dependent ]] && echo " + $PER_INFLIGHT_MS ms per request in service" || echo " median, p99/p50 $P99_RATIO")"
    fi
    log "load: $UNLOADED_RATE req/s for ${UNLOADED_DURATION} s, then $RATE req/s for ${DURATION} s; mix $MIX"
    log "load average before the rounds: $LOADAVG"
    for ((round = 1; round <= ROUNDS; round++)); do
        for p in $(in_round_order "$round" $PROXIES); do
            measure "$p" "$round"
        done
    done
}

# measure NAME ROUND: one run, repeated (at most RETRIES more times) if the origin or the proxy
# was killed by a signal from outside (on a shared machine, someone's `pkill`); a proxy that
# crashes on its own is a result and is recorded as such.
measure() {
    local name=$1 round=$2 attempt
    for ((attempt = 1; attempt <= RETRIES + 1; attempt++)); do
        if run_once "$name" "$round" "$WORK/$name-$round-$attempt"; then
            return 0
        fi
        log "round $round $name: $INTERRUPTED, run discarded"
    done
    skip "$name" "$round" "$INTERRUPTED, in each of $((RETRIES + 1)) attempts"
}

# run_once NAME ROUND DIR: a fresh origin and proxy, the unloaded then the overloaded phase;
# appends a JSON line to runs.jsonl (or records a skip) and returns 0, or returns 1 with
# INTERRUPTED set when a process was killed from outside.
run_once() {
    local name=$1 round=$2 dir=$3
    mkdir -p "$dir"
    log "round $round $name: starting"
    start_origin "$dir"
    if ! start_proxy "$name" "$dir"; then
        stop "$ORIGIN_PID"
        skip "$name" "$round" "$SKIP_REASON"
        return 0
    fi
    local proxy_pid=${PROXY_PIDS[0]} proxy_exit=""

    if ! origin_get /__reset >/dev/null || ! load "$UNLOADED_RATE" "$UNLOADED_DURATION" "$dir/unloaded.json"; then
        interrupted "$proxy_pid" && return 1
        stop "$proxy_pid" "$ORIGIN_PID"
        skip "$name" "$round" "the unloaded phase failed (see the load generator's message above)"
        return 0
    fi
    interrupted "$proxy_pid" && return 1

    local t0 t1 sampler wsampler="" split=() loaded=1
    ((HALVE == 1)) && split=(--split-at-s "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')")
    origin_get /__reset >/dev/null || true
    : >"$dir/rss.txt"
    # The samplers (and the curl, awk and sleep they start) run on the load CPU, not beside the
    # proxy: a scrape's process start-up on the proxy's CPU showed as a once-a-second cluster
    # of slow answers at the wire.
    sample_rss "$dir/rss.txt" "${PROXY_PIDS[@]}" &
    sampler=$!
    STARTED+=("$sampler")
    taskset -pc "$LOAD_CPU" "$sampler" >/dev/null
    if [[ -n $ADMIN_PORT ]]; then
        scrape_workers >"$dir/workers-base.json" || true
        sample_workers "$dir/workers.jsonl" &
        wsampler=$!
        STARTED+=("$wsampler")
        taskset -pc "$LOAD_CPU" "$wsampler" >/dev/null
    fi
    local capture=""
    if ((CAPTURE == 1)); then
        start_pinned "$LOAD_CPU" "$dir/tcpdump.log" tcpdump -i lo -s 160 -B 16384 -U -w "$dir/capture.pcap" \
            "tcp dst port $PROXY_PORT or tcp src port $PROXY_PORT"
        capture=$PID
        sleep 0.5 # tcpdump is listening once it has said so; half a second is plenty
    fi
    local s0p s0l s1p s1l
    s0p=$(steal_ticks "$PROXY_CPU") s0l=$(steal_ticks "$LOAD_CPU")
    t0=$(cpu_ticks "${PROXY_PIDS[@]}")
    load "$RATE" "$DURATION" "$dir/overload.json" "${split[@]}" --records "$dir/overload-records.csv" || loaded=0
    t1=$(cpu_ticks "${PROXY_PIDS[@]}")
    s1p=$(steal_ticks "$PROXY_CPU") s1l=$(steal_ticks "$LOAD_CPU")
    stop "$sampler" ${wsampler:+"$wsampler"} ${capture:+"$capture"}
    local wire=null
    if [[ -n $capture ]]; then
        wire=$(python3 "$SCRIPT_DIR/wire-latency.py" "$dir/capture.pcap" "$PROXY_PORT" --json 2>>"$dir/tcpdump.log") || {
            log "round $round $name: no answers at the wire (the capture failed: $(tail -n 2 "$dir/tcpdump.log" | tr '\n' ' '))"
            wire=null
        }
        ((KEEP_WORK == 1)) || rm -f "$dir/capture.pcap"
    fi
    [[ -z $ADMIN_PORT ]] || scrape_workers >"$dir/workers-end.json" || true
    local stats hwm
    stats=$(origin_get /__stats) || stats=null
    hwm=$(status_kb VmHWM "${PROXY_PIDS[@]}")
    interrupted "$proxy_pid" && return 1
    if ! kill -0 "$proxy_pid" 2>/dev/null; then
        reap "$proxy_pid"
        proxy_exit=$STATUS
        log "round $round $name: the proxy exited during the run (status $proxy_exit)"
    fi
    stop "$proxy_pid" "$ORIGIN_PID"
    if [[ $loaded == 0 ]]; then
        skip "$name" "$round" "the load generator failed in the overloaded phase"
        return 0
    fi

    jq -cn \
        --arg proxy "$name" --argjson round "$round" --arg note "$CONFIG_NOTE" \
        --slurpfile unloaded "$dir/unloaded.json" --slurpfile overload "$dir/overload.json" \
        --argjson origin "$stats" --argjson hwm "$hwm" --arg proxy_exit "$proxy_exit" \
        --argjson rss "$(jq -s . "$dir/rss.txt")" \
        --argjson ticks "$((t1 - t0))" --argjson tck "$CLK_TCK" \
        --argjson workers "$(workers_json "$dir")" --argjson wire "$wire" \
        --argjson steal_proxy "$((s1p - s0p))" --argjson steal_load "$((s1l - s0l))" \
        --arg config "$(cat "$dir/proxy.conf")" '
        {
          proxy: $proxy, round: $round,
          config_note: ([(if $note == "" then empty else $note end),
                         (if $proxy_exit == "" then empty else "the proxy exited during the overloaded phase (status \($proxy_exit))" end)]
                        | if length == 0 then null else join("; ") end),
          unloaded: ($unloaded[0] | {params, generator, total, classes}),
          overload: $overload[0],
          origin: $origin,
          proxy_peak_rss_kb: $hwm,
          proxy_rss_kb_per_s: $rss,
          proxy_cpu_s: ($ticks / $tck),
          steal_s: {proxy_cpu: ($steal_proxy / $tck), load_cpu: ($steal_load / $tck)},
          workers: $workers,
          wire: $wire,
          config: $config
        }' >>"$WORK/runs.jsonl"
    log "$(jq -r '"round \(.round) \(.proxy): " + ([.overload.classes | to_entries[] |
        "\(.key) \(.value.succeeded)/\(.value.offered) ok"] | join(", ")) +
        ", origin max in flight \(.origin.max_in_flight // "?"), peak RSS \(.proxy_peak_rss_kb) kB"' \
        <<<"$(tail -n 1 "$WORK/runs.jsonl")")"
}

# interrupted PROXY_PID: true, with INTERRUPTED set and both processes stopped, if the origin
# ended, or the proxy was ended by SIGTERM, SIGKILL or SIGINT (none of which this script sent).
interrupted() {
    local proxy_pid=$1
    if ! kill -0 "$ORIGIN_PID" 2>/dev/null; then
        reap "$ORIGIN_PID"
        INTERRUPTED="the origin ended during the run (exit status $STATUS)"
        stop "$proxy_pid"
        return 0
    fi
    if ! kill -0 "$proxy_pid" 2>/dev/null; then
        reap "$proxy_pid"
        if [[ $STATUS == 143 || $STATUS == 137 || $STATUS == 130 ]]; then
            INTERRUPTED="the proxy was killed from outside (exit status $STATUS)"
            stop "$ORIGIN_PID"
            return 0
        fi
        # A crash: a result, not an interruption (reap remembers the status for the caller).
    fi
    return 1
}

# load RATE SECONDS OUT [ARGS...]: the load generator, pinned to LOAD_CPU, at the current proxy.
load() {
    local rate=$1 seconds=$2 out=$3
    shift 3
    taskset -c "$LOAD_CPU" "$LOAD_BIN" --target "http://127.0.0.1:$PROXY_PORT" --rate "$rate" \
        --duration-s "$seconds" --mix "$MIX" --timeout-ms "$CLIENT_TIMEOUT_MS" --seed "$SEED" \
        --out "$out" "$@" 2>>"$WORK/load.log" || {
        tail -n 5 "$WORK/load.log" >&2
        return 1
    }
}

# ---------------------------------------------------------------------------------------------
# Report

report() {
    write_report \
        --arg haproxy "$("$HAPROXY" -v 2>&1 | head -n 1 | awk '{print $3}')" \
        --argjson capacity "$CAPACITY" --argjson service_ms "$SERVICE_MS" --argjson cap_rps "$CAP_RPS" \
        --argjson rate "$RATE" --argjson unloaded_rate "$UNLOADED_RATE" --argjson duration "$DURATION" \
        --argjson unloaded_duration "$UNLOADED_DURATION" --argjson halve "$HALVE" --arg mix "$MIX" \
        --argjson route_timeout_ms "$ROUTE_TIMEOUT_MS" --argjson client_timeout_ms "$CLIENT_TIMEOUT_MS" \
        --argjson headroom "$HEADROOM" --argjson rounds "$ROUNDS" \
        --argjson nginx_pool "$NGINX_POOL" --argjson nginx_sheddable "$NGINX_SHEDDABLE" \
        --argjson haproxy_queue_ms "$HAPROXY_QUEUE_MS" \
        --argjson pcpu "$PROXY_CPU" --argjson lcpu "$LOAD_CPU" --arg order "$PROXIES" \
        --arg scenario "$SCENARIO" --argjson gateway_workers "$GATEWAY_WORKERS" \
        --arg gateway_overload_extra "$GATEWAY_OVERLOAD_EXTRA" \
        --argjson usual_rps "$USUAL_RPS" --argjson per_inflight_ms "$PER_INFLIGHT_MS" \
        --argjson p99_ratio "$P99_RATIO" --argjson origin_seed "$ORIGIN_SEED"
}

summary_jq() {
    if [[ $SCENARIO != pool ]]; then
        scenario_summary_jq
        return
    fi
    workers_summary_jq
    cat <<'EOF'
def pct(a; b): if b > 0 then a * 100 / b else null end;
def check(ok; value): {pass: ok, value: value};
($halve == 1) as $halved
| (if $halved then [$cap_rps, $cap_rps / 2] else [$cap_rps] end) as $caps
| ($duration / ($caps | length)) as $phase_s
| ($caps | map(. * $phase_s) | add) as $capacity_requests
| {
  benchmark: "overload",
  description: "capacity-limited origin under \($rate / $cap_rps) x its capacity, classes critical/normal/sheddable, open-loop load",
  timestamp: $stamp,
  machine: {kernel: $kernel, nproc: $nproc, cpu_model: $cpu, nginx: $nginx, haproxy: $haproxy,
            loadavg_before: $loadavg},
  git: {commit: $commit, dirty: $dirty},
  params: {
    origin: {capacity: $capacity, service_ms: $service_ms, capacity_rps: $cap_rps,
             halves_at_s: (if $halved then $duration / 2 else null end),
             capacity_requests: $capacity_requests},
    load: {mix: $mix, rate: $rate, duration_s: $duration, unloaded_rate: $unloaded_rate,
           unloaded_duration_s: $unloaded_duration, client_timeout_ms: $client_timeout_ms},
    route_timeout_ms: $route_timeout_ms, headroom: $headroom, rounds: $rounds,
    nginx: {pool: $nginx_pool, sheddable: $nginx_sheddable},
    haproxy: {queue_timeout_ms: $haproxy_queue_ms},
    proxy_cpu: $pcpu, load_cpu: $lcpu, order: $order, scenario: $scenario, gateway_workers: $gateway_workers,
    gateway_overload_extra: $gateway_overload_extra
  },
  skipped: $skipped,
  runs: [$runs[] | . as $r | .overload as $o
    | (if ($o.phases | length) == ($caps | length) then $o.phases
       else [{from_s: 0, to_s: $duration, total: $o.total, classes: $o.classes}] end) as $phases
    | ([range($phases | length) as $i | $phases[$i] as $p | ($caps[$i] * ($p.to_s - $p.from_s)) as $cr
        | ($p.classes.critical.offered) as $co
        | {critical: ([$co, $cr] | min), normal: ([$p.classes.normal.offered, ([0, $cr - $co] | max)] | min)}]) as $servable
    | ($servable | map(.normal) | add // 0) as $normal_servable
    | ([$o.classes[] | .timed_out] | add) as $client_timeouts
    | ([$o.classes[] | .max_ms // 0] | max) as $max_ms
    | ($r.proxy_rss_kb_per_s) as $rss
    | ($rss[5] // $rss[-1] // null) as $rss_early
    | ($rss[-1] // null) as $rss_end
    | ($o.classes.critical) as $c | ($o.classes.normal) as $n | ($o.classes.sheddable) as $s
    | ($r.unloaded.classes) as $u
    | ($r.unloaded.total.ok_ms.p99) as $ref
    | {
      proxy: $r.proxy, round: $r.round, config_note: $r.config_note,
      valid: ($o.generator.overloaded == 0 and $r.unloaded.generator.overloaded == 0),
      classes: ($o.classes | with_entries(.value |= {
        offered, succeeded, ok_pct: pct(.succeeded; .offered), shed, rate_limited,
        timed_out: (.timed_out + (.error_status["504"] // 0)),
        client_timeouts: .timed_out, status_504: (.error_status["504"] // 0),
        other_errors: (.errors - (.error_status["504"] // 0)),
        ok_p50_ms: .ok_ms.p50, ok_p99_ms: .ok_ms.p99, ok_max_ms: .ok_ms.max,
        shed_p50_ms: .shed_ms.p50, shed_p99_ms: .shed_ms.p99,
        shed_from_send_p50_ms: .shed_from_send_ms.p50, shed_from_send_p99_ms: .shed_from_send_ms.p99, max_ms
      })),
      unloaded: ($u | with_entries(.value |= {p50_ms: .ok_ms.p50, p99_ms: .ok_ms.p99, ok: .succeeded, offered})),
      unloaded_p99_ms: $ref,
      phases: [$phases[] | {from_s, to_s, ok_per_s: (.classes | with_entries(.value |= (.succeeded / ($phase_s)))),
                           ok_pct: (.classes | with_entries(.value |= pct(.succeeded; .offered))),
                           ok_p99_ms: (.classes | with_entries(.value |= .ok_ms.p99))}],
      goodput_pct: pct($o.total.succeeded; $capacity_requests),
      normal_servable: $normal_servable,
      normal_served_pct: pct($n.succeeded; $normal_servable),
      origin: $r.origin,
      proxy_peak_rss_kb: $r.proxy_peak_rss_kb,
      proxy_rss_kb: {at_5s: $rss_early, end: $rss_end, max: ($rss | max)},
      proxy_cpu_s: $r.proxy_cpu_s,
      # Time the hypervisor took each CPU away, in % of the loaded phase (a vCPU waiting for
      # its host shows up in every latency of that moment; 0 on bare metal).
      steal_pct: (if $r.steal_s and ($o.wall_s // 0) > 0
                  then {proxy_cpu: (100 * $r.steal_s.proxy_cpu / $o.wall_s), load_cpu: (100 * $r.steal_s.load_cpu / $o.wall_s)}
                  else null end),
      workers: ($r.workers | worker_summary($duration; $halved)),
      generator: {overloaded: ($o.generator.overloaded + $r.unloaded.generator.overloaded),
                  scheduler_max_lag_ms: ([$o.generator.scheduler_max_lag_ms, $r.unloaded.generator.scheduler_max_lag_ms] | max),
                  send_lag_p50_ms: $o.generator.send_lag_ms.p50, send_lag_p99_ms: $o.generator.send_lag_ms.p99,
                  connections_opened: $o.generator.connections_opened},
      wire: (if $r.wire then {unanswered: $r.wire.unanswered,
                              rows: [$r.wire.rows[] | select(.path | startswith("/critical") or startswith("/normal") or startswith("/sheddable"))]}
             else null end),
      checks: {
        critical_all_ok: check($c.succeeded == $c.offered; pct($c.succeeded; $c.offered)),
        critical_p99: check($c.ok_ms.p99 != null and $ref != null and $c.ok_ms.p99 <= 1.5 * $ref;
                            (if $c.ok_ms.p99 and $ref then $c.ok_ms.p99 / $ref else null end)),
        normal_served: check(($n.succeeded) >= 0.9 * $normal_servable; pct($n.succeeded; $normal_servable)),
        normal_p99: check($n.ok_ms.p99 != null and $ref != null and $n.ok_ms.p99 <= 2 * $ref;
                          (if $n.ok_ms.p99 and $ref then $n.ok_ms.p99 / $ref else null end)),
        # The proxy's own time when the wire was captured; from send otherwise (which also
        # holds the load generator's wake-up after the answer arrived, on the loaded CPU).
        sheddable_fast_503: ((if $r.wire then [$r.wire.rows[] | select(.path == "/sheddable" and .status == "503") | .p99_ms][0]
                              else null end) as $wire
                             | ($wire // $s.shed_from_send_ms.p99) as $v
                             | check($s.shed > 0 and $v != null and $v <= 1; $v) + {wire: ($wire != null), from_send: $s.shed_from_send_ms.p99}),
        goodput: check(pct($o.total.succeeded; $capacity_requests) >= 92; pct($o.total.succeeded; $capacity_requests)),
        route_timeout: check($client_timeouts == 0 and $max_ms <= $route_timeout_ms + 100; $max_ms),
        origin_headroom: check(($r.origin.max_in_flight // 1e9) <= $capacity + $headroom; $r.origin.max_in_flight),
        memory_flat: check($rss_early != null and $rss_end <= $rss_early * 1.1 + 1024;
                           (if $rss_early then ($rss_end - $rss_early) else null end))
      },
      series: $o.series,
      config: $r.config
    }]
}
EOF
}

markdown() {
    if [[ $SCENARIO != pool ]]; then
        scenario_markdown "$1"
        return
    fi
    jq -r '
    def fixed(n): if . == null then "–" elif . < 0 then "-" + (-. | fixed(n)) elif n == 0 then round | tostring
      else pow(10; n) as $m | (. * $m | round) as $c | ($c % $m | tostring) as $f
        | "\($c / $m | floor).\([range(n - ($f | length))] | map("0") | join(""))\($f)" end;
    def mib: if . == null then "–" else (. / 1024 | fixed(1)) end;
    def mark: if .pass then "✓ " else "✗ " end;
    def name: if $rounds > 1 then "\(.proxy) #\(.round)" else .proxy end;
    .params as $p |
    "## overload \(.timestamp)",
    "",
    "Origin: `capacity-origin`, \($p.origin.capacity) requests at once × \($p.origin.service_ms) ms = \($p.origin.capacity_rps) req/s, FIFO queue without bound\(if $p.origin.halves_at_s then ", capacity halved at \($p.origin.halves_at_s) s" else "" end) (\($p.origin.capacity_requests) requests of capacity in the overloaded phase). Load: `overload-load`, open loop, mix \($p.load.mix), \($p.load.unloaded_rate) req/s for \($p.load.unloaded_duration_s) s (unloaded reference), then \($p.load.rate) req/s for \($p.load.duration_s) s; client timeout \($p.load.client_timeout_ms) ms, route timeout \($p.route_timeout_ms) ms. A fresh origin and proxy per run; proxy pinned to CPU \($p.proxy_cpu) (gateway: \($p.gateway_workers // 1) worker(s)\(if ($p.gateway_overload_extra // "") != "" then ", [overload] adds `\($p.gateway_overload_extra)`" else "" end)), origin and load to CPU \($p.load_cpu); \($p.rounds) round(s). nginx: limit_conn pool \($p.nginx.pool), sheddable \($p.nginx.sheddable); HAProxy: maxconn \($p.origin.capacity), timeout queue \($p.haproxy.queue_timeout_ms) ms.",
    "",
    "Machine: Linux \(.machine.kernel), \(.machine.nproc) CPUs (\(.machine.cpu_model)), load average \(.machine.loadavg_before) before the rounds; nginx \(.machine.nginx); HAProxy \(.machine.haproxy); commit \(.git.commit)\(if .git.dirty then " (dirty tree)" else "" end).",
    "",
    "### Per class, overloaded phase",
    "",
    "| proxy | class | offered | ok % | shed 503 | 429 | timed out | other errors | p50 ok ms | p99 ok ms | p99 503 ms (from send) | unloaded p50 / p99 ms |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.runs[] as $r | $r.classes | to_entries[] | .key as $k | .value |
      "| \($r | name) | \($k) | \(.offered) | \(.ok_pct | fixed(1)) | \(.shed) | \(.rate_limited) | \(.timed_out) | \(.other_errors) | \(.ok_p50_ms | fixed(1)) | \(.ok_p99_ms | fixed(1)) | \(.shed_p99_ms | fixed(2)) (\(.shed_from_send_p99_ms | fixed(2))) | \($r.unloaded[$k].p50_ms | fixed(1)) / \($r.unloaded[$k].p99_ms | fixed(1)) |"),
    "",
    "Latencies run from each request'"'"'s scheduled send time (open loop), except \"from send\": from the moment a load worker began sending it, without the generator'"'"'s own delay (see the generator column below). Timed out: the proxy'"'"'s own 504 plus client timeouts (none when the proxy keeps its route timeout).",
    "",
    "### Per proxy",
    "",
    "| proxy | goodput % of capacity | ok/s critical / normal / sheddable\(if $p.origin.halves_at_s then ", before → after halving" else "" end) | critical p99 ms\(if $p.origin.halves_at_s then ", before → after halving" else "" end) | origin max in flight | origin max queue | origin unanswered | proxy peak RSS MiB | RSS at 5 s → end MiB | proxy CPU s | host steal % proxy / load CPU | generator lag p50 / p99 ms |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.runs[] | "| \(name) | \(.goodput_pct | fixed(1)) | \([.phases[] | [.ok_per_s.critical, .ok_per_s.normal, .ok_per_s.sheddable] | map(fixed(0)) | join(" / ")] | join(" → ")) | \([.phases[] | .ok_p99_ms.critical // null | fixed(1)] | join(" → ")) | \(.origin.max_in_flight // "–") | \(.origin.max_queued // "–") | \(.origin.unanswered // "–") | \(.proxy_peak_rss_kb | mib) | \(.proxy_rss_kb.at_5s | mib) → \(.proxy_rss_kb.end | mib) | \(.proxy_cpu_s | fixed(2)) | \(.steal_pct.proxy_cpu // null | fixed(1)) / \(.steal_pct.load_cpu // null | fixed(1)) | \(.generator.send_lag_p50_ms | fixed(2)) / \(.generator.send_lag_p99_ms | fixed(2))\(if .valid then "" else ", OVERLOADED (\(.generator.overloaded) not sent): not valid" end) |"),
    "",
    (if [.runs[] | select(.wire)] | length > 0 then
      "### At the wire (CAPTURE=1)",
      "",
      "From the packet of each request to the first packet of its answer, on the loopback device (`tcpdump`, `loadtests/bench/wire-latency.py`): the proxy'"'"'s own time, without the load generator'"'"'s delays before sending or after the answer arrived.",
      "",
      "| proxy | path | status | answers | p50 ms | p99 ms | max ms | over 1 ms |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |",
      (.runs[] | select(.wire) as $r | $r.wire.rows[] |
        "| \($r | name) | \(.path) | \(.status) | \(.count) | \(.p50_ms | fixed(3)) | \(.p99_ms | fixed(3)) | \(.max_ms | fixed(2)) | \(.over_1ms) |"),
      ""
    else empty end),
    '"$(workers_markdown_jq)"',
    "### Targets",
    "",
    "| proxy | critical 100% ok | critical p99 ≤ 1.5× unloaded | normal ≥ 90% of servable | normal p99 ≤ 2× unloaded | sheddable 503 p99 ≤ 1 ms (at the wire; from send) | goodput ≥ 92% | nothing waits > route timeout (max ms) | origin in flight ≤ \($p.origin.capacity) + \($p.headroom) | RSS flat (growth kB) |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.runs[] | .checks as $c |
      "| \(name) | \($c.critical_all_ok | mark)\($c.critical_all_ok.value | fixed(1))% | \($c.critical_p99 | mark)\($c.critical_p99.value | fixed(2))× | \($c.normal_served | mark)\($c.normal_served.value | fixed(1))% | \($c.normal_p99 | mark)\($c.normal_p99.value | fixed(2))× | \($c.sheddable_fast_503 | mark)\(if $c.sheddable_fast_503.wire then "\($c.sheddable_fast_503.value | fixed(2)) ms; \($c.sheddable_fast_503.from_send | fixed(2))" else "–; \($c.sheddable_fast_503.value | fixed(2))" end) ms | \($c.goodput | mark)\($c.goodput.value | fixed(1))% | \($c.route_timeout | mark)\($c.route_timeout.value | fixed(0)) | \($c.origin_headroom | mark)\($c.origin_headroom.value // "–") | \($c.memory_flat | mark)\($c.memory_flat.value // "–") |"),
    "",
    "Servable normal requests: per phase, min(normal offered, capacity − critical offered). The p99 ratios compare with the p99 of all successes in the unloaded phase of the same run (\([.runs[] | "\(name) \(.unloaded_p99_ms | fixed(1)) ms"] | join(", "))): every class takes the same path when nothing is contended, and the pooled sample is ten times larger than the critical one.",
    (.runs[] | select(.config_note) | "", "Note (\(name)): \(.config_note)."),
    (if (.skipped | length) > 0 then "", "Skipped: " + ([.skipped[] | "\(.proxy) (round \(.round)): \(.reason)"] | join("; ")) else empty end)
    ' --argjson rounds "$ROUNDS" "$1"
}

main "$@"
