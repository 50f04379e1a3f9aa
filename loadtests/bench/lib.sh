# shellcheck shell=bash
# lib.sh: what the benchmark scripts in this directory share: logging, the work directory and
# cleanup, tool installation, CPU pinning, the fd limit and the run lock, ports, starting and
# stopping processes, process-tree CPU and memory accounting, nginx config fragments, test
# certificates and the report file. Sourced, not run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   bench_init NAME
#
# The sourcing script sets PROXY_CPU, LOAD_CPU and KEEP_WORK (and RESULTS_DIR, if not the
# default) before bench_init, and defines summary_jq and markdown for write_report.

# shellcheck disable=SC2034 # globals set here are read by the sourcing scripts

STARTED=()                   # PIDs the script started and has not stopped yet, in start order
declare -gA USED_PORTS=()    # ports pick_port handed out
declare -gA EXIT_STATUS=()   # PID -> exit status, for children reaped before stop()
STATUS=""                    # set by reap
PORT=""                      # set by pick_port
PID=""                       # set by start_pinned
BENCH=""                     # the benchmark's name: log prefix, work and result file names
NGINX=""
CLK_TCK=""

# bench_init NAME: sets BENCH, SCRIPT_DIR, LOADTESTS_DIR, ROOT, RESULTS_DIR, STAMP and WORK
# (a fresh temporary directory), and installs the cleanup traps.
bench_init() {
    BENCH=$1
    SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    LOADTESTS_DIR=$(dirname "$SCRIPT_DIR")
    ROOT=$(dirname "$LOADTESTS_DIR")
    RESULTS_DIR=${RESULTS_DIR:-$LOADTESTS_DIR/results}
    STAMP=$(date -u +%Y%m%dT%H%M%SZ)
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$BENCH.XXXXXX")
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

log() { printf '[%s] %s\n' "$BENCH" "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# ---------------------------------------------------------------------------------------------
# Cleanup: TERM every process still running that we started (and its children), wait up to
# 5 s, then KILL what is left.

cleanup() {
    local status=$?
    set +e
    trap - EXIT INT TERM
    stop_all
    if [[ $KEEP_WORK == 1 ]]; then
        log "work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}

# stop PID...: TERM the PIDs (which we started) and their descendants, wait up to 5 s, KILL
# the rest, reap them and forget them. PIDs already reaped are left alone (they may be reused).
stop() {
    local pid i kids pids=()
    for pid in "$@"; do
        [[ -n $pid && -z ${EXIT_STATUS[$pid]:-} ]] || continue # reaped already: not ours any more
        read -r -a kids <<<"$(descendants "$pid")"
        pids+=("$pid" "${kids[@]}")
        kill -TERM "$pid" 2>/dev/null || true
    done
    for ((i = 0; i < 50; i++)); do
        alive "${pids[@]}" || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        [[ -n ${EXIT_STATUS[$pid]:-} ]] || wait "$pid" 2>/dev/null || true
        forget "$pid"
    done
}

forget() { # PID: no longer ours to stop
    local s keep=()
    for s in "${STARTED[@]}"; do
        [[ $s == "$1" ]] || keep+=("$s")
    done
    STARTED=("${keep[@]}")
}

stop_all() { # the last started first
    local i rev=()
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
        rev+=("${STARTED[i]}")
    done
    ((${#rev[@]} == 0)) || stop "${rev[@]}"
}

# reap PID: sets STATUS to the exit status of a child that has ended (reaped once, then
# remembered). Not in a subshell: only this shell can wait for its children.
reap() {
    local pid=$1 status=0
    if [[ -z ${EXIT_STATUS[$pid]:-} ]]; then
        wait "$pid" 2>/dev/null || status=$?
        EXIT_STATUS[$pid]=$status
        forget "$pid"
    fi
    STATUS=${EXIT_STATUS[$pid]}
}

alive() {
    local pid
    for pid in "$@"; do
        kill -0 "$pid" 2>/dev/null && return 0
    done
    return 1
}

# in_round_order ROUND NAME...: the NAMEs in the order round ROUND runs them, from a Williams
# design: over N rounds (N names, N even; 2N when N is odd) every name runs in every place of a
# round equally often, and follows every other name equally often. Where a run sits in its
# round moves its figures by a few per cent on this host: whichever ran first had an edge of
# 2-10% at 512 connections (`loadtests/results/run-order-20261204.md`), and with the order only
# reversed every other round (A B C D, D C B A) the first two names of four still sat at the
# edges and in the middle, always: the same two builds gave +2.2% and -2.2% with their places
# swapped (`loadtests/results/lazy-deadlines-20261205.md`). With two names: A B, B A, ...
# A/Bs use a multiple of N rounds (2N for an odd N).
in_round_order() {
    local round=$1 i j k
    shift
    local names=("$@") n=$#
    if ((n < 2)); then
        echo "$@"
        return
    fi
    # Row i (0-based) places name (f(j) + i) mod n at j, where f = 0, 1, n-1, 2, n-2, ... (f(j)
    # is (j+1)/2 for odd j, n - j/2 for even j > 0); odd n also runs the rows reversed, in rounds
    # n+1 to 2n.
    local period=$n
    if ((n % 2)); then
        period=$((2 * n))
    fi
    i=$(((round - 1) % period))
    local row=() f
    for ((j = 0; j < n; j++)); do
        if ((j == 0)); then f=0; elif ((j % 2)); then f=$(((j + 1) / 2)); else f=$((n - j / 2)); fi
        row+=("$(((f + i) % n))")
    done
    local out=()
    if ((i >= n)); then
        for ((k = n - 1; k >= 0; k--)); do out+=("${names[row[k]]}"); done
    else
        for k in "${row[@]}"; do out+=("${names[k]}"); done
    fi
    echo "${out[@]}"
}

# ---------------------------------------------------------------------------------------------
# Setup

# whole_numbers VAR...: dies unless every VAR holds a whole number.
whole_numbers() {
    local v
    for v in "$@"; do
        [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, not '${!v}'"
    done
}

# install_tools TOOL...: installs from Debian whichever of the TOOLs (commands named like their
# packages, or COMMAND:PACKAGE as in h2load:nghttp2-client; nginx and haproxy may sit in
# /usr/sbin, off a user's PATH), taskset, curl and jq is missing; sets NGINX and CLK_TCK.
install_tools() {
    local spec tool missing=()
    for spec in "$@"; do
        tool=${spec%%:*}
        case $tool in
        nginx | haproxy) command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || missing+=("$tool") ;;
        *) command -v "$tool" >/dev/null || missing+=("${spec#*:}") ;;
        esac
    done
    command -v taskset >/dev/null || missing+=(util-linux)
    command -v curl >/dev/null || missing+=(curl)
    command -v jq >/dev/null || missing+=(jq)
    if ((${#missing[@]} > 0)); then
        ((EUID == 0)) || die "missing ${missing[*]}: run as root or: sudo apt-get install -y ${missing[*]}"
        log "installing from Debian: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    NGINX=$(sbin_path nginx)
    CLK_TCK=$(getconf CLK_TCK)
}

sbin_path() { command -v "$1" || echo "/usr/sbin/$1"; }

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT [SCHEME]: until an HTTP request to the port is answered (at most 60 s).
wait_port() {
    for _ in $(seq 1 600); do
        curl -sk -o /dev/null "${2:-http}://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    return 1
}

check_cpus() {
    local cpu
    for cpu in "$PROXY_CPU" "$LOAD_CPU"; do
        taskset -c "$cpu" true 2>/dev/null || die "cannot pin to CPU $cpu (nproc: $(nproc))"
    done
    [[ $PROXY_CPU != "$LOAD_CPU" ]] || log "warning: proxy and load share CPU $PROXY_CPU"
}

# raise_fd_limit: the soft file descriptor limit up to the hard one (many connections; HAProxy
# sizes its tables by maxconn). Children inherit it.
raise_fd_limit() {
    ((EUID != 0)) || (($(ulimit -Hn) >= 65536)) || ulimit -Hn 65536 2>/dev/null || true
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    log "file descriptor limit: $(ulimit -n)"
}

# take_lock: two benchmark runs pinned to the same CPUs distort each other: wait (at most an hour)
# until no other run holds the lock. It is released when this shell exits.
take_lock() {
    local lockfile=${TMPDIR:-/tmp}/loadtests-bench.lock
    exec 9>"$lockfile"
    if ! flock -n 9; then
        log "another benchmark run holds $lockfile: waiting for it to finish"
        flock -w 3600 9 || die "$lockfile still held after an hour"
    fi
}

# ---------------------------------------------------------------------------------------------
# Processes

# Picks a port below the ephemeral range that nothing listens on; sets PORT.
pick_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        PORT=$((20000 + RANDOM % 12000))
        [[ -z ${USED_PORTS[$PORT]:-} ]] || continue
        port_open "$PORT" && continue
        USED_PORTS[$PORT]=1
        return 0
    done
    die "found no free port"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# build_release PACKAGE...: `cargo build --release -p PACKAGE...` (its log's tail and an error
# if it fails), unless SKIP_BUILD=1: then the binaries in TARGET_DIR/release are used as they are.
build_release() {
    local pkgs=() p
    for p in "$@"; do pkgs+=(-p "$p"); done
    if [[ ${SKIP_BUILD:-0} == 1 ]]; then
        log "SKIP_BUILD=1: using the binaries in $TARGET_DIR/release as they are"
        return 0
    fi
    log "building: cargo build --release ${pkgs[*]}"
    (cd "$ROOT" && cargo build --release "${pkgs[@]}") >"$WORK/build.log" 2>&1 || {
        tail -n 15 "$WORK/build.log" >&2
        die "the release build failed"
    }
}

# start_pinned CPU LOGFILE CMD...: starts CMD in the background on CPU; sets PID.
start_pinned() {
    local cpu=$1 logfile=$2
    shift 2
    # Without the lock's descriptor (9, `take_lock`): a process that outlives the run must not
    # keep the next benchmark waiting for the lock.
    taskset -c "$cpu" "$@" >"$logfile" 2>&1 9>&- &
    PID=$!
    # PIDs wrap (pid_max is 32,768 here; a long run starts thousands of processes): a status
    # recorded for an earlier process with this PID would make `stop` skip this one.
    unset 'EXIT_STATUS[$PID]'
    STARTED+=("$PID")
}

# start_nginx CPU DIR CONFIG: nginx with its prefix, error log and stderr (DIR/stderr.log) in
# DIR, on CPU; sets PID.
start_nginx() {
    start_pinned "$1" "$2/stderr.log" "$NGINX" -p "$2" -e "$2/error.log" -c "$3"
}

# wait_ready NAME PID PORT: until PORT accepts (5 s at most) while PID lives.
wait_ready() {
    local name=$1 pid=$2 port=$3 i
    for ((i = 0; i < 100; i++)); do
        port_open "$port" && return 0
        kill -0 "$pid" 2>/dev/null || {
            log "$name exited during startup"
            return 1
        }
        sleep 0.05
    done
    log "$name did not accept on port $port within 5 s"
    return 1
}

# answers_ok PORT [PATH]: a GET of PATH (/) through it returns 200 and the origin's body: "ok",
# or ORIGIN_BODY_SIZE bytes when that is not 2. Over TLS (https, verifying the certificate
# against CHECK_CA) when CHECK_SCHEME is https.
CHECK_SCHEME=http
CHECK_CA=""
ORIGIN_BODY_SIZE=${ORIGIN_BODY_SIZE:-2}
answers_ok() {
    local code tls=()
    [[ $CHECK_SCHEME == http ]] || tls=(--cacert "$CHECK_CA")
    code=$(curl -sS --max-time 5 "${tls[@]}" -o "$WORK/check.body" -w '%{http_code}' \
        "$CHECK_SCHEME://127.0.0.1:$1${2:-/}") || return 1
    [[ $code == 200 ]] || return 1
    if ((ORIGIN_BODY_SIZE == 2)); then
        [[ $(<"$WORK/check.body") == ok ]]
    else
        [[ $(stat -c %s "$WORK/check.body") == "$ORIGIN_BODY_SIZE" ]]
    fi
}

# descendants PID: every descendant of PID (nginx workers), from the ppid field of /proc/*/stat.
descendants() {
    local stat rest f parent pid
    local -A children=()
    for stat in /proc/[0-9]*/stat; do
        { read -r rest <"$stat"; } 2>/dev/null || continue
        pid=${rest%% *}
        rest=${rest##*) }
        read -r -a f <<<"$rest"
        parent=${f[1]}
        children[$parent]+="$pid "
    done
    local queue=("$1") found=()
    while ((${#queue[@]} > 0)); do
        parent=${queue[0]}
        queue=("${queue[@]:1}")
        for pid in ${children[$parent]:-}; do
            found+=("$pid")
            queue+=("$pid")
        done
    done
    echo "${found[*]}"
}

# stat_ticks "INDEX..." PID...: the sum of the named fields of /proc/PID/stat over the
# processes, INDEX counting from field 3 (11: utime, 12: stime, 13: cutime, 14: cstime).
stat_ticks() {
    local fields=$1 total=0 pid rest f i
    shift
    for pid in "$@"; do
        { read -r rest <"/proc/$pid/stat"; } 2>/dev/null || continue
        rest=${rest##*) }
        read -r -a f <<<"$rest" # f[0] is field 3
        for i in $fields; do
            total=$((total + f[i]))
        done
    done
    echo "$total"
}

# cpu_ticks PID...: utime+stime+cutime+cstime (fields 14-17 of /proc/PID/stat), summed.
cpu_ticks() { stat_ticks "11 12 13 14" "$@"; }

# sys_ticks PID...: the kernel's part of cpu_ticks, stime+cstime (fields 15 and 17), summed.
sys_ticks() { stat_ticks "12 14" "$@"; }

# steal_ticks CPU: the time the hypervisor ran something else while CPU had work (the steal
# column of /proc/stat), in clock ticks; 0 on bare metal.
steal_ticks() { awk -v cpu="cpu$1" '$1 == cpu { print $9 + 0; found = 1 } END { if (!found) print 0 }' /proc/stat; }

# status_kb FIELD PID...: a /proc/PID/status field (VmRSS, VmHWM) in kB, summed.
status_kb() {
    local field=$1 total=0 pid key value rest
    shift
    for pid in "$@"; do
        while read -r key value rest; do
            [[ $key == "$field:" ]] && total=$((total + value))
        done 2>/dev/null <"/proc/$pid/status" || true
    done
    echo "$total"
}

# pss_kb PID...: proportional set size (Pss of /proc/PID/smaps_rollup) in kB, summed: pages
# shared between an nginx master and its worker count once in total, not once per process.
pss_kb() {
    local total=0 pid key value rest
    for pid in "$@"; do
        while read -r key value rest; do
            [[ $key == "Pss:" ]] && total=$((total + value))
        done 2>/dev/null <"/proc/$pid/smaps_rollup" || true
    done
    echo "$total"
}

# socket_fds PID...: open socket file descriptors of the PIDs, summed.
socket_fds() {
    local total=0 pid fd
    for pid in "$@"; do
        for fd in /proc/"$pid"/fd/*; do
            [[ $(readlink "$fd" 2>/dev/null) == socket:* ]] && total=$((total + 1))
        done
    done
    echo "$total"
}

# ---------------------------------------------------------------------------------------------
# nginx configs: one worker, no access log, keep-alive, temporary files in DIR

# write_nginx_common DIR WORKER_CONNECTIONS [RLIMIT_NOFILE]: everything outside http {}.
write_nginx_common() {
    echo "worker_processes 1;"
    [[ -z ${3:-} ]] || echo "worker_rlimit_nofile $3;"
    cat <<EOF
daemon off;
master_process on;
pid $1/nginx.pid;
error_log $1/error.log warn;
events {
    worker_connections $2;
}
EOF
}

write_nginx_http_common() { # DIR: the first lines inside http {}
    cat <<EOF
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
EOF
}

# ---------------------------------------------------------------------------------------------
# TLS

# make_test_pki DIR: a throwaway CA (ECDSA P-256) and a leaf signed by it (ECDSA P-256,
# basicConstraints CA:FALSE, serverAuth, SAN DNS:localhost, IP:127.0.0.1; rustls refuses a
# self-signed CA certificate as the server's own). Writes DIR/ca.pem, DIR/leaf.key,
# DIR/leaf-chain.pem (the leaf: there is no intermediate) and DIR/leaf-chain-key.pem (chain and
# key in one file, for HAProxy).
make_test_pki() {
    local dir=$1
    mkdir -p "$dir"
    (
        cd "$dir"
        openssl ecparam -name prime256v1 -genkey -noout -out ca.key
        openssl req -x509 -new -key ca.key -sha256 -days 7 -subj "/CN=loadtests bench CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -out ca.pem
        openssl ecparam -name prime256v1 -genkey -noout -out leaf.ec.key
        openssl pkcs8 -topk8 -nocrypt -in leaf.ec.key -out leaf.key
        openssl req -new -key leaf.key -subj "/CN=localhost" -out leaf.csr
        printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
            "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" >leaf.ext
        openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 7 -sha256 \
            -extfile leaf.ext -out leaf-chain.pem
        openssl verify -CAfile ca.pem leaf-chain.pem
        cat leaf-chain.pem leaf.key >leaf-chain-key.pem
    ) >"$dir/openssl.log" 2>&1 || {
        cat "$dir/openssl.log" >&2
        die "could not make the test certificates with openssl"
    }
}

# ---------------------------------------------------------------------------------------------
# Report

# write_report [JQ_ARGS...]: summarises WORK/runs.jsonl with the script's summary_jq, given the
# skipped runs (SKIPPED_JSON), the machine, the commit, LOADAVG and JQ_ARGS, into
# RESULTS_DIR/BENCH-STAMP.json (RESULTS_DIR/RESULT_NAME.json when RESULT_NAME is set: the suite
# runner names its files by scenario); renders that with the script's markdown into the .md next to
# it, and prints it.
write_report() {
    local base=$RESULTS_DIR/${RESULT_NAME:-$BENCH-$STAMP} json md
    mkdir -p "$RESULTS_DIR"
    json=$base.json
    md=$base.md
    local git_commit git_dirty=false
    git_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [[ -z $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]] || git_dirty=true
    jq -n \
        --slurpfile runs "$WORK/runs.jsonl" \
        --argjson skipped "$(printf '%s\n' "${SKIPPED_JSON[@]}" | jq -s 'map(select(. != null))')" \
        --arg stamp "$STAMP" --arg kernel "$(uname -r)" --argjson nproc "$(nproc)" --arg loadavg "$LOADAVG" \
        --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)" \
        --arg nginx "$("$NGINX" -v 2>&1 | sed 's|^nginx version: nginx/||')" \
        --arg commit "$git_commit" --argjson dirty "$git_dirty" \
        "$@" "$(summary_jq)" >"$json"
    markdown "$json" >"$md"
    cat "$md"
    log "wrote $json and $md"
}

# write_gateway_proxy_conf PORT DRIVER [SERVER_EXTRA [LISTENER_EXTRA]]: prints the config of
# the gateway as the benchmarks run it: one worker on DRIVER, no admin port, one listener on
# PORT (LISTENER_EXTRA appended to it, e.g. its TLS table), every request to the origin at
# ORIGIN_PORT; SERVER_EXTRA is appended to [server].
write_gateway_proxy_conf() {
    cat <<EOF
[server]
workers = 1
io_driver = "$2"
admin = false
log_level = "warn"
${3:-}

[[listeners]]
name = "bench"
address = "127.0.0.1:$1"
${4:-}

[[routes]]
name = "all"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$ORIGIN_PORT"]
EOF
}

# write_nginx_proxy_conf DIR PORT [LISTEN_OPTION [SERVER_LINE...]]: prints the config of nginx
# as a keep-alive HTTP/1.1 proxy: one worker, listening on PORT (with LISTEN_OPTION, e.g. ssl,
# and SERVER_LINEs, e.g. its certificate, in its server block), to the origin at ORIGIN_PORT
# over up to 64 kept connections.
write_nginx_proxy_conf() {
    local dir=$1 port=$2 option=${3:-} line
    shift $(($# < 3 ? $# : 3))
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
        listen 127.0.0.1:$port${option:+ $option};
EOF
    for line in "$@"; do
        echo "        $line"
    done
    cat <<EOF
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

# The origin h1-small and tls-h2 measure through: nginx, one worker on LOAD_CPU, answering
# every request with a 200: "ok" (2 bytes, `return 200`), or, when ORIGIN_BODY_SIZE is not 2, a
# static file of that many bytes (sendfile); sets ORIGIN_PORT and ORIGIN_PID.
start_nginx_origin() {
    local dir=$WORK/origin answer
    mkdir -p "$dir/www"
    pick_port
    ORIGIN_PORT=$PORT
    if ((ORIGIN_BODY_SIZE == 2)); then
        answer='return 200 "ok";'
    else
        head -c "$ORIGIN_BODY_SIZE" /dev/zero | tr '\0' 'x' >"$dir/www/body"
        chmod 755 "$WORK" "$dir" "$dir/www" # nginx's worker runs as nobody when started as root
        answer="root $dir/www; try_files /body =404; default_type text/plain;"
    fi
    {
        write_nginx_common "$dir" 4096
        echo "http {"
        write_nginx_http_common "$dir"
        cat <<EOF
    sendfile on;
    server {
        listen 127.0.0.1:$ORIGIN_PORT backlog=4096;
        location / {
            $answer
        }
    }
}
EOF
    } >"$dir/nginx.conf"
    start_nginx "$LOAD_CPU" "$dir" "$dir/nginx.conf"
    ORIGIN_PID=$PID
    wait_ready "origin nginx" "$ORIGIN_PID" "$ORIGIN_PORT" || {
        cat "$dir/stderr.log" "$dir/error.log" >&2 2>/dev/null
        die "the origin (nginx) did not start"
    }
    CHECK_SCHEME=http answers_ok "$ORIGIN_PORT" || die "the origin does not answer 200 with its $ORIGIN_BODY_SIZE-byte body"
    log "origin: nginx on 127.0.0.1:$ORIGIN_PORT (CPU $LOAD_CPU), $ORIGIN_BODY_SIZE-byte answers"
}

# write_haproxy_config PORT MAXCONN [BIND_OPTIONS [PLAIN_PORT [H2C_PORT]]]: HAProxy with one
# thread, keep-alive on both sides (http-reuse always), no log, proxying everything to
# ORIGIN_PORT. BIND_OPTIONS (e.g. "ssl crt FILE alpn h2,http/1.1") are appended to PORT's bind
# line; PLAIN_PORT, if not empty, is a second, plain bind of the same frontend; H2C_PORT, if not
# empty, a plain bind that speaks only HTTP/2 (`proto h2`: h2c with prior knowledge).
write_haproxy_config() {
    cat <<EOF
global
    nbthread 1
    maxconn $2
    ssl-default-bind-options ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3

defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout http-request 120s
    timeout http-keep-alive 120s
    timeout server 30s
    option http-keep-alive

frontend bench
    bind 127.0.0.1:$1 ${3:-}
$([[ -z ${4:-} ]] || echo "    bind 127.0.0.1:$4")
$([[ -z ${5:-} ]] || echo "    bind 127.0.0.1:$5 proto h2")
    maxconn $2
    default_backend origin

backend origin
    http-reuse always
    server origin 127.0.0.1:$ORIGIN_PORT
EOF
}

# counted PIDS_CSV COMMAND...: runs COMMAND while perf counts the system calls entered by the
# processes PIDS_CSV (comma-separated) and the io_uring operations they submitted
# (`raw_syscalls:sys_enter`, `io_uring:io_uring_submit_req` tracepoints); prints
# {"syscalls":N,"ring_ops":N}, or null when nothing was counted (COUNT=0, no PIDs, perf missing
# or not allowed). COMMAND's own output goes where the caller sends it (use a file). Used on
# warm-up runs: the counts do not move with the machine's noise as CPU time does, and counting
# there costs nothing in the measured runs.
counted() {
    local pids=$1 counts=$WORK/perf-counts.csv perf_pid="" syscalls ops
    shift
    if [[ -n $pids && ${COUNT:-1} == 1 ]] && command -v perf >/dev/null; then
        rm -f "$counts"
        perf stat -x, -o "$counts" -e raw_syscalls:sys_enter,io_uring:io_uring_submit_req -p "$pids" \
            >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.2 # perf attaches before the load starts
    fi
    "$@" || true
    if [[ -z $perf_pid ]]; then
        echo null
        return 0
    fi
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    syscalls=$(awk -F, '$3 == "raw_syscalls:sys_enter" && $1 ~ /^[0-9]+$/ { print $1 }' "$counts" 2>/dev/null)
    ops=$(awk -F, '$3 == "io_uring:io_uring_submit_req" && $1 ~ /^[0-9]+$/ { print $1 }' "$counts" 2>/dev/null)
    if [[ -z $syscalls ]]; then
        echo null
        return 0
    fi
    echo "{\"syscalls\":$syscalls,\"ring_ops\":${ops:-0}}"
}

# profiled TAG PIDS_CSV COMMAND...: with PROFILE=1, runs COMMAND while `perf record -g` samples
# the processes PIDS_CSV (PROFILE_HZ per second, 2999 by default), then appends where their CPU
# went (profile-summary.py: kernel and user shares, the shared kernel paths, the top functions)
# to the run's profiles file, $RESULTS_DIR/<report name>-profiles.md, under the heading TAG.
# Without PROFILE=1, perf, TAG or PIDS it just runs COMMAND. Used on warm-up runs: sampling costs the
# proxy CPU, so it never runs during a measured one.
profiled() {
    local tag=$1 pids=$2 data perf_pid="" profiles
    shift 2
    if [[ ${PROFILE:-0} != 1 || -z $tag || -z $pids ]] || ! command -v perf >/dev/null; then
        "$@"
        return
    fi
    data=$WORK/perf-${tag//[^A-Za-z0-9_.-]/_}.data
    perf record -q -F "${PROFILE_HZ:-2999}" -g -o "$data" -p "$pids" >/dev/null 2>&1 &
    perf_pid=$!
    sleep 0.3 # perf attaches before the load starts
    local status=0
    "$@" || status=$?
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    profiles=$RESULTS_DIR/${RESULT_NAME:-$BENCH-$STAMP}-profiles.md
    mkdir -p "$RESULTS_DIR"
    if [[ ! -s $profiles ]]; then
        printf '# Where each proxy'"'"'s CPU went: %s %s\n\n' "$BENCH" "$STAMP" >"$profiles"
        printf '`perf record -F %s -g` of the proxy'"'"'s processes during the warm-up run before round 1'"'"'s measured one (PROFILE=1); kernel %s, commit %s.\n\n' \
            "${PROFILE_HZ:-2999}" "$(uname -r)" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" >>"$profiles"
    fi
    python3 "$SCRIPT_DIR/profile-summary.py" "$data" "$tag" >>"$profiles" 2>/dev/null ||
        log "profile of $tag: perf report failed"
    rm -f "$data"
    return "$status"
}

# gateway_root_args BIN: sets GATEWAY_ROOT_ARGS to (--allow-root) when this script runs as root
# and BIN knows the flag (a gateway started as root without server.user refuses to run; older
# builds, e.g. a BASELINE_GATEWAY_BIN, have no such check and no such flag), else to ().
gateway_root_args() {
    GATEWAY_ROOT_ARGS=()
    if [[ $(id -u) == 0 ]] && "$1" run --help 2>/dev/null | grep -q -- '--allow-root'; then
        GATEWAY_ROOT_ARGS=(--allow-root)
    fi
}
