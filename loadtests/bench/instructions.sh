#!/usr/bin/env bash
# instructions: the gateway's instructions per proxied request, counted by valgrind (callgrind),
# for one or more builds side by side. Instruction counts do not move with what else the machine
# is doing, so this compares two builds where CPU-time runs on a shared 2-CPU VM swing 10-15%
# (`perf stat` has no hardware counters on such VMs). It is not a CPU-time measurement: cache
# misses, syscall cost and the ring's behaviour under load are not in it.
#
#   BINS="new=target/release/gateway old=/path/to/older/gateway" loadtests/bench/instructions.sh
#
# Environment (defaults in brackets):
#   BINS ["gateway=target/release/gateway"]  name=path pairs, measured in this order
#   DRIVERS ["epoll io_uring"]  the gateway's io_driver for each run
#   LOADS ["h1 h2c"]            h1: HTTP/1.1 keep-alive GETs (h2load --h1, CLIENTS connections);
#                               h2c: HTTP/2 cleartext, CLIENTS connections x STREAMS streams;
#                               https: h1 over TLS 1.3; h2: HTTP/2 over TLS 1.3 (ALPN), as h2c
#                               (a throwaway ECDSA P-256 certificate, lib.sh's make_test_pki;
#                               the handshakes are in both runs alike and cancel out)
#   N1 [500], N2 [2500]         requests of the short and the long run: the per-request count is
#                               (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and shutdown cancel out
#   CLIENTS [4], STREAMS [8]    h2load's connections, and streams per h2c connection: 1 and 1
#                               send one request at a time, so that every request takes the
#                               same path (with more, how many requests one wake-up finds moves
#                               the count by a few per cent from run to run)
#   BODY [2]                    bytes of the origin's answers
#   ORIGIN_ADDR                 host:port of an origin already running, instead of the bundled
#                               one (whose answers carry an `x-origin-conn` field that differs per
#                               upstream connection); e.g. nginx as the other benchmarks run it,
#                               whose answers carry Server, Date and `Connection: keep-alive`
#   KEEP [unset]                a directory: the long run's callgrind output of each build,
#                               driver and load is copied there (cg-BUILD-DRIVER-LOAD.out), for
#                               callgrind_annotate
#   CACHE [0]                   1: callgrind also simulates this machine's L1 data cache and,
#                               as its last level, one core's L2 (geometry from
#                               /sys/devices/system/cpu/cpu0/cache; CACHE_D1 and CACHE_LL, as
#                               valgrind's size,ways,line, override it), and the table gains the
#                               L2 misses (reads and writes) per request. Like the instruction
#                               count it does not move with what else the machine does; it sees
#                               the gateway's own accesses only (not the kernel's, which share
#                               the real cache). With many requests in flight (CLIENTS x STREAMS)
#                               it shows what their state costs in cache.
#
# The origin is the bundled `origin` (loadtests) on another port; the gateway runs one worker.
# Prints a table: build, driver, load, instructions per request (and L2 misses per request).

set -euo pipefail

# For make_test_pki; the functions defined below (die, cleanup) replace lib.sh's.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
BINS=${BINS:-"gateway=$TARGET/gateway"}
DRIVERS=${DRIVERS:-"epoll io_uring"}
LOADS=${LOADS:-"h1 h2c"}
N1=${N1:-500}
N2=${N2:-2500}
BODY=${BODY:-2}
CLIENTS=${CLIENTS:-4}
STREAMS=${STREAMS:-8}
CACHE=${CACHE:-0}

die() {
    echo "instructions: $*" >&2
    exit 1
}
for tool in valgrind callgrind_control h2load curl openssl; do
    command -v "$tool" >/dev/null || {
        ((EUID == 0)) || die "missing $tool (apt-get install valgrind nghttp2-client curl)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind nghttp2-client curl openssl >/dev/null
    }
done
[[ -x $TARGET/origin ]] || (cd "$ROOT" && cargo build --release -q -p loadtests --bin origin)

# cache_geometry LEVEL TYPE: valgrind's size,ways,line of CPU 0's cache of that level and type.
cache_geometry() {
    local d size
    for d in /sys/devices/system/cpu/cpu0/cache/index*; do
        [[ $(cat "$d/level") == "$1" && $(cat "$d/type") == "$2" ]] || continue
        size=$(cat "$d/size")
        case $size in
        *K) size=$((${size%K} * 1024)) ;;
        *M) size=$((${size%M} * 1024 * 1024)) ;;
        esac
        echo "$size,$(cat "$d/ways_of_associativity"),$(cat "$d/coherency_line_size")"
        return 0
    done
    return 1
}
VALGRIND_CACHE=()
if [[ $CACHE == 1 ]]; then
    D1=${CACHE_D1:-$(cache_geometry 1 Data)} || die "no L1 data cache in /sys (set CACHE_D1=size,ways,line)"
    LL=${CACHE_LL:-$(cache_geometry 2 Unified)} || die "no L2 cache in /sys (set CACHE_LL=size,ways,line)"
    VALGRIND_CACHE=(--cache-sim=yes "--D1=$D1" "--LL=$LL")
fi

