#!/usr/bin/env bash
# ring-probe: what owning the io_uring ring would buy, measured. `ring-probe` (loadtests) is a
# one-thread HTTP/1.1 relay on an io_uring ring of its own, which can switch on, one at a time,
# the ring levers that monoio 0.2.4 keeps out of the gateway's reach (poll-first receives,
# registered files, multishot receives into provided buffers, sends without completions, waits
# for more than one completion). Each variant and the gateway (io_uring, one worker) relay wrk's
# keep-alive GETs to the same nginx origin in interleaved rounds, with nginx (one worker,
# upstream keep-alive) and HAProxy (one thread, http-reuse always) as proxies beside them; the report gives CPU per request (utime+stime from
# /proc), its kernel part, and the proxy's CPU over the origin's (the steadier figure: a proxy's
# CPU per request moves with how often it sleeps, which the origin's pace sets).
#
#   loadtests/bench/ring-probe.sh
#
# Environment (defaults in brackets):
#   VARIANTS ["nginx haproxy gateway base poll-first fixed-files multishot ms-fixed skip-send wait4 all"]
#                       nginx: nginx as the proxy; haproxy: HAProxy as the proxy; gateway: the
#                       gateway (io_uring, one worker);
#                       the rest: ring-probe with the flags in FLAGS below
#   ROUNDS [3]          interleaved rounds (in a balanced order: lib.sh `in_round_order`)
#   DURATION [10]       seconds of each measured wrk run (after a 2 s warm-up)
#   CONNECTIONS [64]    wrk connections (one wrk thread)
#   SKIP_BUILD [0]      1: use the existing target/release binaries
#   PROXY_CPU [0], LOAD_CPU [1]   where the relay runs; where the origin and wrk share
#   ORIGIN_BODY_SIZE [2]   the origin's body in bytes (16384: the large-answer variants, head4k
#                       (an answer's first receive at most 4 KiB) and splice (its rest spliced
#                       through a pipe), are compared on it)
#   KEEP_WORK [0]       1: keep the temporary directory
set -euo pipefail

PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
KEEP_WORK=${KEEP_WORK:-0}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init ring-probe

