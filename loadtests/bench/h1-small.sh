#!/usr/bin/env bash
# h1-small: keep-alive HTTP/1.1 GETs through the gateway (io_uring and epoll drivers), nginx and
# HAProxy as reverse proxies, with a direct run (wrk straight to the origin) as the floor.
#
#   loadtests/bench/h1-small.sh                      # SCENARIO=small
#   SCENARIO=16k loadtests/bench/h1-small.sh         # 16 KiB bodies
#   SCENARIO=large loadtests/bench/h1-small.sh       # 256 KiB bodies (ORIGIN_BODY_SIZE to change)
#   SCENARIO=https loadtests/bench/h1-small.sh       # TLS 1.3 keep-alive (no direct run)
#   SCENARIO=latency loadtests/bench/h1-small.sh     # one connection, one request at a time
#   SCENARIO=openloop loadtests/bench/h1-small.sh    # constant-rate latency at fractions of peak
#   SCENARIO=vhosts loadtests/bench/h1-small.sh      # VHOSTS host routes, requests over every host
#
# Environment (defaults in brackets):
#   SCENARIO [small]   small: 2-byte bodies, 64 connections (report h1-small); 16k: 16 KiB bodies
#                      (h1-16k); large: ORIGIN_BODY_SIZE bytes, 256 KiB unless set (h1-large);
#                      https: 2-byte bodies over TLS 1.3 to the proxies (https);
#                      latency: CONNECTIONS=1 (latency); openloop: each proxy's peak with wrk,
#                      then `openloop` at FRACTIONS of that peak (openloop); vhosts: 2-byte bodies,
#                      every proxy with VHOSTS virtual hosts in front of its catch-all, wrk's
#                      requests naming each host in turn (h1-vhosts)
#   VHOSTS [2000]      SCENARIO=vhosts: host names h0.example.com ... (gateway: one route each;
#                      nginx: one server block each, a server_names hash; HAProxy: a map file
#                      looked up with `map_str`, as its manual advises for many hosts)
#   DURATION [10]      seconds of each measured wrk run
#   WARMUP [2]         seconds of the unmeasured wrk run before each measured run
#   ROUNDS [3]         interleaved rounds: every proxy once per round, in a balanced order (lib.sh
#                      `in_round_order`: every proxy in every place equally often over N rounds,
#                      N proxies; 2N when N is odd; A/Bs: a multiple of that)
#   CONNECTIONS [64]   wrk connections (one wrk thread); 1 for SCENARIO=latency
#   FRACTIONS ["0.25 0.5 0.75 0.9"]  SCENARIO=openloop: rates, as fractions of the proxy's peak
#   PROXIES ["gateway-uring gateway-epoll nginx haproxy direct"] (no direct for https); also
#                      gateway-uring-log (access log on, JSON to /dev/null) and gateway-baseline
#                      (BASELINE_GATEWAY_BIN, io_uring: another build of the gateway, e.g. an
#                      older commit, measured in the same run) and gateway-baseline-epoll (the
#                      same build on the epoll driver)
#   PROXY_CPU [0]      CPU the proxies are pinned to
#   LOAD_CPU [1]       CPU the origin and wrk share
#   SKIP_BUILD [0]     1: do not build the gateway, use GATEWAY_BIN as it is
#   GATEWAY_BIN [target/release/gateway of this repository]  the gateway-uring, gateway-epoll
#                      and gateway-uring-log build (unless SKIP_BUILD=1, this repository's
#                      gateway is built first; GATEWAY_BIN is then run as it is)
#   RESULTS_DIR [loadtests/results], RESULT_NAME [<report>-<UTC timestamp>]
#   KEEP_WORK [0]      1: keep the temporary directory (configs, logs, raw wrk output)
#   COUNT [1]          count each proxy's system calls and io_uring submissions per request
#                      during the warm-up run (perf tracepoints; skipped without perf); 0: off
#   PROFILE [0]        1: also sample each proxy with `perf record -g` during round 1's warm-up
#                      run and write where its CPU went (kernel and user shares, kernel paths,
#                      top functions) to <report>-profiles.md (lib.sh's `profiled`)
#
# The origin is nginx (1 worker, `return 200 "ok"`, or a 16 KiB static file). Every proxy has
# one worker and upstream keep-alive, and is started once and kept running across all rounds.
# The proxy's CPU time is utime+stime (+cutime+cstime) of all its processes from /proc/PID/stat,
# read right before and right after each measured run, divided by the requests completed.
#
# Writes loadtests/results/<report>-<UTC timestamp>.{json,md} and prints the table.

