#!/usr/bin/env bash
# tls-h2: TLS termination through the gateway, nginx and HAProxy, side by side in one run:
#   1. full TLS 1.3 handshakes, one connection per request (openssl s_time -new);
#   2. HTTP/2 over TLS with many streams (h2load -c 16 -m 32);
#   3. the same load over cleartext HTTP/2 with prior knowledge (h2c, to a plain listener that
#      speaks only HTTP/2): what HTTP/2 costs each proxy without TLS;
#   4. memory per idle keep-alive connection, TLS and plain (tls-idle.py opens IDLE_CONNECTIONS,
#      makes one request on each and holds them open).
#
#   loadtests/bench/tls-h2.sh
#   SMOKE=1 PROXIES="gateway-uring nginx" loadtests/bench/tls-h2.sh   # one short round
#
# Environment (defaults in brackets):
#   DURATION [10]          seconds of each measured handshake, h2 and h2c run
#   WARMUP [2]             seconds of the unmeasured run before each of them
#   ROUNDS [3]             interleaved rounds: in each, every proxy once per test, in a balanced
#                          order (lib.sh `in_round_order`: every proxy in every place equally often
#                          over N rounds, N proxies; 2N when N is odd)
#   SMOKE [0]              1: one short round (defaults ROUNDS=1, DURATION=3, WARMUP=1,
#                          IDLE_CONNECTIONS=500), for a quick check that everything works
#   PROXIES ["gateway-uring gateway-epoll nginx haproxy"]; also gateway-baseline
#                          (BASELINE_GATEWAY_BIN, io_uring: another build of the gateway, e.g.
#                          an older commit, measured in the same run) and gateway-baseline-epoll
#                          (the same build on the epoll driver)
#   HANDSHAKE_CLIENTS [8]  parallel `openssl s_time -new` processes
#   H2_CONNECTIONS [16]    h2load connections (-c), h2 and h2c
#   H2_STREAMS [32]        h2load concurrent streams per connection (-m), h2 and h2c
#   IDLE_CONNECTIONS [10000] idle connections held open for the memory tests
#   TESTS ["handshake h2 h2c idle idle_plain"] the tests to run (h2c: cleartext HTTP/2 with prior
#                          knowledge; idle: TLS, idle_plain: plain TCP); e.g. TESTS=idle_plain
#                          for the memory per idle plain connection alone. Without h2c, the
#                          proxies get no h2c listener (their configs are as before the h2c test)
#   PROXY_CPU [0]          CPU the proxies are pinned to
#   LOAD_CPU [1]           CPU the origin and the load generators share
#   SKIP_BUILD [0]         1: do not build the gateway, use GATEWAY_BIN as it is
#   GATEWAY_BIN [target/release/gateway of this repository]
#   RESULTS_DIR [loadtests/results]
#   KEEP_WORK [0]          1: keep the temporary directory (certificates, configs, logs, raw output)
#   COUNT [1]              count each proxy's system calls and io_uring submissions per request
#                          in the h2 and h2c warm-up runs (perf tracepoints; skipped without perf)
#   PROFILE [0]            1: also sample each proxy with `perf record -g` during round 1's h2
#                          and h2c warm-up runs; where its CPU went goes to <report>-profiles.md
#
# The origin is nginx (1 worker, `return 200 "ok"`, plain HTTP/1.1), as in h1-small. Every proxy
# terminates TLS 1.2 and 1.3 with the same ECDSA P-256 certificate (made here by openssl, signed
# by a throwaway CA), offers ALPN h2 and http/1.1, has one worker/thread, no access log, and
# keeps upstream connections alive. With h2c in TESTS, each also listens on a plain port for
# h2c with prior knowledge (gateway: a listener with protocols = ["h2"] and no TLS; nginx:
# `listen ... http2` without ssl; HAProxy: `bind ... proto h2`), checked with curl
# --http2-prior-knowledge before measuring. The proxies for tests 1 to 3 are started once and
# kept running across rounds; test 4 starts a fresh instance per run (no memory left over from
# the load tests). Proxy CPU: utime+stime (+cutime+cstime) of all its processes from
# /proc/PID/stat before and after each measured run; memory: Pss (and VmRSS) summed over its
# processes, read once it has settled (see measure_idle). The HTTP/2 runs (h2 and h2c) also
# record the origin's CPU time, and the proxy's over it (`cpu_per_origin_cpu` in the JSON, as in
# h1-small.sh): for A/Bs of two gateway builds
# (gateway-baseline and gateway-baseline-epoll), it moves less between rounds than the CPU per
# request does (on 2 December 2026, h2: 11-12% from round to round against 26-30%; h1-small's
# moves 1-5%).
#
# Writes loadtests/results/tls-h2-<UTC timestamp>.{json,md} and prints the table.

set -euo pipefail

SMOKE=${SMOKE:-0}
if [[ $SMOKE == 1 ]]; then
    ROUNDS=${ROUNDS:-1} DURATION=${DURATION:-3} WARMUP=${WARMUP:-1} IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-500}
fi
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
PROXIES=${PROXIES:-"gateway-uring gateway-epoll nginx haproxy"}
HANDSHAKE_CLIENTS=${HANDSHAKE_CLIENTS:-8}
H2_CONNECTIONS=${H2_CONNECTIONS:-16}
H2_STREAMS=${H2_STREAMS:-32}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-10000}
TESTS=${TESTS:-"handshake h2 h2c idle idle_plain"}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}

# Shared with the other benchmarks: log/die, cleanup on exit, tools, fd limit, run lock, ports,
# pinned processes, CPU and memory accounting, nginx config parts, test certificates,
# write_report. bench_init sets ROOT, RESULTS_DIR, STAMP, WORK.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init tls-h2