VARIANTS=${VARIANTS:-"nginx haproxy gateway base poll-first fixed-files multishot ms-fixed skip-send wait4 all"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release

declare -A FLAGS=(
    [base]=""
    [poll-first]="--poll-first"
    [fixed-files]="--fixed-files"
    [multishot]="--multishot"
    [ms-fixed]="--multishot --fixed-files"
    [skip-send]="--skip-send-cqe"
    [wait4]="--wait 4 --wait-us 50"
    [all]="--multishot --fixed-files --wait 4 --wait-us 50"
    [head4k]="--head-read 4096"
    [splice]="--head-read 4096 --splice"
)
for v in $VARIANTS; do
    [[ $v == gateway || $v == nginx || $v == haproxy || -v FLAGS[$v] ]] ||
        die "unknown variant '$v' (nginx haproxy gateway ${!FLAGS[*]})"
done

check_cpus
take_lock
raise_fd_limit
install_tools nginx wrk curl
HAPROXY=""
if [[ " $VARIANTS " == *" haproxy "* ]]; then
    install_tools haproxy
    HAPROXY=$(sbin_path haproxy)
fi
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    log "building: cargo build --release -p gateway -p loadtests --bin ring-probe"
    (cd "$ROOT" && cargo build --release -p gateway && cargo build --release -p loadtests --bin ring-probe) \
        >"$WORK/build.log" 2>&1 || {
        tail -n 15 "$WORK/build.log" >&2
        die "the release build failed"
    }
fi
[[ -x $TARGET/ring-probe && -x $TARGET/gateway ]] || die "no binaries in $TARGET (build them, or unset SKIP_BUILD)"

start_nginx_origin
ORIGIN_PIDS=("$ORIGIN_PID" $(descendants "$ORIGIN_PID"))

# start_variant NAME: starts it on PROXY_CPU; sets PID, PIDS (every process whose CPU counts)
# and PORT.
start_variant() {
    local name=$1 dir=$WORK/$1
    mkdir -p "$dir"
    pick_port
    if [[ $name == nginx ]]; then
        write_nginx_proxy_conf "$dir" "$PORT" >"$dir/nginx.conf"
        start_nginx "$PROXY_CPU" "$dir" "$dir/nginx.conf"
    elif [[ $name == haproxy ]]; then
        write_haproxy_config "$PORT" 4096 >"$dir/haproxy.cfg"
        start_pinned "$PROXY_CPU" "$dir/log" "$HAPROXY" -db -f "$dir/haproxy.cfg"
    elif [[ $name == gateway ]]; then
        write_gateway_proxy_conf "$PORT" io_uring >"$dir/gateway.toml"
        gateway_root_args "$TARGET/gateway"
        start_pinned "$PROXY_CPU" "$dir/log" "$TARGET/gateway" run --config "$dir/gateway.toml" "${GATEWAY_ROOT_ARGS[@]}"
    else
        # shellcheck disable=SC2086 # the flags are words
        start_pinned "$PROXY_CPU" "$dir/log" "$TARGET/ring-probe" --listen "127.0.0.1:$PORT" \
            --upstream "127.0.0.1:$ORIGIN_PORT" ${FLAGS[$name]}
    fi
    wait_ready "$name" "$PID" "$PORT" || die "$name did not start: $(tail -3 "$dir/log" "$dir/stderr.log" 2>/dev/null)"
    answers_ok "$PORT" || die "$name does not relay the origin's answer"
    # shellcheck disable=SC2207 # pids are words
    PIDS=("$PID" $(descendants "$PID"))
}

: >"$WORK/runs.tsv"
log "load average before the rounds: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= ROUNDS; round++)); do
    for v in $(in_round_order "$round" $VARIANTS); do
        start_variant "$v"
        taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d2s "http://127.0.0.1:$PORT/" >/dev/null 2>&1 || true
        cpu0=$(cpu_ticks "${PIDS[@]}")
        sys0=$(sys_ticks "${PIDS[@]}")
        ocpu0=$(cpu_ticks "${ORIGIN_PIDS[@]}")
        out=$WORK/wrk-$v-$round.txt
        taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"$DURATION"s "http://127.0.0.1:$PORT/" >"$out" 2>&1 ||
            die "wrk failed against $v: $(tail -3 "$out")"
        cpu1=$(cpu_ticks "${PIDS[@]}")
        sys1=$(sys_ticks "${PIDS[@]}")
        ocpu1=$(cpu_ticks "${ORIGIN_PIDS[@]}")
        requests=$(awk '/requests in/ {print $1; exit}' "$out")
        grep -q -E 'Non-2xx|Socket errors' "$out" && die "$v: errors in wrk's run: $(grep -E 'Non-2xx|Socket errors' "$out")"
        [[ -n $requests && $requests -gt 0 ]] || die "$v: no requests counted"
        stop "$PID"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$round" "$requests" "$((cpu1 - cpu0))" "$((sys1 - sys0))" \
            "$((ocpu1 - ocpu0))" >>"$WORK/runs.tsv"
        log "round $round $v: $requests requests, $((cpu1 - cpu0)) ticks ($((sys1 - sys0)) kernel), origin $((ocpu1 - ocpu0))"
    done
done

mkdir -p "$RESULTS_DIR"
REPORT=$RESULTS_DIR/ring-probe-$STAMP.md
CLK_TCK=$(getconf CLK_TCK)
{
    echo "# ring-probe, $STAMP"
    echo
    echo "Command: \`ORIGIN_BODY_SIZE=$ORIGIN_BODY_SIZE VARIANTS=\"$VARIANTS\" ROUNDS=$ROUNDS DURATION=$DURATION CONNECTIONS=$CONNECTIONS loadtests/bench/ring-probe.sh\`"
    echo "(commit $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) CPUs; $(uname -r))."
    echo "Each relay on CPU $PROXY_CPU, the nginx origin and wrk (-t1 -c$CONNECTIONS) on CPU $LOAD_CPU."
    echo "Medians over the rounds (min-max); µs of CPU per request from /proc (utime+stime)."
    echo
    echo "| variant | flags | req/s | µs per request | of which kernel | relay CPU / origin CPU |"
    echo "| --- | --- | ---: | ---: | ---: | ---: |"
    for v in $VARIANTS; do
        case $v in
        gateway) flags="(the gateway, io_uring)" ;;
        nginx) flags="(nginx $("$(sbin_path nginx)" -v 2>&1 | sed 's|.*/||'), 1 worker)" ;;
        haproxy) flags="(HAProxy $("$HAPROXY" -v 2>/dev/null | awk 'NR == 1 {print $3}'), 1 thread)" ;;
        *) flags=${FLAGS[$v]:-"(none)"} ;;
        esac
        awk -F'\t' -v v="$v" -v hz="$CLK_TCK" -v d="$DURATION" -v flags="$flags" '
            function med(a, n,   i, j, t) {
                for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
            }
            function lo(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
            function hi(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
            $1 == v { n++; rps[n] = $3 / d; us[n] = $4 / hz * 1e6 / $3; k[n] = $5 / hz * 1e6 / $3; r[n] = ($6 > 0) ? $4 / $6 : 0 }
            END {
                if (n == 0) exit
                printf "| %s | `%s` | %.0f | %.2f (%.2f-%.2f) | %.2f | %.3f (%.3f-%.3f) |\n", v, flags,
                    med(rps, n), med(us, n), lo(us, n), hi(us, n), med(k, n), med(r, n), lo(r, n), hi(r, n)
            }' "$WORK/runs.tsv"
    done
    echo
    echo "Raw rounds (variant, round, requests, CPU ticks, kernel ticks, origin ticks; $CLK_TCK ticks/s):"
    echo
    echo '```'
    cat "$WORK/runs.tsv"
    echo '```'
} >"$REPORT"
log "report: $REPORT"
cat "$REPORT"