set -euo pipefail

SCENARIO=${SCENARIO:-small}
TLS=0
case $SCENARIO in
small) REPORT=h1-small ;;
16k)
    REPORT=h1-16k
    ORIGIN_BODY_SIZE=16384
    ;;
large)
    REPORT=h1-large
    ORIGIN_BODY_SIZE=${ORIGIN_BODY_SIZE:-262144}
    ;;
https)
    REPORT=https
    TLS=1
    ;;
latency)
    REPORT=latency
    CONNECTIONS=${CONNECTIONS:-1}
    ;;
openloop) REPORT=openloop ;;
vhosts) REPORT=h1-vhosts ;;
*)
    echo "h1-small: unknown SCENARIO '$SCENARIO' (small 16k large https latency openloop vhosts)" >&2
    exit 2
    ;;
esac
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
FRACTIONS=${FRACTIONS:-"0.25 0.5 0.75 0.9"}
VHOSTS=${VHOSTS:-2000}
if ((TLS)); then
    PROXIES=${PROXIES:-"gateway-uring gateway-epoll nginx haproxy"}
else
    PROXIES=${PROXIES:-"gateway-uring gateway-epoll nginx haproxy direct"}
fi
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}
COUNT=${COUNT:-1}

# Shared with the other benchmarks: log/die, cleanup on exit, tools, ports, pinned processes,
# CPU accounting, nginx and HAProxy config parts, the origin, test certificates, write_report.
# bench_init sets ROOT, RESULTS_DIR, STAMP, WORK.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init "$REPORT"

declare -A PROXY_PID=()    # proxy name -> PID of its (main) process
declare -A PROXY_PORT=()   # proxy name -> port wrk loads
ACTIVE=()                  # proxies that started and answered correctly
SKIPPED_JSON=()            # {"proxy":..,"reason":..} for the ones that did not
GATEWAY_BIN=${GATEWAY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/gateway}
OPENLOOP_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/openloop
REPORT_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/bench-report
HAPROXY=""
PKI=$WORK/pki
SCHEME=http
ORIGIN_PID=""
ORIGIN_PORT=""
LOADAVG=""                 # /proc/loadavg when the measured rounds start
CIPHER=""                  # SCENARIO=https: the cipher suite each proxy negotiated

main() {
    check_params
    install_tools nginx wrk haproxy openssl
    HAPROXY=$(sbin_path haproxy)
    check_cpus
    raise_fd_limit
    take_lock
    build_gateway
    if ((TLS)); then
        make_test_pki "$PKI"
        SCHEME=https CHECK_SCHEME=https CHECK_CA=$PKI/ca.pem
    fi
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
    for v in $FRACTIONS; do
        [[ $v =~ ^(0?\.[0-9]+|1(\.0*)?)$ ]] || die "FRACTIONS must be numbers in (0, 1], not '$v'"
    done
    for v in $PROXIES; do
        case $v in
        gateway-uring | gateway-epoll | gateway-uring-log | nginx | haproxy) ;;
        direct) ((!TLS)) || die "direct has no TLS (the origin is plain HTTP): drop it from PROXIES" ;;
        gateway-baseline | gateway-baseline-epoll) [[ -x ${BASELINE_GATEWAY_BIN:-} ]] || die "$v needs BASELINE_GATEWAY_BIN (an executable)" ;;
        *) die "unknown proxy '$v' in PROXIES (gateway-uring gateway-epoll gateway-uring-log gateway-baseline gateway-baseline-epoll nginx haproxy direct)" ;;
        esac
    done
    [[ $SCENARIO != openloop || $SKIP_BUILD == 0 || -x $OPENLOOP_BIN ]] ||
        die "SCENARIO=openloop needs $OPENLOOP_BIN (cargo build --release -p loadtests)"
    [[ $SKIP_BUILD == 0 || -x $REPORT_BIN ]] || die "no $REPORT_BIN (cargo build --release -p loadtests)"
}