GATEWAY_BIN=${GATEWAY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/gateway}
IDLE_CLIENT=$SCRIPT_DIR/tls-idle.py
REPORT_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/bench-report
PKI=$WORK/pki
declare -A PROXY_PID=()    # proxy name -> PID of its (main) process, for tests 1 to 3
declare -A PROXY_PORT=()   # proxy name -> its TLS port
declare -A PROXY_H2C_PORT=() # proxy name -> its h2c (prior knowledge) port, for test 3
ACTIVE=()                  # proxies that started and passed the TLS (and h2c) checks
SKIPPED_JSON=()            # {"proxy":..,"reason":..}
GATEWAY_SKIP=""            # why the gateway cannot run (build failed, no binary)
SKIP_REASON=""             # set by start_proxy when it returns 1
HAPROXY=""
ORIGIN_PID=""
ORIGIN_PORT=""
PLAIN_PORT=""              # set by start_proxy: the proxy's plain-HTTP listener (idle test)
H2C_PORT=""                # set by start_proxy: the proxy's h2c listener, empty without h2c
LOADAVG=""

main() {
    check_params
    install_tools nginx haproxy h2load:nghttp2-client openssl python3
    HAPROXY=$(sbin_path haproxy)
    check_cpus
    raise_fd_limit
    (($(ulimit -n) >= IDLE_CONNECTIONS + 1024)) ||
        die "file descriptor limit $(ulimit -n) is too low for IDLE_CONNECTIONS=$IDLE_CONNECTIONS (needs $((IDLE_CONNECTIONS + 1024)))"
    # HAProxy reserves two descriptors per connection of its maxconn (IDLE_CONNECTIONS + 512
    # here) and refuses to start beyond the limit; every proxy gets the same count, so lower it
    # for all when HAProxy is measured and the limit cannot be raised (no CAP_SYS_RESOURCE).
    local fit=$((($(ulimit -n) - 64) / 2 - 512))
    if [[ " $PROXIES " == *" haproxy "* ]] && ((IDLE_CONNECTIONS > fit)); then
        log "IDLE_CONNECTIONS $IDLE_CONNECTIONS -> $fit for every proxy: HAProxy needs 2 descriptors per connection and the limit is $(ulimit -n)"
        IDLE_CONNECTIONS=$fit
    fi
    take_lock
    build_gateway
    make_test_pki "$PKI"
    start_nginx_origin
    start_proxies
    ((${#ACTIVE[@]} > 0)) || die "nothing to measure"
    run_rounds
    report
}

# ---------------------------------------------------------------------------------------------
# Setup

check_params() {
    local v
    whole_numbers SMOKE DURATION WARMUP ROUNDS HANDSHAKE_CLIENTS H2_CONNECTIONS H2_STREAMS IDLE_CONNECTIONS \
        PROXY_CPU LOAD_CPU
    ((DURATION > 0 && ROUNDS > 0 && HANDSHAKE_CLIENTS > 0 && H2_CONNECTIONS > 0 && H2_STREAMS > 0 && IDLE_CONNECTIONS > 0)) ||
        die "DURATION, ROUNDS, HANDSHAKE_CLIENTS, H2_CONNECTIONS, H2_STREAMS, IDLE_CONNECTIONS must be > 0"
    for v in $TESTS; do
        case $v in
        handshake | h2 | h2c | idle | idle_plain) ;;
        *) die "unknown test '$v' in TESTS (handshake h2 h2c idle idle_plain)" ;;
        esac
    done
    for v in $PROXIES; do
        case $v in
        gateway-uring | gateway-epoll | nginx | haproxy) ;;
        gateway-baseline | gateway-baseline-epoll) [[ -x ${BASELINE_GATEWAY_BIN:-} ]] || die "$v needs BASELINE_GATEWAY_BIN (an executable)" ;;
        gateway) die "PROXIES: 'gateway' is now gateway-uring (io_driver = io_uring) or gateway-epoll" ;;
        *) die "unknown proxy '$v' in PROXIES (gateway-uring gateway-epoll gateway-baseline gateway-baseline-epoll nginx haproxy)" ;;
        esac
    done
}

build_gateway() {
    if [[ $SKIP_BUILD == 1 ]]; then
        [[ -x $REPORT_BIN ]] || die "no $REPORT_BIN (cargo build --release -p loadtests)"
    else
        # bench-report reads h2load's and openssl s_time's output.
        (cd "$ROOT" && cargo build --release -p loadtests) >"$WORK/loadtests-build.log" 2>&1 || {
            tail -n 15 "$WORK/loadtests-build.log" >&2
            die "the release build of the load tools failed (cargo build --release -p loadtests)"
        }
    fi
    [[ " $PROXIES " == *" gateway-"* ]] || return 0
    if [[ $SKIP_BUILD == 1 ]]; then
        log "SKIP_BUILD=1: using $GATEWAY_BIN as it is"
    else
        log "building the gateway: cargo build --release -p gateway"
        if ! (cd "$ROOT" && cargo build --release -p gateway) >"$WORK/gateway-build.log" 2>&1; then
            tail -n 15 "$WORK/gateway-build.log" >&2
            GATEWAY_SKIP="the release build failed (cargo build --release -p gateway)"
        fi
    fi
    [[ -n $GATEWAY_SKIP || -x $GATEWAY_BIN ]] || GATEWAY_SKIP="no gateway binary at $GATEWAY_BIN"
    return 0
}

skip() { # PROXY REASON
    log "SKIP $1: $2"
    SKIPPED_JSON+=("$(jq -cn --arg p "$1" --arg r "$2" '{proxy: $p, reason: $r}')")
}

# ---------------------------------------------------------------------------------------------
# Processes


