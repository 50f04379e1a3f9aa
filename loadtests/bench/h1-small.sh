#!/usr/bin/env bash
# h1-small: small keep-alive HTTP/1.1 GETs through the gateway (io_uring and epoll drivers) and
# through nginx as a reverse proxy, with a direct run (wrk straight to the origin) as the floor.
#
#   loadtests/bench/h1-small.sh
#
# Environment (defaults in brackets):
#   DURATION [10]      seconds of each measured wrk run
#   WARMUP [2]         seconds of the unmeasured wrk run before each measured run
#   ROUNDS [3]         interleaved rounds: every proxy once per round, in PROXIES order
#   CONNECTIONS [64]   wrk connections (one wrk thread)
#   PROXIES ["gateway-uring gateway-epoll nginx direct"]; also gateway-uring-log (access log
#                      on, JSON to /dev/null) and gateway-baseline (BASELINE_GATEWAY_BIN, io_uring:
#                      another build of the gateway, e.g. an older commit, measured in the same run)
#   PROXY_CPU [0]      CPU the proxies are pinned to
#   LOAD_CPU [1]       CPU the origin and wrk share
#   SKIP_BUILD [0]     1: use the existing target/release/gateway instead of building it
#   RESULTS_DIR [loadtests/results]
#   KEEP_WORK [0]      1: keep the temporary directory (configs, logs, raw wrk output)
#
# The origin is nginx (1 worker, `return 200 "ok"`). Every proxy has one worker and upstream
# keep-alive, and is started once and kept running across all rounds. The proxy's CPU time is
# utime+stime (+cutime+cstime) of all its processes from /proc/PID/stat, read right before and
# right after each measured run, divided by the requests wrk completed in that run.
#
# Writes loadtests/results/h1-small-<UTC timestamp>.{json,md} and prints the table.

set -euo pipefail

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
PROXIES=${PROXIES:-"gateway-uring gateway-epoll nginx direct"}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}

# Shared with the other benchmarks: log/die, cleanup on exit, tools, ports, pinned processes,
# CPU accounting, nginx config parts, write_report. bench_init sets ROOT, RESULTS_DIR, STAMP, WORK.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init h1-small

declare -A PROXY_PID=()    # proxy name -> PID of its (main) process
declare -A PROXY_PORT=()   # proxy name -> port wrk loads
ACTIVE=()                  # proxies that started and answered correctly
SKIPPED_JSON=()            # {"proxy":..,"reason":..} for the ones that did not
GATEWAY_BIN=""
ORIGIN_PID=""
ORIGIN_PORT=""
LOADAVG=""                 # /proc/loadavg when the measured rounds start

main() {
    check_params
    install_tools nginx wrk
    check_cpus
    build_gateway
    start_nginx_origin
    start_proxies
    ((${#ACTIVE[@]} > 0)) || die "nothing to measure"
    write_wrk_script
    run_rounds
    report
}

# ---------------------------------------------------------------------------------------------
# Setup

check_params() {
    local v
    whole_numbers DURATION WARMUP ROUNDS CONNECTIONS PROXY_CPU LOAD_CPU
    ((DURATION > 0 && ROUNDS > 0 && CONNECTIONS > 0)) || die "DURATION, ROUNDS, CONNECTIONS must be > 0"
    for v in $PROXIES; do
        case $v in
        gateway-uring | gateway-epoll | gateway-uring-log | nginx | direct) ;;
        gateway-baseline) [[ -x ${BASELINE_GATEWAY_BIN:-} ]] || die "gateway-baseline needs BASELINE_GATEWAY_BIN (an executable)" ;;
        *) die "unknown proxy '$v' in PROXIES (gateway-uring gateway-epoll gateway-uring-log gateway-baseline nginx direct)" ;;
        esac
    done
}

build_gateway() {
    [[ " $PROXIES " == *" gateway-"* ]] || return 0
    local bin=${CARGO_TARGET_DIR:-$ROOT/target}/release/gateway
    if [[ $SKIP_BUILD == 1 ]]; then
        log "SKIP_BUILD=1: using $bin as it is"
    else
        log "building the gateway: cargo build --release -p gateway"
        if ! (cd "$ROOT" && cargo build --release -p gateway) >"$WORK/gateway-build.log" 2>&1; then
            tail -n 15 "$WORK/gateway-build.log" >&2
            skip_gateway "the release build failed (cargo build --release -p gateway)"
            return 0
        fi
    fi
    if [[ -x $bin ]]; then
        GATEWAY_BIN=$bin
    else
        skip_gateway "no gateway binary at $bin"
    fi
}