build_gateway() {
    local bin=$GATEWAY_BIN
    if [[ $SKIP_BUILD == 1 ]]; then
        log "SKIP_BUILD=1: using $bin as it is"
    else
        # loadtests: bench-report reads wrk's output, openloop is the constant-rate generator.
        (cd "$ROOT" && cargo build --release -p loadtests) >"$WORK/loadtests-build.log" 2>&1 || {
            tail -n 15 "$WORK/loadtests-build.log" >&2
            die "the release build of the load tools failed (cargo build --release -p loadtests)"
        }
        [[ " $PROXIES " == *" gateway-"* ]] || return 0
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
        gateway-baseline-epoll) start_gateway "$p" epoll "$BASELINE_GATEWAY_BIN" ;;
        nginx) start_nginx_proxy ;;
        haproxy) start_haproxy_proxy ;;
        direct)
            PROXY_PORT[direct]=$ORIGIN_PORT
            ACTIVE+=(direct)
            ;;
        esac
    done
    log "measuring: ${ACTIVE[*]:-nothing}"
    ((TLS)) && record_ciphers
    return 0
}

# record_ciphers: the TLS 1.3 cipher suite each proxy negotiates with OpenSSL's default client
# offer (what wrk sends), into CIPHER.
record_ciphers() {
    local p c list=()
    for p in "${ACTIVE[@]}"; do
        c=$(openssl s_client -connect "127.0.0.1:${PROXY_PORT[$p]}" -tls1_3 </dev/null 2>/dev/null |
            sed -nE 's/^New, TLSv1.3, Cipher is (.*)/\1/p' | head -n 1)
        list+=("$p ${c:-unknown}")
    done
    CIPHER=$(IFS=';'; echo "${list[*]}" | sed 's/;/; /g')
    log "negotiated: $CIPHER"
}

start_gateway() { # NAME DRIVER [BINARY [EXTRA_SERVER_TOML]]
    local name=$1 driver=$2 bin=${3:-$GATEWAY_BIN} extra=${4:-} dir=$WORK/$1 tls=""
    mkdir -p "$dir"
    pick_port
    if ((TLS)); then
        tls=$(printf '%s\n' 'protocols = ["h2", "http/1.1"]' '' '[listeners.tls]' \
            "certificates = [{ cert = \"$PKI/leaf-chain.pem\", key = \"$PKI/leaf.key\" }]")
    fi
    write_gateway_proxy_conf "$PORT" "$driver" "$extra" "$tls" >"$dir/gateway.toml"
    [[ $SCENARIO != vhosts ]] || add_vhosts_gateway "$dir/gateway.toml"
    gateway_root_args "$bin"
    start_pinned "$PROXY_CPU" "$dir/gateway.log" "$bin" run --config "$dir/gateway.toml" "${GATEWAY_ROOT_ARGS[@]}"
    check_started "$name" "$PID" "$PORT" "$dir/gateway.log"
}

start_nginx_proxy() {
    local dir=$WORK/nginx tls=()
    mkdir -p "$dir"
    pick_port
    ((TLS)) && tls=(ssl "ssl_certificate $PKI/leaf-chain.pem;" "ssl_certificate_key $PKI/leaf.key;" \
        "ssl_protocols TLSv1.2 TLSv1.3;")
    write_nginx_proxy_conf "$dir" "$PORT" "${tls[@]}" >"$dir/nginx.conf"
    [[ $SCENARIO != vhosts ]] || add_vhosts_nginx "$dir/nginx.conf" "$PORT"
    start_nginx "$PROXY_CPU" "$dir" "$dir/nginx.conf"
    check_started nginx "$PID" "$PORT" "$dir/error.log"
}

start_haproxy_proxy() {
    local dir=$WORK/haproxy bind=""
    mkdir -p "$dir"
    pick_port
    ((TLS)) && bind="ssl crt $PKI/leaf-chain-key.pem alpn h2,http/1.1"
    write_haproxy_config "$PORT" 4096 "$bind" >"$dir/haproxy.cfg"
    [[ $SCENARIO != vhosts ]] || add_vhosts_haproxy "$dir/haproxy.cfg" "$dir/hosts.map"
    start_pinned "$PROXY_CPU" "$dir/haproxy.log" "$HAPROXY" -db -f "$dir/haproxy.cfg"
    check_started haproxy "$PID" "$PORT" "$dir/haproxy.log"
}

# SCENARIO=vhosts: VHOSTS virtual hosts h0.example.com ... before each proxy's catch-all, each
# proxying to the origin as the catch-all does, written the way each proxy's manual advises.