# The proxies for the handshake, h2 and h2c tests, kept running across rounds. With h2c in
# TESTS, a proxy whose h2c listener fails its check is skipped (stopped) like one that fails the
# TLS checks: every proxy in the report has run every test.
start_proxies() {
    local p h2c=""
    for p in $PROXIES; do
        if ! start_proxy "$p" "$WORK/$p"; then
            skip "$p" "$SKIP_REASON"
            continue
        fi
        if [[ -n $H2C_PORT ]]; then
            if ! SKIP_REASON=$(h2c_check "$H2C_PORT"); then
                log "ERROR: $p does not pass the h2c check: $SKIP_REASON"
                stop "$PID"
                skip "$p" "h2c on 127.0.0.1:$H2C_PORT: $SKIP_REASON"
                continue
            fi
            h2c=", h2c on 127.0.0.1:$H2C_PORT"
        fi
        PROXY_PID[$p]=$PID
        PROXY_PORT[$p]=$PORT
        PROXY_H2C_PORT[$p]=$H2C_PORT
        ACTIVE+=("$p")
        log "$p: TLS on 127.0.0.1:$PORT$h2c (CPU $PROXY_CPU), processes $PID $(descendants "$PID")"
    done
    log "measuring: ${ACTIVE[*]:-nothing}"
}

# start_proxy NAME DIR: writes NAME's config for fresh ports into DIR, starts it on PROXY_CPU
# and checks it over TLS; sets PID, PORT, PLAIN_PORT and H2C_PORT (empty unless TESTS has h2c).
# Returns 1 with SKIP_REASON set (and the proxy stopped) if it does not start or does not pass
# the checks.
start_proxy() {
    local name=$1 dir=$2 logfile out
    mkdir -p "$dir"
    pick_port
    PLAIN_PORT=$PORT
    H2C_PORT=""
    if wanted h2c; then
        pick_port
        H2C_PORT=$PORT
    fi
    pick_port
    case $name in
    gateway-uring | gateway-epoll | gateway-baseline | gateway-baseline-epoll)
        local bin=$GATEWAY_BIN
        if [[ $name == gateway-baseline* ]]; then
            bin=$BASELINE_GATEWAY_BIN
        elif [[ -n $GATEWAY_SKIP ]]; then
            SKIP_REASON=$GATEWAY_SKIP
            return 1
        fi
        gateway_config "$dir" "$([[ $name == *epoll ]] && echo epoll || echo io_uring)" >"$dir/proxy.conf"
        if ! out=$("$bin" check --config "$dir/proxy.conf" 2>&1); then
            log "ERROR: the gateway ($bin) rejects the listener config $dir/proxy.conf (TLS${H2C_PORT:+, h2c}):"
            printf '%s\n' "$out" | tail -n 15 >&2
            SKIP_REASON="the gateway rejects the config (gateway check): $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
            return 1
        fi
        logfile=$dir/gateway.log
        gateway_root_args "$bin"
        start_pinned "$PROXY_CPU" "$logfile" "$bin" run --config "$dir/proxy.conf" "${GATEWAY_ROOT_ARGS[@]}"
        ;;
    nginx)
        nginx_config "$dir" >"$dir/proxy.conf"
        logfile=$dir/error.log
        start_nginx "$PROXY_CPU" "$dir" "$dir/proxy.conf"
        ;;
    haproxy)
        write_haproxy_config "$PORT" $((IDLE_CONNECTIONS + 512)) \
            "ssl crt $PKI/leaf-chain-key.pem alpn h2,http/1.1" "$PLAIN_PORT" "$H2C_PORT" >"$dir/proxy.conf"
        logfile=$dir/haproxy.log
        start_pinned "$PROXY_CPU" "$logfile" "$HAPROXY" -db -f "$dir/proxy.conf"
        ;;
    esac
    if ! wait_ready "$name" "$PID" "$PORT"; then
        tail -n 15 "$logfile" "$dir/stderr.log" >&2 2>/dev/null || true
        stop "$PID"
        SKIP_REASON="did not start or did not accept on 127.0.0.1:$PORT (see its log above)"
        return 1
    fi
    if ! SKIP_REASON=$(tls_checks "$PORT"); then
        log "ERROR: $name does not pass the TLS checks: $SKIP_REASON"
        tail -n 15 "$logfile" >&2 2>/dev/null || true
        stop "$PID"
        return 1
    fi
}

# tls_checks PORT: what every proxy must do, checked with curl and openssl s_client; prints what
# failed and returns 1.
tls_checks() {
    local port=$1 url=https://127.0.0.1:$1/ got
    local curl=(curl -sS --max-time 5 --cacert "$PKI/ca.pem" -o "$WORK/check.body" -w '%{http_code} %{http_version}')
    got=$("${curl[@]}" --tlsv1.3 --http2 "$url" 2>&1) || true
    [[ $got == "200 2" && $(<"$WORK/check.body") == ok ]] || {
        echo "TLS 1.3 + ALPN h2 GET / (verifying the certificate): expected '200 2' and body ok, got '$got'"
        return 1
    }
    got=$("${curl[@]}" --tlsv1.2 --tls-max 1.2 --http1.1 "$url" 2>&1) || true
    [[ $got == "200 1.1" && $(<"$WORK/check.body") == ok ]] || {
        echo "TLS 1.2 + ALPN http/1.1 GET /: expected '200 1.1' and body ok, got '$got'"
        return 1
    }
    # What each connection of the handshake test sends (openssl s_time -www /).
    got=$(printf 'GET / HTTP/1.0\r\n\r\n' | timeout 5 openssl s_client -quiet -tls1_3 -CAfile "$PKI/ca.pem" \
        -verify_return_error -connect "127.0.0.1:$port" 2>/dev/null | head -n 1 | tr -d '\r') || true
    [[ $got == "HTTP/1."?" 200 "* ]] || {
        echo "TLS 1.3 'GET / HTTP/1.0' without Host (as openssl s_time sends it): expected a 200, got '$got'"
        return 1
    }
}