skip_gateway() {
    local p
    for p in $PROXIES; do
        [[ $p == gateway-* ]] && skip "$p" "$1"
    done
    return 0
}

skip() {
    log "SKIP $1: $2"
    SKIPPED_JSON+=("$(jq -cn --arg p "$1" --arg r "$2" '{proxy: $p, reason: $r}')")
}

is_skipped() {
    local s
    for s in "${SKIPPED_JSON[@]}"; do
        [[ $(jq -r .proxy <<<"$s") == "$1" ]] && return 0
    done
    return 1
}

# ---------------------------------------------------------------------------------------------
# Processes


start_proxies() {
    local p
    for p in $PROXIES; do
        is_skipped "$p" && continue
        case $p in
        gateway-uring) start_gateway "$p" io_uring ;;
        gateway-epoll) start_gateway "$p" epoll ;;
        gateway-uring-log) start_gateway "$p" io_uring "$GATEWAY_BIN" $'[server.access_log]\nformat = "json"\npath = "/dev/null"' ;;
        gateway-baseline) start_gateway "$p" io_uring "$BASELINE_GATEWAY_BIN" ;;
        nginx) start_nginx_proxy ;;
        direct)
            PROXY_PORT[direct]=$ORIGIN_PORT
            ACTIVE+=(direct)
            ;;
        esac
    done
    log "measuring: ${ACTIVE[*]:-nothing}"
}

start_gateway() { # NAME DRIVER [BINARY [EXTRA_SERVER_TOML]]
    local name=$1 driver=$2 bin=${3:-$GATEWAY_BIN} extra=${4:-} dir=$WORK/$1
    mkdir -p "$dir"
    pick_port
    cat >"$dir/gateway.toml" <<EOF
[server]
workers = 1
io_driver = "$driver"
admin = false
log_level = "warn"
$extra

[[listeners]]
name = "bench"
address = "127.0.0.1:$PORT"

[[routes]]
name = "all"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$ORIGIN_PORT"]
EOF
    gateway_root_args "$bin"
    start_pinned "$PROXY_CPU" "$dir/gateway.log" "$bin" run --config "$dir/gateway.toml" "${GATEWAY_ROOT_ARGS[@]}"
    check_started "$name" "$PID" "$PORT" "$dir/gateway.log"
}