add_vhosts_gateway() { # CONFIG: a route per host, before the catch-all route (the first route)
    local i routes=$1.vhosts
    for ((i = 0; i < VHOSTS; i++)); do
        printf '[[routes]]\nname = "h%d"\nmatch = { host = "h%d.example.com" }\ncluster = "origin"\n\n' "$i" "$i"
    done >"$routes"
    awk -v f="$routes" '/^\[\[routes\]\]$/ && !done { while ((getline l < f) > 0) print l; done = 1 } { print }' \
        "$1" >"$1.new"
    mv "$1.new" "$1"
}

add_vhosts_nginx() { # CONFIG PORT: a server block per host after the default one (the first)
    local i
    {
        head -n -1 "$1"
        echo "    server_names_hash_max_size 8192;"
        echo "    server_names_hash_bucket_size 64;"
        for ((i = 0; i < VHOSTS; i++)); do
            printf '    server { listen 127.0.0.1:%s; server_name h%d.example.com; location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection ""; } }\n' "$2" "$i"
        done
        echo "}"
    } >"$1.new"
    mv "$1.new" "$1"
}

add_vhosts_haproxy() { # CONFIG MAP: the host looked up in a map of every host to its backend
    local i
    for ((i = 0; i < VHOSTS; i++)); do
        printf 'h%d.example.com origin\n' "$i"
    done >"$2"
    sed -i "s|^    default_backend origin\$|&\n    use_backend %[req.hdr(host),lower,map_str($2,origin)]|" "$1"
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
    skip "$name" "did not start or did not answer 200 and the origin's body through $SCHEME://127.0.0.1:$port (see its log above)"
}

# ---------------------------------------------------------------------------------------------
# Load

write_wrk_script() {
    if [[ $SCENARIO == vhosts ]]; then
        # Every request names the next of the VHOSTS hosts (formatted once, before the run).
        cat >"$WORK/report.lua" <<EOF
local requests, n, i = {}, $VHOSTS, 0
init = function(args)
  for k = 0, n - 1 do
    requests[k + 1] = wrk.format("GET", "/", { Host = "h" .. k .. ".example.com" })
  end
end
request = function()
  i = i % n + 1
  return requests[i]
end
EOF
    else
        : >"$WORK/report.lua"
    fi
    cat >>"$WORK/report.lua" <<'EOF'
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
        "$SCHEME://127.0.0.1:$1/" >"$3" 2>&1
}

run_rounds() {
    local round p
    : >"$WORK/runs.jsonl"
    LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
    log "load average before the rounds: $LOADAVG"
    for ((round = 1; round <= ROUNDS; round++)); do
        for p in $(in_round_order "$round" "${ACTIVE[@]}"); do
            if [[ $SCENARIO == openloop ]]; then
                measure_openloop "$p" "$round"
            else
                measure "$p" "$round"
            fi
        done
    done
}