# h2c_check PORT: the proxy's h2c listener answers `GET /` over cleartext HTTP/2 with prior
# knowledge (what h2load sends to an http:// URL); prints what failed and returns 1.
h2c_check() {
    local got
    got=$(curl -sS --max-time 5 --http2-prior-knowledge -o "$WORK/check.body" -w '%{http_code} %{http_version}' \
        "http://127.0.0.1:$1/" 2>&1) || true
    [[ $got == "200 2" && $(<"$WORK/check.body") == ok ]] || {
        echo "h2c with prior knowledge GET / (curl --http2-prior-knowledge): expected '200 2' and body ok, got '$got'"
        return 1
    }
}

# ---------------------------------------------------------------------------------------------
# Proxy configs: TLS 1.2 + 1.3, the same certificate, ALPN h2 + http/1.1, one worker, no access
# log, upstream keep-alive to the origin over plain HTTP/1.1; a plain HTTP/1.1 listener (idle
# test) and, when H2C_PORT is set, a plain h2c (prior knowledge) one. Each reads PORT,
# PLAIN_PORT, H2C_PORT and ORIGIN_PORT.

gateway_config() { # DIR DRIVER
    cat <<EOF
[server]
workers = 1
io_driver = "$2"
admin = false
log_level = "warn"

[server.limits]
max_connections_per_worker = $((IDLE_CONNECTIONS + 1024))

[server.timeouts]
header_read = "120s"
idle = "120s"

[[listeners]]
name = "plain"
address = "127.0.0.1:$PLAIN_PORT"
$([[ -z $H2C_PORT ]] || printf '\n# No TLS: h2 is cleartext HTTP/2 with prior knowledge.\n[[listeners]]\nname = "h2c"\naddress = "127.0.0.1:%s"\nprotocols = ["h2"]\n' "$H2C_PORT")

[[listeners]]
name = "bench"
address = "127.0.0.1:$PORT"
protocols = ["h2", "http/1.1"]

[listeners.tls]
certificates = [{ cert = "$PKI/leaf-chain.pem", key = "$PKI/leaf.key" }]

[[routes]]
name = "all"
match = { path_prefix = "/" }
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$ORIGIN_PORT"]
EOF
}