WORK=$(mktemp -d)
ORIGIN_PID=
cleanup() {
    [[ -n $ORIGIN_PID ]] && kill "$ORIGIN_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# The TLS loads' certificate.
if [[ " $LOADS " == *" https "* || " $LOADS " == *" h2 "* ]]; then
    make_test_pki "$WORK/pki"
fi

if [[ -n ${ORIGIN_ADDR:-} ]]; then
    ORIGIN=$ORIGIN_ADDR
    curl -s -o /dev/null "http://$ORIGIN/" || die "no origin answers at $ORIGIN (ORIGIN_ADDR)"
else
    ORIGIN_PORT=$(free_port)
    ORIGIN=127.0.0.1:$ORIGIN_PORT
    "$TARGET/origin" --listen "$ORIGIN" --body-size "$BODY" >"$WORK/origin.log" 2>&1 &
    ORIGIN_PID=$!
    wait_port "$ORIGIN_PORT" || die "the origin did not start"
fi

# One callgrind run: the gateway (binary $1, driver $2) serves $4 requests of load $3; prints Ir
# (and, with CACHE=1, the simulated last-level misses, reads and writes together).
run() {
    local bin=$1 driver=$2 load=$3 n=$4 port conf out pid scheme=http tls=""
    port=$(free_port)
    if [[ $load == https || $load == h2 ]]; then
        scheme=https
        tls="[listeners.tls]
certificates = [{ cert = \"$WORK/pki/leaf-chain.pem\", key = \"$WORK/pki/leaf.key\" }]"
    fi
    conf=$WORK/gw-$port.toml
    out=$WORK/cg-$port.out
    cat >"$conf" <<EOF
[server]
workers = 1
io_driver = "$driver"
log_level = "error"
admin = false

[[listeners]]
name = "main"
address = "127.0.0.1:$port"
protocols = ["h2", "http/1.1"]
$tls

[[routes]]
name = "r"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["$ORIGIN"]
EOF
    valgrind --tool=callgrind "${VALGRIND_CACHE[@]}" --callgrind-out-file="$out" "$bin" run --config "$conf" --allow-root \
        >"$WORK/gw-$port.log" 2>&1 &
    pid=$!
    wait_port "$port" "$scheme" || die "$bin ($driver) did not start: $(tail -5 "$WORK/gw-$port.log")"
    case $load in
    h1) h2load --h1 -n "$n" -c "$CLIENTS" "http://127.0.0.1:$port/" >"$WORK/load-$port.log" 2>&1 ;;
    h2c) h2load -n "$n" -c "$CLIENTS" -m "$STREAMS" "http://127.0.0.1:$port/" >"$WORK/load-$port.log" 2>&1 ;;
    https) h2load --h1 -n "$n" -c "$CLIENTS" "https://127.0.0.1:$port/" >"$WORK/load-$port.log" 2>&1 ;;
    h2) h2load -n "$n" -c "$CLIENTS" -m "$STREAMS" "https://127.0.0.1:$port/" >"$WORK/load-$port.log" 2>&1 ;;
    *) die "unknown load $load" ;;
    esac
    grep -q "succeeded, 0 failed, 0 errored" "$WORK/load-$port.log" ||
        die "$load through $bin ($driver): $(grep -E 'requests:' "$WORK/load-$port.log")"
    # The protocol the load asked for is the one it got (over TLS, ALPN follows the listener's
    # order: with http/1.1 first, an h2 load would measure HTTP/1.1 over TLS).
    local want=$load
    [[ $load == h1 || $load == https ]] && want=http/1.1
    grep -q "^Application protocol: $want\$" "$WORK/load-$port.log" ||
        die "$load through $bin ($driver): not $want ($(grep -E '^Application protocol' "$WORK/load-$port.log"))"
    # A dump of the counts so far (the gateway under valgrind does not always shut down on
    # io_uring: it is killed after the dump). The probe's requests (wait_port) and the start-up
    # are in both runs alike and cancel out.
    callgrind_control -d "$pid" >/dev/null 2>&1 || die "callgrind_control could not dump $pid"
    for _ in $(seq 1 300); do
        [[ -s $out.1 ]] && grep -q '^totals:' "$out.1" && break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    LAST_OUT=$out.1
    if [[ $CACHE == 1 ]]; then
        # events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
        awk '/^totals:/ {print $2, $9 + $10; exit}' "$out.1"
    else
        awk '/^totals:/ {print $2; exit}' "$out.1"
    fi
}

if [[ $CACHE == 1 ]]; then
    printf '| build | driver | load | instructions/request | L2 misses/request (simulated: L1d %s, L2 %s) |\n| --- | --- | --- | ---: | ---: |\n' "$D1" "$LL"
else
    printf '| build | driver | load | instructions/request |\n| --- | --- | --- | ---: |\n'
fi
for load in $LOADS; do
    for driver in $DRIVERS; do
        for pair in $BINS; do
            name=${pair%%=*}
            bin=${pair#*=}
            [[ -x $bin ]] || die "$name: no executable at $bin"
            a=$(run "$bin" "$driver" "$load" "$N1")
            run "$bin" "$driver" "$load" "$N2" >"$WORK/b"
            b=$(cat "$WORK/b")
            if [[ -n ${KEEP:-} ]]; then
                mkdir -p "$KEEP"
                cp "$LAST_OUT" "$KEEP/cg-$name-$driver-$load.out"
            fi
            read -r a_ir a_ll <<<"$a"
            read -r b_ir b_ll <<<"$b"
            per=$(((b_ir - a_ir) / (N2 - N1)))
            if [[ $CACHE == 1 ]]; then
                misses=$(awk -v a="$a_ll" -v b="$b_ll" -v n=$((N2 - N1)) 'BEGIN {printf "%.1f", (b - a) / n}')
                printf '| %s | %s | %s | %s | %s |\n' "$name" "$driver" "$load" "$per" "$misses"
            else
                printf '| %s | %s | %s | %s |\n' "$name" "$driver" "$load" "$per"
            fi
        done
    done
done