# measure_openloop NAME ROUND: the proxy's peak (a wrk run as in measure), then the open-loop
# generator at each of FRACTIONS of that peak for DURATION s (after 1 s unrecorded at the same
# rate); appends a JSON line per fraction to runs.jsonl, with the generator's report in it.
measure_openloop() {
    local name=$1 round=$2 port=${PROXY_PORT[$1]} peak f rate out proxy_pids=() p0 p1
    measure "$name" "$round" || return 0
    peak=$(tail -n 1 "$WORK/runs.jsonl" | jq -r 'select(.test == "peak" and .proxy == "'"$name"'") | .rps')
    [[ -n $peak ]] || return 0
    if [[ $name != direct ]]; then
        read -r -a proxy_pids <<<"${PROXY_PID[$name]} $(descendants "${PROXY_PID[$name]}")"
    fi
    for f in $FRACTIONS; do
        rate=$(jq -n "$peak * $f | floor")
        out=$WORK/openloop-$name-$round-$f.json
        p0=$(cpu_ticks "${proxy_pids[@]}")
        if ! taskset -c "$LOAD_CPU" "$OPENLOOP_BIN" --target "$SCHEME://127.0.0.1:$port/" --rate "$rate" \
            --connections "$CONNECTIONS" --duration-s "$DURATION" --warmup-s 1 --out "$out" \
            2>"$out.log" || [[ ! -s $out ]]; then
            tail -n 5 "$out.log" >&2
            log "round $round $name at $f of peak: openloop failed, point not recorded"
            continue
        fi
        p1=$(cpu_ticks "${proxy_pids[@]}")
        jq -c --arg proxy "$name" --argjson round "$round" --argjson f "$f" --argjson peak "$peak" \
            --argjson ticks "$((p1 - p0))" --argjson tck "$CLK_TCK" \
            --argjson has_proxy "$([[ $name == direct ]] && echo false || echo true)" '
            {test: "openloop", proxy: $proxy, round: $round, fraction: $f, peak_rps: $peak,
             rate: .rate, achieved_rps: .achieved_rps, completed: .completed,
             p50_us: .latency_us.p50, p90_us: .latency_us.p90, p99_us: .latency_us.p99,
             p999_us: .latency_us.p999, max_us: .latency_us.max,
             errors: ([.errors[]] | add), valid: .valid, invalid_reason: .invalid_reason,
             send_lag_p99_us: .send_lag_us.p99,
             cpu_us_per_req: (if $has_proxy and .completed > 0 then $ticks * 1e6 / $tck / .completed else null end)}' \
            "$out" >>"$WORK/runs.jsonl"
        log "$(jq -r '"round \(.round) \(.proxy) at \(.fraction) of \(.peak_rps | floor) req/s: \(.achieved_rps | floor) req/s, " +
            "p50 \(.p50_us) us, p99 \(.p99_us) us, p99.9 \(.p999_us) us, errors \(.errors)" +
            (if .valid then "" else " (INVALID: \(.invalid_reason))" end)' <<<"$(tail -n 1 "$WORK/runs.jsonl")")"
    done
}

# measure NAME ROUND: warm-up, then one measured run; appends a JSON line to runs.jsonl.
measure() {
    local name=$1 round=$2 port=${PROXY_PORT[$1]} out=$WORK/wrk-$1-$2.txt
    local proxy_pids=() origin_pids=() p0 p1 o0 o1 s0 s1 kv
    if [[ $name != direct ]]; then
        read -r -a proxy_pids <<<"${PROXY_PID[$name]} $(descendants "${PROXY_PID[$name]}")"
    fi
    read -r -a origin_pids <<<"$ORIGIN_PID $(descendants "$ORIGIN_PID")"

    local counted="null" tag=""
    ((round == 1)) && tag="$SCENARIO: $name"
    if ((WARMUP > 0)); then
        counted=$(warmup_counted "$port" "$tag" "${proxy_pids[@]}")
    fi
    p0=$(cpu_ticks "${proxy_pids[@]}")
    s0=$(sys_ticks "${proxy_pids[@]}")
    o0=$(cpu_ticks "${origin_pids[@]}")
    if ! run_wrk "$port" "$DURATION" "$out" || ! grep -q '^RESULT ' "$out"; then
        cat "$out" >&2
        log "round $round $name: wrk failed, run not recorded"
        return 0
    fi
    p1=$(cpu_ticks "${proxy_pids[@]}")
    s1=$(sys_ticks "${proxy_pids[@]}")
    o1=$(cpu_ticks "${origin_pids[@]}")

    # bench-report parses wrk's output (loadtests/src/suite/wrk.rs, unit-tested); .result is
    # the RESULT line our done hook printed.
    if ! "$REPORT_BIN" parse wrk "$out" >"$out.json" 2>"$out.err" || ! jq -e '.result.requests' "$out.json" >/dev/null; then
        cat "$out.err" "$out" >&2
        log "round $round $name: cannot read wrk's output, run not recorded"
        return 0
    fi
    jq -c '.result' "$out.json" | jq -c \
        --arg proxy "$name" --argjson round "$round" \
        --argjson proxy_ticks "$((p1 - p0))" --argjson origin_ticks "$((o1 - o0))" \
        --argjson sys_ticks "$((s1 - s0))" --argjson counted "$counted" \
        --argjson has_proxy "$([[ $name == direct ]] && echo false || echo true)" \
        --argjson tck "$CLK_TCK" --arg scenario "$SCENARIO" '
        .requests as $requests | .duration_us as $duration_us | .p50_us as $p50 | .p90_us as $p90
        | .p99_us as $p99 | .max_us as $max | .bytes as $bytes | .connect as $connect | .read as $read
        | .write as $write | .status as $status | .timeout as $timeout
        | def per_req(ticks): if $requests > 0 then ticks * 1e6 / $tck / $requests else null end;
        {
          test: (if $scenario == "openloop" then "peak" else "wrk" end),
          proxy: $proxy, round: $round, requests: $requests,
          duration_s: ($duration_us / 1e6), rps: ($requests * 1e6 / $duration_us),
          p50_us: $p50, p90_us: $p90, p99_us: $p99, max_us: $max, bytes: $bytes,
          errors: {connect: $connect, read: $read, write: $write, status: $status, timeout: $timeout,
                   total: ($connect + $read + $write + $status + $timeout)},
          proxy_cpu_ticks: (if $has_proxy then $proxy_ticks else null end),
          cpu_us_per_req: (if $has_proxy then per_req($proxy_ticks) else null end),
          sys_us_per_req: (if $has_proxy then per_req($sys_ticks) else null end),
          origin_cpu_us_per_req: per_req($origin_ticks),
          cpu_per_origin_cpu: (if $has_proxy and $origin_ticks > 0 then $proxy_ticks / $origin_ticks else null end),
          syscalls_per_req: $counted.syscalls_per_req, ring_ops_per_req: $counted.ring_ops_per_req
        }' >>"$WORK/runs.jsonl"
    log "$(jq -r '"round \(.round) \(.proxy): \(.rps | floor) req/s, " +
        "\(if .cpu_us_per_req then (.cpu_us_per_req * 10 | round / 10 | tostring) else "-" end) us CPU/req, " +
        "p50 \(.p50_us) us, p99 \(.p99_us) us, errors \(.errors.total)"' <<<"$(tail -n 1 "$WORK/runs.jsonl")")"
}