nginx_config() { # DIR
    local dir=$1
    write_nginx_common "$dir" $((IDLE_CONNECTIONS + 1024)) $((2 * IDLE_CONNECTIONS + 2048))
    echo "http {"
    write_nginx_http_common "$dir"
    cat <<EOF
    upstream origin {
        server 127.0.0.1:$ORIGIN_PORT;
        keepalive 1024;
        keepalive_requests 10000000;
    }
    server {
        listen 127.0.0.1:$PORT ssl http2 backlog=4096;
        listen 127.0.0.1:$PLAIN_PORT backlog=4096;
$([[ -z $H2C_PORT ]] || echo "        listen 127.0.0.1:$H2C_PORT http2 backlog=4096;")
        client_header_timeout 120s;
        ssl_certificate $PKI/leaf-chain.pem;
        ssl_certificate_key $PKI/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

# ---------------------------------------------------------------------------------------------
# Runs

run_rounds() {
    local round p
    : >"$WORK/runs.jsonl"
    LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
    log "load average before the rounds: $LOADAVG"
    local order
    for ((round = 1; round <= ROUNDS; round++)); do
        order=$(in_round_order "$round" "${ACTIVE[@]}")
        for p in $order; do
            if wanted handshake; then measure_handshakes "$p" "$round"; fi
        done
        for p in $order; do
            if wanted h2; then measure_h2 "$p" "$round"; fi
        done
        for p in $order; do
            if wanted h2c; then measure_h2c "$p" "$round"; fi
        done
        for p in $order; do
            if wanted idle; then measure_idle "$p" "$round" tls; fi
            if wanted idle_plain; then measure_idle "$p" "$round" plain; fi
        done
    done
}

wanted() { # TEST: whether TESTS names it
    [[ " $TESTS " == *" $1 "* ]]
}

proxy_pids() { # NAME: its processes, main first
    echo "${PROXY_PID[$1]} $(descendants "${PROXY_PID[$1]}")"
}

# record JSON: appends a run to runs.jsonl and logs it.
record() {
    echo "$1" >>"$WORK/runs.jsonl"
    log "$(jq -r 'def r(n): if . == null then "-" else pow(10; n) as $m | . * $m | round / $m end;
        "round \(.round) \(.test) \(.proxy): " +
        if .test == "handshake" then
          "\(.per_s | floor) handshakes/s, \(.cpu_us_per_op | r(1)) us CPU/handshake, \(.bytes_per_conn) bytes/conn"
        elif .test == "h2" or .test == "h2c" then
          "\(.per_s | floor) req/s, \(.cpu_us_per_op | r(1)) us CPU/req, \(.cpu_per_origin_cpu | r(2)) x the origin'"'"'s CPU, \(.failed) failed"
        else "\(.opened) idle connections: \(.pss_kib_per_conn | r(2)) KiB Pss, \(.rss_kib_per_conn | r(2)) KiB RSS each (\(.sockets_added) sockets added)"
        end' <<<"$1")"
}

# run_stime PORT SECONDS PREFIX: HANDSHAKE_CLIENTS `openssl s_time -new` at once on LOAD_CPU,
# output in PREFIX.N; returns 1 if any failed. Each of them connects, makes a full TLS 1.3
# handshake (s_time -new never offers a session to resume), sends "GET / HTTP/1.0", reads the
# answer to the end and closes, over and over, for SECONDS.
run_stime() {
    local port=$1 seconds=$2 prefix=$3 i pids=() failed=0
    for ((i = 1; i <= HANDSHAKE_CLIENTS; i++)); do
        start_pinned "$LOAD_CPU" "$prefix.$i" openssl s_time -connect "127.0.0.1:$port" -new -tls1_3 -www / -time "$seconds"
        pids+=("$PID")
    done
    for i in "${pids[@]}"; do
        reap "$i"
        [[ $STATUS == 0 ]] || failed=1
    done
    return "$failed"
}

measure_handshakes() { # NAME ROUND
    local name=$1 round=$2 port=${PROXY_PORT[$1]} out=$WORK/stime-$1-$2 pids c0 c1 t0 t1
    read -r -a pids <<<"$(proxy_pids "$name")"
    ((WARMUP > 0)) && { run_stime "$port" "$WARMUP" "$WORK/stime-warmup" || true; }
    c0=$(cpu_ticks "${pids[@]}")
    t0=$(date +%s%N)
    if ! run_stime "$port" "$DURATION" "$out"; then
        tail -n 3 "$out".* >&2
        log "round $round handshake $name: an openssl s_time failed, run not recorded"
        return 0
    fi
    t1=$(date +%s%N)
    c1=$(cpu_ticks "${pids[@]}")
    # bench-report parses each client's output (loadtests/src/suite/stime.rs, unit-tested).
    local conns bytes i
    for ((i = 1; i <= HANDSHAKE_CLIENTS; i++)); do
        "$REPORT_BIN" parse stime "$out.$i" || {
            log "round $round handshake $name: cannot read $out.$i" >&2
            return 0
        }
    done >"$out.jsonl"
    read -r conns bytes < <(jq -rs 'map(.new // {connections: 0, bytes_read: 0})
        | (map(.connections) | add) as $n | "\($n) \(if $n > 0 then (map(.bytes_read) | add) / $n | floor else 0 end)"' \
        "$out.jsonl")
    record "$(jq -cn --arg proxy "$name" --argjson round "$round" --argjson n "$conns" --argjson bytes "$bytes" \
        --argjson ns "$((t1 - t0))" --argjson ticks "$((c1 - c0))" --argjson tck "$CLK_TCK" '
        {test: "handshake", proxy: $proxy, round: $round, handshakes: $n, seconds: ($ns / 1e9),
         per_s: ($n * 1e9 / $ns), proxy_cpu_s: ($ticks / $tck),
         cpu_us_per_op: (if $n > 0 then $ticks * 1e6 / $tck / $n else null end), bytes_per_conn: $bytes}')"
}

measure_h2() { # NAME ROUND: HTTP/2 over TLS 1.3 to the TLS port
    measure_h2load "$1" "$2" h2 "https://127.0.0.1:${PROXY_PORT[$1]}/" "h2 TLSv1.3" "HTTP/2 over TLS 1.3"
}

measure_h2c() { # NAME ROUND: cleartext HTTP/2 with prior knowledge to the h2c port
    # h2load sends the HTTP/2 preface at once to an http:// URL (no Upgrade) and says "h2c".
    measure_h2load "$1" "$2" h2c "http://127.0.0.1:${PROXY_H2C_PORT[$1]}/" "h2c null" "h2c without TLS"
}

# measure_h2load NAME ROUND TEST URL EXPECTED WHAT: one h2load run of H2_CONNECTIONS x
# H2_STREAMS to URL after a warm-up, recorded as TEST if h2load's "application_protocol
# tls_protocol" (as bench-report parses them, null when absent) is EXPECTED (WHAT says it in words).
measure_h2load() {
    local name=$1 round=$2 test=$3 url=$4 expected=$5 what=$6
    local out=$WORK/h2load-$3-$1-$2.txt pids origin_pids c0 c1 o0 o1 s0 s1
    local cmd=(taskset -c "$LOAD_CPU" h2load -t 1 -c "$H2_CONNECTIONS" -m "$H2_STREAMS")
    read -r -a pids <<<"$(proxy_pids "$name")"
    # The origin answers one HTTP/1.1 request per h2 request: its CPU over the run cancels what
    # slows the whole machine between runs (as in h1-small.sh), for A/Bs of one proxy.
    read -r -a origin_pids <<<"$ORIGIN_PID $(descendants "$ORIGIN_PID")"
    local counts=null warm
    if ((WARMUP > 0)); then
        # The warm-up's system calls and io_uring operations per request (lib.sh's `counted`).
        local tag="" pids_csv
        ((round == 1)) && tag="$test: $name"
        pids_csv=$(IFS=,; echo "${pids[*]}")
        counts=$(counted "$pids_csv" profiled "$tag" "$pids_csv" warmup_h2load "$url" "${cmd[@]}")
        warm=$("$REPORT_BIN" parse h2load "$WORK/h2load-warmup.txt" 2>/dev/null | jq -r '.done // 0' 2>/dev/null || echo 0)
        if [[ $counts != null && ${warm:-0} -gt 0 ]]; then
            counts=$(jq -c --argjson r "$warm" '{syscalls: (.syscalls / $r), ring_ops: (.ring_ops / $r)}' <<<"$counts")
        else
            counts=null
        fi
    fi
    c0=$(cpu_ticks "${pids[@]}")
    s0=$(sys_ticks "${pids[@]}")
    o0=$(cpu_ticks "${origin_pids[@]}")
    if ! "${cmd[@]}" -D "$DURATION" "$url" >"$out" 2>&1; then
        tail -n 5 "$out" >&2
        log "round $round $test $name: h2load failed, run not recorded"
        return 0
    fi
    c1=$(cpu_ticks "${pids[@]}")
    s1=$(sys_ticks "${pids[@]}")
    o1=$(cpu_ticks "${origin_pids[@]}")
    # bench-report parses h2load's summary (loadtests/src/suite/h2load.rs, unit-tested).
    if ! "$REPORT_BIN" parse h2load "$out" >"$out.json" 2>"$out.err"; then
        cat "$out.err" >&2
        tail -n 12 "$out" >&2
        log "round $round $test $name: could not read h2load's summary, run not recorded"
        return 0
    fi
    if [[ $(jq -r '"\(.application_protocol) \(.tls_protocol)"' "$out.json") != "$expected" ]]; then
        grep -E '^(TLS Protocol|Application protocol)' "$out" >&2 || tail -n 5 "$out" >&2
        log "round $round $test $name: not $what, run not recorded"
        return 0
    fi
    local secs completed ok failed errored timeout
    read -r secs completed ok failed errored timeout < <(jq -r \
        '"\(.finished_in_us / 1e6) \(.done) \(.succeeded) \(.failed) \(.errored) \(.timeout)"' "$out.json")
    record "$(jq -cn --arg test "$test" --arg proxy "$name" --argjson round "$round" --argjson secs "$secs" \
        --argjson completed "$completed" --argjson ok "$ok" --argjson failed "$failed" --argjson errored "$errored" \
        --argjson timeout "$timeout" --argjson ticks "$((c1 - c0))" --argjson tck "$CLK_TCK" \
        --argjson origin_ticks "$((o1 - o0))" --argjson sys_ticks "$((s1 - s0))" --argjson counts "$counts" '
        {test: $test, proxy: $proxy, round: $round, requests: $completed, succeeded: $ok,
         failed: ($failed + $errored + $timeout), seconds: $secs, per_s: ($ok / $secs),
         proxy_cpu_s: ($ticks / $tck),
         cpu_us_per_op: (if $completed > 0 then $ticks * 1e6 / $tck / $completed else null end),
         sys_us_per_op: (if $completed > 0 then $sys_ticks * 1e6 / $tck / $completed else null end),
         origin_cpu_s: ($origin_ticks / $tck),
         cpu_per_origin_cpu: (if $origin_ticks > 0 then $ticks / $origin_ticks else null end),
         syscalls_per_op: $counts.syscalls, ring_ops_per_op: $counts.ring_ops}')"
}

# warmup_h2load URL COMMAND...: the unmeasured h2load run before a measured one.
warmup_h2load() {
    local url=$1
    shift
    "$@" -D "$WARMUP" "$url" >"$WORK/h2load-warmup.txt" 2>&1
}

# measure_idle NAME ROUND tls|plain: a fresh instance of the proxy; its Pss and RSS before and
# after IDLE_CONNECTIONS keep-alive connections (TLS 1.3 to its TLS port, or plain TCP to its
# plain port), each having made one GET / and read its answer, are held open, idle.
measure_idle() {
    local name=$1 round=$2 mode=$3 dir=$WORK/$1-idle-$3-$2 pids client i ready="" test=idle args=()
    [[ $mode == tls ]] || { test=idle_plain; args=(--plain); }
    if ! start_proxy "$name" "$dir"; then
        log "round $round $test $name: $SKIP_REASON, run not recorded"
        return 0
    fi
    local proxy=$PID port=$PORT
    [[ $mode == tls ]] || port=$PLAIN_PORT
    sleep 0.5
    read -r -a pids <<<"$proxy $(descendants "$proxy")"
    local pss0 rss0 fd0 pss1 rss1 fd1
    pss0=$(pss_kb "${pids[@]}")
    rss0=$(status_kb VmRSS "${pids[@]}")
    fd0=$(socket_fds "${pids[@]}")
    start_pinned "$LOAD_CPU" "$dir/idle-client.txt" python3 "$IDLE_CLIENT" --port "$port" --count "$IDLE_CONNECTIONS" \
        --request "${args[@]}"
    client=$PID
    # At least 20 connections/s (a slow client on a busy machine does about 500), then give up.
    for ((i = 0; i < 10 * (IDLE_CONNECTIONS / 20 + 10); i++)); do
        ready=$(grep -m1 '^READY ' "$dir/idle-client.txt" || true)
        [[ -n $ready ]] && break
        alive "$client" || break
        sleep 0.1
    done
    if [[ -z $ready ]] || ! alive "$client"; then
        tail -n 5 "$dir/idle-client.txt" >&2
        stop "$client" "$proxy"
        log "round $round $test $name: the idle client did not open its connections, run not recorded"
        return 0
    fi
    sleep 1 # let the proxy finish with the last handshakes (session tickets)
    # The memory of holding the connections, not of opening them: what the burst of opening
    # freed may stay resident until the proxy's allocator purges it (mimalloc, the gateway's,
    # purges a page a second after it empties). Read until the Pss has settled: two reads a
    # second apart within 1% of what the connections added (or 64 KiB), 8 s at most.
    local pss_1s prev change
    pss1=$(pss_kb "${pids[@]}")
    pss_1s=$pss1
    for ((i = 0; i < 8; i++)); do
        prev=$pss1
        sleep 1
        pss1=$(pss_kb "${pids[@]}")
        change=$((prev > pss1 ? prev - pss1 : pss1 - prev))
        ((change * 100 <= pss1 - pss0 || change <= 64)) && break
    done
    rss1=$(status_kb VmRSS "${pids[@]}")
    fd1=$(socket_fds "${pids[@]}")
    stop "$client" "$proxy"
    local opened=${ready#*opened=}
    opened=${opened%% *}
    record "$(jq -cn --arg proxy "$name" --argjson round "$round" --argjson opened "$opened" --arg test "$test" \
        --argjson pss0 "$pss0" --argjson pss1 "$pss1" --argjson rss0 "$rss0" --argjson rss1 "$rss1" \
        --argjson fd0 "$fd0" --argjson fd1 "$fd1" --argjson pss_1s "$pss_1s" '
        {test: $test, proxy: $proxy, round: $round, opened: $opened,
         pss_kb_before: $pss0, pss_kb_after: $pss1, rss_kb_before: $rss0, rss_kb_after: $rss1,
         pss_kb_after_1s: $pss_1s,
         sockets_added: ($fd1 - $fd0),
         pss_kib_per_conn: (if $opened > 0 then ($pss1 - $pss0) / $opened else null end),
         pss_kib_per_conn_1s: (if $opened > 0 then ($pss_1s - $pss0) / $opened else null end),
         rss_kib_per_conn: (if $opened > 0 then ($rss1 - $rss0) / $opened else null end)}')"
}

# ---------------------------------------------------------------------------------------------
# Report

report() {
    write_report \
        --arg haproxy "$("$HAPROXY" -v 2>&1 | head -n 1 | awk '{print $3}')" \
        --arg h2load "$(h2load --version 2>&1 | head -n 1 | awk '{print $2}')" \
        --arg openssl "$(openssl version | awk '{print $2}')" \
        --arg python "$(python3 -c 'import ssl, sys; print(sys.version.split()[0], ssl.OPENSSL_VERSION)')" \
        --argjson duration "$DURATION" --argjson warmup "$WARMUP" --argjson rounds "$ROUNDS" \
        --argjson smoke "$SMOKE" --argjson hs_clients "$HANDSHAKE_CLIENTS" \
        --argjson h2c "$H2_CONNECTIONS" --argjson h2m "$H2_STREAMS" --argjson idle "$IDLE_CONNECTIONS" \
        --argjson pcpu "$PROXY_CPU" --argjson lcpu "$LOAD_CPU" --arg order "${ACTIVE[*]}" \
        --arg gateway_bin "$GATEWAY_BIN" \
        --arg cmd_handshake "$HANDSHAKE_CLIENTS x taskset -c $LOAD_CPU openssl s_time -connect 127.0.0.1:PORT -new -tls1_3 -www / -time $DURATION" \
        --arg cmd_h2 "taskset -c $LOAD_CPU h2load -t 1 -c $H2_CONNECTIONS -m $H2_STREAMS -D $DURATION https://127.0.0.1:PORT/" \
        --arg cmd_h2c "taskset -c $LOAD_CPU h2load -t 1 -c $H2_CONNECTIONS -m $H2_STREAMS -D $DURATION http://127.0.0.1:H2C_PORT/" \
        --arg cmd_idle "taskset -c $LOAD_CPU python3 loadtests/bench/tls-idle.py --port PORT --count $IDLE_CONNECTIONS --request [--plain]"
}

summary_jq() {
    cat <<'EOF'
def median: sort | if length == 0 then null
  elif length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def stats(f): [.[] | f | select(. != null)] |
  if length == 0 then null else {median: median, min: min, max: max} end;
def of(test): map(select(.test == test));
($runs | group_by(.proxy) | map({
  key: .[0].proxy,
  value: {
    proxy: .[0].proxy,
    handshake: (of("handshake") | {runs: length, per_s: stats(.per_s), cpu_us: stats(.cpu_us_per_op),
                                   bytes_per_conn: stats(.bytes_per_conn)}),
    h2: (of("h2") | {runs: length, per_s: stats(.per_s), cpu_us: stats(.cpu_us_per_op), sys_us: stats(.sys_us_per_op),
                     cpu_per_origin_cpu: stats(.cpu_per_origin_cpu),
                     syscalls: stats(.syscalls_per_op), ring_ops: stats(.ring_ops_per_op),
                     failed: (map(.failed) | add // 0)}),
    h2c: (of("h2c") | {runs: length, per_s: stats(.per_s), cpu_us: stats(.cpu_us_per_op), sys_us: stats(.sys_us_per_op),
                       cpu_per_origin_cpu: stats(.cpu_per_origin_cpu),
                       syscalls: stats(.syscalls_per_op), ring_ops: stats(.ring_ops_per_op),
                       failed: (map(.failed) | add // 0)}),
    idle: (of("idle") | {runs: length, pss_kib: stats(.pss_kib_per_conn), rss_kib: stats(.rss_kib_per_conn),
                         opened: stats(.opened), sockets_added: stats(.sockets_added)}),
    idle_plain: (of("idle_plain") | {runs: length, pss_kib: stats(.pss_kib_per_conn),
                         rss_kib: stats(.rss_kib_per_conn), opened: stats(.opened),
                         sockets_added: stats(.sockets_added)})
  }
}) | from_entries) as $by
| ($by.nginx // null) as $ng
| def vs(f): if $ng and ($ng | f) and f then (f / ($ng | f)) else null end;
{
  benchmark: "tls-h2",
  description: "TLS termination: full TLS 1.3 handshakes, HTTP/2 over TLS with many streams (and the same over h2c, without TLS), memory per idle TLS connection",
  timestamp: $stamp,
  machine: {kernel: $kernel, nproc: $nproc, cpu_model: $cpu, nginx: $nginx, haproxy: $haproxy,
            h2load: $h2load, openssl: $openssl, python: $python, loadavg_before: $loadavg},
  git: {commit: $commit, dirty: $dirty},
  params: {duration_s: $duration, warmup_s: $warmup, rounds: $rounds, smoke: ($smoke == 1),
           handshake_clients: $hs_clients, h2_connections: $h2c, h2_streams: $h2m,
           idle_connections: $idle, proxy_cpu: $pcpu, load_cpu: $lcpu, gateway_bin: $gateway_bin,
           origin: "nginx 1 worker, return 200 ok",
           certificate: "ECDSA P-256 leaf signed by a throwaway CA, no intermediate",
           commands: {handshake: $cmd_handshake, h2: $cmd_h2, h2c: $cmd_h2c, idle: $cmd_idle}},
  skipped: $skipped,
  summary: [($order | split(" ") | .[]) as $p | $by[$p] | select(. != null) | . + {
    vs_nginx: {handshake_cpu: vs(.handshake.cpu_us.median), h2_cpu: vs(.h2.cpu_us.median),
               h2c_cpu: vs(.h2c.cpu_us.median),
               idle_pss: vs(.idle.pss_kib.median), idle_plain_pss: vs(.idle_plain.pss_kib.median)}
  }],
  runs: $runs
}
EOF
}

markdown() {
    jq -r '
    def fixed(n): if . == null then "–" elif . < 0 then "-" + (-. | fixed(n)) elif n == 0 then round | tostring
      else pow(10; n) as $m | (. * $m | round) as $c | ($c % $m | tostring) as $f
        | "\($c / $m | floor).\([range(n - ($f | length))] | map("0") | join(""))\($f)" end;
    def cell(n): if . == null then "–"
      elif .min == .max then (.median | fixed(n))
      else "\(.median | fixed(n)) (\(.min | fixed(n))–\(.max | fixed(n)))" end;
    def ratio: if . == null then "–" else fixed(2) end;
    .params as $p |
    "## tls-h2 \(.timestamp)\(if $p.smoke then " (SMOKE=1: a quick check, not a measurement)" else "" end)",
    "",
    "TLS termination, gateway vs nginx vs HAProxy: TLS 1.2 + 1.3, ALPN h2 + http/1.1, \($p.certificate), one worker each pinned to CPU \($p.proxy_cpu), no access log, upstream keep-alive to the origin (\($p.origin), plain HTTP/1.1) on CPU \($p.load_cpu) with the load generators. \($p.rounds) interleaved round(s) (in a balanced order: every proxy in every place of a round equally often over N rounds, 2N for an odd N) of \($p.duration_s) s per measured run after \($p.warmup_s) s warm-up; median (min–max) over rounds. CPU: utime+stime of all the proxy'"'"'s processes per completed handshake or request. Memory: Pss (and RSS) summed over the proxy'"'"'s processes, a fresh instance per run, before and after \($p.idle_connections) idle connections (read once settled: every second from 1 s after the last one until two reads agree within 1% of what the connections added or 64 KiB, 8 s at most).",
    "",
    "- handshakes: `\($p.commands.handshake)` — one TCP connection, one full TLS 1.3 handshake (no resumption: `-new`), one `GET / HTTP/1.0` proxied to the origin, close;",
    "- HTTP/2: `\($p.commands.h2)`;",
    "- h2c: `\($p.commands.h2c // "–")` — the same load over cleartext HTTP/2 with prior knowledge, to the proxy'"'"'s h2c listener (no TLS);",
    "- idle: `\($p.commands.idle)` — TLS 1.3 handshake with ALPN http/1.1 (or plain TCP with `--plain`, to the proxy'"'"'s plain listener), one `GET /` and its answer, then nothing: keep-alive connections at rest.",
    "",
    "Machine: Linux \(.machine.kernel), \(.machine.nproc) CPUs (\(.machine.cpu_model)), load average \(.machine.loadavg_before) before the rounds; nginx \(.machine.nginx); HAProxy \(.machine.haproxy); h2load \(.machine.h2load); OpenSSL \(.machine.openssl); Python \(.machine.python); commit \(.git.commit)\(if .git.dirty then " (dirty tree)" else "" end).",
    "",
    "| proxy | handshakes/s | µs CPU/handshake | h2 req/s | µs CPU/h2 req | of which kernel | h2 failed | h2c req/s | µs CPU/h2c req | of which kernel | h2c failed | idle TLS KiB/conn (Pss) | idle TLS KiB/conn (RSS) | idle plain KiB/conn (Pss) | idle plain KiB/conn (RSS) | CPU/handshake vs nginx | CPU/h2 req vs nginx | CPU/h2c req vs nginx | idle TLS Pss vs nginx | idle plain Pss vs nginx |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (.summary[] | "| \(.proxy) | \(.handshake.per_s | cell(0)) | \(.handshake.cpu_us | cell(0)) | \(.h2.per_s | cell(0)) | \(.h2.cpu_us | cell(1)) | \(.h2.sys_us | cell(1)) | \(.h2.failed) | \(.h2c.per_s | cell(0)) | \(.h2c.cpu_us | cell(1)) | \(.h2c.sys_us | cell(1)) | \(.h2c.failed // "–") | \(.idle.pss_kib | cell(2)) | \(.idle.rss_kib | cell(2)) | \(.idle_plain.pss_kib | cell(2)) | \(.idle_plain.rss_kib | cell(2)) | \(.vs_nginx.handshake_cpu | ratio) | \(.vs_nginx.h2_cpu | ratio) | \(.vs_nginx.h2c_cpu | ratio) | \(.vs_nginx.idle_pss | ratio) | \(.vs_nginx.idle_plain_pss | ratio) |"),
    "",
    "| proxy | h2 system calls/req | h2 io_uring ops/req | h2c system calls/req | h2c io_uring ops/req |",
    "| --- | --- | --- | --- | --- |",
    (.summary[] | "| \(.proxy) | \(.h2.syscalls.median | fixed(2)) | \(.h2.ring_ops.median | fixed(2)) | \(.h2c.syscalls.median | fixed(2)) | \(.h2c.ring_ops.median | fixed(2)) |"),
    "",
    "System calls entered by the proxy'"'"'s processes (perf'"'"'s `raw_syscalls:sys_enter`) and io_uring operations submitted (`io_uring:io_uring_submit_req`) per request of the warm-up run before each measured one, median over rounds (– without perf, or COUNT=0).",
    "",
    "Handshakes/s are bounded by the single load CPU (openssl s_time costs more CPU per handshake than any proxy here); h2 and h2c req/s by the proxy'"'"'s one CPU or h2load'"'"'s, whichever saturates first: **the µs CPU columns and KiB/conn compare the proxies**. Idle runs (TLS / plain): \([.summary[] | "\(.proxy) \(.idle.opened | cell(0)) / \(.idle_plain.opened | cell(0)) opened, \(.idle.sockets_added | cell(0)) / \(.idle_plain.sockets_added | cell(0)) sockets added"] | join("; ")).",
    (if (.skipped | length) > 0 then "", "Skipped: " + ([.skipped[] | "\(.proxy) (\(.reason))"] | join("; ")) else empty end)
    ' "$1"
}

main "$@"