start_nginx_proxy() {
    local dir=$WORK/nginx
    mkdir -p "$dir"
    pick_port
    {
        write_nginx_common "$dir" 4096
        echo "http {"
        write_nginx_http_common "$dir"
        cat <<EOF
    upstream origin {
        server 127.0.0.1:$ORIGIN_PORT;
        keepalive 64;
        keepalive_requests 10000000;
    }
    server {
        listen 127.0.0.1:$PORT;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
    } >"$dir/nginx.conf"
    start_nginx "$PROXY_CPU" "$dir" "$dir/nginx.conf"
    check_started nginx "$PID" "$PORT" "$dir/error.log"
}

# check_started NAME PID PORT LOG: keeps NAME if it accepts and answers 200 "ok", else skips it.
check_started() {
    local name=$1 pid=$2 port=$3 logfile=$4
    if wait_ready "$name" "$pid" "$port" && answers_ok "$port"; then
        PROXY_PID[$name]=$pid
        PROXY_PORT[$name]=$port
        ACTIVE+=("$name")
        log "$name: on 127.0.0.1:$port (CPU $PROXY_CPU)"
        return 0
    fi
    tail -n 15 "$logfile" >&2 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    skip "$name" "did not start or did not answer 200 ok through 127.0.0.1:$port (see its log above)"
}

# ---------------------------------------------------------------------------------------------
# Load

write_wrk_script() {
    cat >"$WORK/report.lua" <<'EOF'
-- Prints one machine-readable line after the run; latencies in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
EOF
}

# run_wrk PORT SECONDS OUTFILE
run_wrk() {
    taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"$2"s --latency -s "$WORK/report.lua" \
        "http://127.0.0.1:$1/" >"$3" 2>&1
}

run_rounds() {
    local round p
    : >"$WORK/runs.jsonl"
    LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
    log "load average before the rounds: $LOADAVG"
    for ((round = 1; round <= ROUNDS; round++)); do
        for p in "${ACTIVE[@]}"; do
            measure "$p" "$round"
        done
    done
}

# measure NAME ROUND: warm-up, then one measured run; appends a JSON line to runs.jsonl.
measure() {
    local name=$1 round=$2 port=${PROXY_PORT[$1]} out=$WORK/wrk-$1-$2.txt
    local proxy_pids=() origin_pids=() p0 p1 o0 o1 kv
    if [[ $name != direct ]]; then
        read -r -a proxy_pids <<<"${PROXY_PID[$name]} $(descendants "${PROXY_PID[$name]}")"
    fi
    read -r -a origin_pids <<<"$ORIGIN_PID $(descendants "$ORIGIN_PID")"

    if ((WARMUP > 0)); then
        run_wrk "$port" "$WARMUP" "$WORK/warmup.txt" || true
    fi
    p0=$(cpu_ticks "${proxy_pids[@]}")
    o0=$(cpu_ticks "${origin_pids[@]}")
    if ! run_wrk "$port" "$DURATION" "$out" || ! grep -q '^RESULT ' "$out"; then
        cat "$out" >&2
        log "round $round $name: wrk failed, run not recorded"
        return 0
    fi
    p1=$(cpu_ticks "${proxy_pids[@]}")
    o1=$(cpu_ticks "${origin_pids[@]}")

    local -A r=()
    for kv in $(grep '^RESULT ' "$out" | head -n 1 | cut -d' ' -f2-); do
        r[${kv%%=*}]=${kv#*=}
    done
    jq -cn \
        --arg proxy "$name" --argjson round "$round" \
        --argjson requests "${r[requests]}" --argjson duration_us "${r[duration_us]}" \
        --argjson p50 "${r[p50_us]}" --argjson p90 "${r[p90_us]}" --argjson p99 "${r[p99_us]}" \
        --argjson max "${r[max_us]}" --argjson bytes "${r[bytes]}" \
        --argjson connect "${r[connect]}" --argjson read "${r[read]}" --argjson write "${r[write]}" \
        --argjson status "${r[status]}" --argjson timeout "${r[timeout]}" \
        --argjson proxy_ticks "$((p1 - p0))" --argjson origin_ticks "$((o1 - o0))" \
        --argjson has_proxy "$([[ $name == direct ]] && echo false || echo true)" \
        --argjson tck "$CLK_TCK" '
        def per_req(ticks): if $requests > 0 then ticks * 1e6 / $tck / $requests else null end;
        {
          proxy: $proxy, round: $round, requests: $requests,
          duration_s: ($duration_us / 1e6), rps: ($requests * 1e6 / $duration_us),
          p50_us: $p50, p90_us: $p90, p99_us: $p99, max_us: $max, bytes: $bytes,
          errors: {connect: $connect, read: $read, write: $write, status: $status, timeout: $timeout,
                   total: ($connect + $read + $write + $status + $timeout)},
          proxy_cpu_ticks: (if $has_proxy then $proxy_ticks else null end),
          cpu_us_per_req: (if $has_proxy then per_req($proxy_ticks) else null end),
          origin_cpu_us_per_req: per_req($origin_ticks)
        }' >>"$WORK/runs.jsonl"
    log "$(jq -r '"round \(.round) \(.proxy): \(.rps | floor) req/s, " +
        "\(if .cpu_us_per_req then (.cpu_us_per_req * 10 | round / 10 | tostring) else "-" end) us CPU/req, " +
        "p50 \(.p50_us) us, p99 \(.p99_us) us, errors \(.errors.total)"' <<<"$(tail -n 1 "$WORK/runs.jsonl")")"
}

# ---------------------------------------------------------------------------------------------
# Report

report() {
    write_report \
        --arg wrk "$(wrk -v 2>&1 | head -n 1 | cut -d' ' -f2 || true)" \
        --argjson duration "$DURATION" --argjson warmup "$WARMUP" --argjson rounds "$ROUNDS" \
        --argjson conns "$CONNECTIONS" --argjson pcpu "$PROXY_CPU" --argjson lcpu "$LOAD_CPU" \
        --arg order "${ACTIVE[*]}"
}

summary_jq() {
    cat <<'EOF'
def median: sort | if length == 0 then null
  elif length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def stats(f): [.[] | f | select(. != null)] |
  if length == 0 then null else {median: median, min: min, max: max} end;
($runs | group_by(.proxy) | map({
  key: .[0].proxy,
  value: {
    proxy: .[0].proxy, rounds: length,
    rps: stats(.rps), cpu_us_per_req: stats(.cpu_us_per_req),
    origin_cpu_us_per_req: stats(.origin_cpu_us_per_req),
    p50_us: stats(.p50_us), p99_us: stats(.p99_us),
    errors: (map(.errors.total) | add)
  }
}) | from_entries) as $by
| ($by.nginx // null) as $ng
| {
  benchmark: "h1-small",
  description: "small keep-alive HTTP/1.1 GETs of / (2-byte body), one wrk thread",
  timestamp: $stamp,
  machine: {kernel: $kernel, nproc: $nproc, cpu_model: $cpu, nginx: $nginx, wrk: $wrk,
            loadavg_before: $loadavg},
  git: {commit: $commit, dirty: $dirty},
  params: {duration_s: $duration, warmup_s: $warmup, rounds: $rounds, connections: $conns,
           wrk_threads: 1, proxy_cpu: $pcpu, load_cpu: $lcpu, origin: "nginx 1 worker, return 200 ok",
           proxies_restarted_per_round: false},
  skipped: $skipped,
  summary: [($order | split(" ") | .[]) as $p | $by[$p] | select(. != null) | . + {
    rps_vs_nginx: (if $ng and $ng.rps then .rps.median / $ng.rps.median else null end),
    cpu_vs_nginx: (if $ng and $ng.cpu_us_per_req and .cpu_us_per_req
                   then .cpu_us_per_req.median / $ng.cpu_us_per_req.median else null end)
  }],
  runs: $runs
}
EOF
}

markdown() {
    jq -r '
    def fixed(n): if n == 0 then round | tostring
      else pow(10; n) as $m | (. * $m | round) as $c | ($c % $m | tostring) as $f
        | "\($c / $m | floor).\([range(n - ($f | length))] | map("0") | join(""))\($f)" end;
    def cell(n): if . == null then "–"
      else "\(.median | fixed(n)) (\(.min | fixed(n))–\(.max | fixed(n)))" end;
    def ratio: if . == null then "–" else fixed(2) end;
    "## h1-small \(.timestamp)",
    "",
    "Small keep-alive GETs of `/` (2-byte body): wrk -t1 -c\(.params.connections), \(.params.duration_s) s per run after \(.params.warmup_s) s warm-up, \(.params.rounds) interleaved round(s), median (min–max) over rounds. Proxies pinned to CPU \(.params.proxy_cpu), one worker each, kept running across rounds; origin (nginx, 1 worker) and wrk pinned to CPU \(.params.load_cpu). CPU/req: utime+stime of all the proxy'"'"'s processes per completed request.",
    "",
    "Machine: Linux \(.machine.kernel), \(.machine.nproc) CPUs (\(.machine.cpu_model)), load average \(.machine.loadavg_before) before the rounds; nginx \(.machine.nginx); wrk \(.machine.wrk); commit \(.git.commit)\(if .git.dirty then " (dirty tree)" else "" end).",
    "",
    "| proxy | req/s | µs CPU/req | p50 µs | p99 µs | errors | req/s vs nginx | CPU/req vs nginx | origin µs CPU/req |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.summary[] | "| \(.proxy) | \(.rps | cell(0)) | \(.cpu_us_per_req | cell(1)) | \(.p50_us | cell(0)) | \(.p99_us | cell(0)) | \(.errors) | \(.rps_vs_nginx | ratio) | \(.cpu_vs_nginx | ratio) | \(.origin_cpu_us_per_req | cell(1)) |"),
    (if (.skipped | length) > 0 then "", "Skipped: " + ([.skipped[] | "\(.proxy) (\(.reason))"] | join("; ")) else empty end)
    ' "$1"
}

main "$@"