# warmup_counted PORT TAG PIDS...: the warm-up run (profiled under TAG with PROFILE=1); prints
# {syscalls_per_req, ring_ops_per_req} of the proxy's processes over it (lib.sh's `counted`), or null.
warmup_counted() {
    local port=$1 tag=$2 pids counts requests
    shift 2
    pids=$(IFS=,; echo "$*")
    counts=$(counted "$pids" profiled "$tag" "$pids" run_wrk "$port" "$WARMUP" "$WORK/warmup.txt")
    requests=$(sed -n 's/^RESULT requests=\([0-9]*\) .*/\1/p' "$WORK/warmup.txt")
    if [[ $counts == null || -z $requests || $requests == 0 ]]; then
        echo null
        return 0
    fi
    jq -c --argjson r "$requests" '{syscalls_per_req: (.syscalls / $r), ring_ops_per_req: (.ring_ops / $r)}' <<<"$counts"
}

# ---------------------------------------------------------------------------------------------
# Report

report() {
    write_report \
        --arg wrk "$(wrk -v 2>&1 | head -n 1 | cut -d' ' -f2 || true)" \
        --argjson duration "$DURATION" --argjson warmup "$WARMUP" --argjson rounds "$ROUNDS" \
        --argjson conns "$CONNECTIONS" --argjson pcpu "$PROXY_CPU" --argjson lcpu "$LOAD_CPU" \
        --arg order "${ACTIVE[*]}" --arg scenario "$SCENARIO" --arg report "$REPORT" \
        --argjson body "$ORIGIN_BODY_SIZE" --argjson tls "$TLS" --arg fractions "$FRACTIONS" \
        --arg cipher "$CIPHER" --arg vhosts "$VHOSTS"
}

summary_jq() {
    cat <<'EOF'
def median: sort | if length == 0 then null
  elif length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def stats(f): [.[] | f | select(. != null)] |
  if length == 0 then null else {median: median, min: min, max: max} end;
($runs | map(select(.test != "openloop")) | group_by(.proxy) | map({
  key: .[0].proxy,
  value: {
    proxy: .[0].proxy, rounds: length,
    rps: stats(.rps), cpu_us_per_req: stats(.cpu_us_per_req), sys_us_per_req: stats(.sys_us_per_req),
    origin_cpu_us_per_req: stats(.origin_cpu_us_per_req),
    cpu_per_origin_cpu: stats(.cpu_per_origin_cpu),
    syscalls_per_req: stats(.syscalls_per_req), ring_ops_per_req: stats(.ring_ops_per_req),
    p50_us: stats(.p50_us), p99_us: stats(.p99_us),
    errors: (map(.errors.total) | add)
  }
}) | from_entries) as $by
| ($by.nginx // null) as $ng
| ($by.haproxy // null) as $hp
| def point(f): {median: (map(f) | median), min: (map(f) | min), max: (map(f) | max)};
{
  benchmark: $report,
  scenario: $scenario,
  description: ({
    "h1-small": "small keep-alive HTTP/1.1 GETs of / (2-byte body), one wrk thread",
    "h1-16k": "keep-alive HTTP/1.1 GETs of / with a 16 KiB body, one wrk thread",
    "h1-large": "keep-alive HTTP/1.1 GETs of / with a large body (params.body_bytes), one wrk thread",
    "https": "keep-alive HTTP/1.1 GETs of / (2-byte body) over TLS 1.3 to the proxy, one wrk thread",
    "latency": "one connection, one request at a time: the latency each proxy adds",
    "openloop": "latency at constant request rates, fractions of each proxy's own peak",
    "h1-vhosts": "small keep-alive HTTP/1.1 GETs of / (2-byte body) naming each of many virtual hosts in turn (params.vhosts), one wrk thread"}[$report]),
  timestamp: $stamp,
  machine: {kernel: $kernel, nproc: $nproc, cpu_model: $cpu, nginx: $nginx, wrk: $wrk,
            loadavg_before: $loadavg},
  git: {commit: $commit, dirty: $dirty},
  params: {duration_s: $duration, warmup_s: $warmup, rounds: $rounds, connections: $conns,
           wrk_threads: 1, proxy_cpu: $pcpu, load_cpu: $lcpu, body_bytes: $body, tls: ($tls == 1),
           tls_cipher: (if $tls == 1 then $cipher else null end),
           fractions: (if $scenario == "openloop" then ($fractions | split(" ") | map(tonumber)) else null end),
           vhosts: (if $scenario == "vhosts" then ($vhosts | tonumber) else null end),
           origin: (if $body == 2 then "nginx 1 worker, return 200 ok" else "nginx 1 worker, a \($body)-byte static file" end),
           proxies_restarted_per_round: false},
  skipped: $skipped,
  summary: [($order | split(" ") | .[]) as $p | $by[$p] | select(. != null) | . + {
    rps_vs_nginx: (if $ng and $ng.rps then .rps.median / $ng.rps.median else null end),
    cpu_vs_nginx: (if $ng and $ng.cpu_us_per_req and .cpu_us_per_req
                   then .cpu_us_per_req.median / $ng.cpu_us_per_req.median else null end),
    cpu_vs_haproxy: (if $hp and $hp.cpu_us_per_req and .cpu_us_per_req
                   then .cpu_us_per_req.median / $hp.cpu_us_per_req.median else null end)
  } + (if $scenario == "openloop" then
    (.proxy as $p | {peak_rps: .rps.median, points: ($runs | map(select(.test == "openloop" and .proxy == $p))
      | group_by(.fraction) | map({
          fraction: .[0].fraction, rounds: length, rate: (map(.rate) | median),
          achieved_rps: (map(.achieved_rps) | median), p50_us: (map(.p50_us) | median),
          p90_us: (map(.p90_us) | median), p99_us: (map(.p99_us) | median),
          p999_us: (map(.p999_us) | median), max_us: (map(.max_us) | max),
          errors: (map(.errors) | add), valid: (map(.valid) | all),
          invalid: [.[] | select(.valid | not) | .invalid_reason],
          cpu_us_per_req: (map(.cpu_us_per_req) | median),
          range: {p50_us: point(.p50_us), p99_us: point(.p99_us), p999_us: point(.p999_us)}}))})
    else {} end)],
  runs: $runs
}
EOF
}

markdown() {
    jq -r '
    def fixed(n): if . == null then "–" elif n == 0 then round | tostring
      else pow(10; n) as $m | (. * $m | round) as $c | ($c % $m | tostring) as $f
        | "\($c / $m | floor).\([range(n - ($f | length))] | map("0") | join(""))\($f)" end;
    def cell(n): if . == null then "–"
      elif .min == .max then (.median | fixed(n))
      else "\(.median | fixed(n)) (\(.min | fixed(n))–\(.max | fixed(n)))" end;
    def ratio: if . == null then "–" else fixed(2) end;
    .params as $p |
    "## \(.benchmark) \(.timestamp)",
    "",
    "\(.description | .[:1] | ascii_upcase)\(.description | .[1:]): \(if .benchmark == "openloop" then "the peak from " else "" end)wrk -t1 -c\($p.connections) to \(if $p.tls then "https" else "http" end)://127.0.0.1:PORT/, \($p.duration_s) s per run after \($p.warmup_s) s warm-up, \($p.rounds) interleaved round(s) (in a balanced order: every proxy in every place of a round equally often over N rounds, 2N for an odd N), median (min–max) over rounds. Proxies pinned to CPU \($p.proxy_cpu), one worker each, kept running across rounds; origin (\($p.origin)) and the load generator pinned to CPU \($p.load_cpu). CPU/req: utime+stime of all the proxy'"'"'s processes per completed request.\(if $p.tls then " TLS: the same ECDSA P-256 certificate everywhere; negotiated \($p.tls_cipher)." else "" end)",
    "",
    "Machine: Linux \(.machine.kernel), \(.machine.nproc) CPUs (\(.machine.cpu_model)), load average \(.machine.loadavg_before) before the rounds; nginx \(.machine.nginx); wrk \(.machine.wrk); commit \(.git.commit)\(if .git.dirty then " (dirty tree)" else "" end).",
    "",
    if .benchmark == "openloop" then
      "Then `openloop` (loadtests/src/openloop.rs: one thread, \($p.connections) keep-alive connections, requests scheduled at a constant rate, latency from each request'"'"'s scheduled time, so queueing behind a slow answer counts) at \($p.fractions | map(tostring) | join(", ")) of each proxy'"'"'s own peak for \($p.duration_s) s. A point is invalid when the generator itself fell behind its schedule.",
      "",
      "| proxy | peak req/s | fraction | rate | p50 µs | p90 µs | p99 µs | p99.9 µs | µs CPU/req | errors | valid |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      (.summary[] | . as $s | .points[] |
        "| \($s.proxy) | \($s.peak_rps | fixed(0)) | \(.fraction) | \(.rate | fixed(0)) | \(.range.p50_us | cell(0)) | \(.p90_us | fixed(0)) | \(.range.p99_us | cell(0)) | \(.range.p999_us | cell(0)) | \(.cpu_us_per_req | fixed(1)) | \(.errors) | \(if .valid then "yes" else "no: " + (.invalid | unique | join("; ")) end) |")
    else
      "| proxy | req/s | µs CPU/req | of which kernel µs | p50 µs | p99 µs | errors | req/s vs nginx | CPU/req vs nginx | CPU/req vs HAProxy | origin µs CPU/req | proxy CPU ÷ origin CPU | system calls/req | io_uring ops/req |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      (.summary[] | "| \(.proxy) | \(.rps | cell(0)) | \(.cpu_us_per_req | cell(1)) | \(.sys_us_per_req | cell(1)) | \(.p50_us | cell(0)) | \(.p99_us | cell(0)) | \(.errors) | \(.rps_vs_nginx | ratio) | \(.cpu_vs_nginx | ratio) | \(.cpu_vs_haproxy | ratio) | \(.origin_cpu_us_per_req | cell(1)) | \(.cpu_per_origin_cpu | cell(3)) | \(.syscalls_per_req.median | fixed(2)) | \(.ring_ops_per_req.median | fixed(2)) |"),
      "",
      "System calls/req and io_uring ops/req: entered by the proxy'"'"'s processes (perf'"'"'s `raw_syscalls:sys_enter`) and submitted to its rings (`io_uring:io_uring_submit_req`) per request of the warm-up run before each measured one, median over rounds; not counted in the measured runs, so that counting costs nothing there. – when perf was missing or not allowed.",
      "",
      "Proxy CPU ÷ origin CPU: the proxy'"'"'s CPU time over the origin'"'"'s in the same run, per round. The origin does the same work for every request of a run, so this cancels what slows the whole machine between runs (on a shared VM the CPU time per request of every process moves by 10-20% from run to run; this ratio by 1-5%): compare two builds of one proxy on one driver with it. Across proxies it also carries how each one'"'"'s batching changes the origin'"'"'s cost, so the µs columns compare proxies."
    end,
    (if (.skipped | length) > 0 then "", "Skipped: " + ([.skipped[] | "\(.proxy) (\(.reason))"] | join("; ")) else empty end)
    ' "$1"
}

main "$@"
