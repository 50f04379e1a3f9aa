#!/usr/bin/env bash
# suite: every benchmark scenario, gateway vs nginx vs HAProxy (and no proxy, the floor), in one
# command, then one report: summary.json, summary.md (tables, ratios against nginx and HAProxy,
# the targets met or not) and SVG plots.
#
#   loadtests/bench/suite.sh              # the full run (about 35 minutes on 2 CPUs)
#   SMOKE=1 loadtests/bench/suite.sh      # gateway only, a few seconds per scenario (CI)
#   ONLY="small latency" loadtests/bench/suite.sh
#
# Scenarios, in this order (each is one of the scripts next to this one, run with its own
# defaults unless said here; see loadtests/README.md):
#   small     h1-small.sh            HTTP/1.1 keep-alive, 2-byte body (also gateway-uring-log:
#                                    the access log on)
#   16k       h1-small.sh SCENARIO=16k   16 KiB body
#   large     h1-small.sh SCENARIO=large 256 KiB body (the part after the first read is spliced)
#   https     h1-small.sh SCENARIO=https TLS 1.3 keep-alive, HTTP/1.1
#   vhosts    h1-small.sh SCENARIO=vhosts    2,000 virtual hosts, requests naming each in turn
#   latency   h1-small.sh SCENARIO=latency   one connection, one request at a time
#   openloop  h1-small.sh SCENARIO=openloop  constant-rate latency at fractions of each peak
#   tls-h2    tls-h2.sh              handshakes, HTTP/2 over TLS and over h2c (cleartext,
#                                    prior knowledge; h2load), 10,000 idle keep-alive
#                                    connections, TLS and plain
#   overload  overload.sh            the overload issue's scenario
#
# Environment (defaults in brackets):
#   SMOKE [0]        1: gateway only, one round of 2 s per scenario, small counts; results go to
#                    a temporary directory unless RESULTS_DIR is set, and the run fails if any
#                    scenario has no gateway row (it keeps the runner working; it measures nothing)
#   ONLY [all]       the scenarios to run, by name
#   ROUNDS [3]       rounds of the h1 scenarios and tls-h2 (overload: 1)
#   OPENLOOP_ROUNDS [1]  rounds of openloop (each is a peak run and four constant-rate runs)
#   DURATION [10]    seconds per measured run of the h1 scenarios and tls-h2
#   SKIP_BUILD [0]   1: use the existing release binaries (with PGO=1, the gateway of the last
#                    pgo.sh run, target/pgo/release/gateway)
#   PGO [1]          1: the gateway measured is the shipped build, profile-guided
#                    (loadtests/bench/pgo.sh: trained TRAIN_SECONDS per load, 4 by default, 1
#                    with SMOKE=1); 0: plain `cargo build --release`
#   GATEWAY_BIN      a gateway binary to measure instead (neither built nor trained here)
#   RESULTS_DIR [loadtests/results/suite-<UTC timestamp>]
#   PROXY_CPU [0], LOAD_CPU [1]: as in every scenario
#
# A scenario that fails is reported and the others still run; the exit status is 1 if any failed.

set -euo pipefail

SMOKE=${SMOKE:-0}
ONLY=${ONLY:-"small 16k large https vhosts latency openloop tls-h2 overload"}
SKIP_BUILD=${SKIP_BUILD:-0}
PGO=${PGO:-1}
KEEP_WORK=${KEEP_WORK:-0}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
USER_RESULTS_DIR=${RESULTS_DIR:-}

# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init suite

if [[ $SMOKE == 1 ]]; then
    ROUNDS=${ROUNDS:-1}
    DURATION=${DURATION:-2}
    SUITE_DIR=${USER_RESULTS_DIR:-$WORK/results}
else
    ROUNDS=${ROUNDS:-3}
    DURATION=${DURATION:-10}
    SUITE_DIR=${USER_RESULTS_DIR:-$RESULTS_DIR/suite-$STAMP}
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
FAILED=()

main() {
    local s
    whole_numbers SMOKE ROUNDS DURATION PROXY_CPU LOAD_CPU PGO
    for s in $ONLY; do
        case $s in
        small | 16k | large | https | vhosts | latency | openloop | tls-h2 | overload) ;;
        *) die "unknown scenario '$s' in ONLY (small 16k large https vhosts latency openloop tls-h2 overload)" ;;
        esac
    done
    install_tools nginx wrk haproxy h2load:nghttp2-client openssl python3
    check_cpus
    build
    mkdir -p "$SUITE_DIR"
    log "results: $SUITE_DIR"
    echo "gateway: $GATEWAY_BUILD" >"$SUITE_DIR/gateway-build.txt"
    for s in $ONLY; do
        scenario "$s"
    done
    summarize
    ((${#FAILED[@]} == 0)) || die "failed: ${FAILED[*]}"
}

build() {
    if [[ $SKIP_BUILD == 1 ]]; then
        log "SKIP_BUILD=1: using the binaries in $TARGET"
    else
        # The plain release build of the gateway only where it is the one measured.
        local pkgs=(-p loadtests)
        [[ $PGO == 1 || -n ${GATEWAY_BIN:-} ]] || pkgs=(-p gateway -p loadtests)
        log "building: cargo build --release ${pkgs[*]}"
        (cd "$ROOT" && cargo build --release "${pkgs[@]}") >"$WORK/build.log" 2>&1 || {
            tail -n 20 "$WORK/build.log" >&2
            die "the release build failed (cargo build --release ${pkgs[*]})"
        }
    fi
    local bin
    for bin in openloop overload-load capacity-origin bench-report; do
        [[ -x $TARGET/$bin ]] || die "no $TARGET/$bin (cargo build --release -p loadtests)"
    done
    # The gateway measured: the shipped build (profile-guided) unless told otherwise.
    if [[ -n ${GATEWAY_BIN:-} ]]; then
        GATEWAY_BUILD="the binary given as GATEWAY_BIN ($GATEWAY_BIN)"
    elif [[ $PGO == 1 ]]; then
        GATEWAY_BIN=$(dirname "$TARGET")/pgo/release/gateway
        if [[ $SKIP_BUILD != 1 ]]; then
            local train=4
            ((SMOKE)) && train=1
            log "building the profile-guided gateway: TRAIN_SECONDS=$train loadtests/bench/pgo.sh"
            TRAIN_SECONDS=$train "$SCRIPT_DIR/pgo.sh" >"$WORK/pgo.log" 2>&1 || {
                tail -n 30 "$WORK/pgo.log" >&2
                die "the profile-guided build failed (loadtests/bench/pgo.sh)"
            }
        fi
        GATEWAY_BUILD="profile-guided release build (loadtests/bench/pgo.sh), as shipped"
    else
        GATEWAY_BIN=$TARGET/gateway
        GATEWAY_BUILD="plain release build (cargo build --release, PGO=0)"
    fi
    [[ -x $GATEWAY_BIN ]] || die "no gateway binary at $GATEWAY_BIN"
    log "gateway: $GATEWAY_BUILD"
}

# scenario NAME: runs it with its environment; a failure is recorded, not fatal.
scenario() {
    local name=$1 file=$1
    case $name in small | 16k | large | vhosts) file=h1-$name ;; esac # the names bench-report reads
    local env=(SKIP_BUILD=1 RESULTS_DIR="$SUITE_DIR" RESULT_NAME="$file" PROXY_CPU="$PROXY_CPU"
        LOAD_CPU="$LOAD_CPU" KEEP_WORK="$KEEP_WORK" GATEWAY_BIN="$GATEWAY_BIN") script=h1-small.sh
    local h1=(ROUNDS="$ROUNDS" DURATION="$DURATION")
    ((SMOKE)) && h1+=(WARMUP=1)
    case $name in
    small)
        env+=(SCENARIO=small "${h1[@]}")
        if ((SMOKE)); then
            env+=(PROXIES="gateway-uring gateway-uring-log")
        else
            env+=(PROXIES="gateway-uring gateway-epoll gateway-uring-log nginx haproxy direct")
        fi
        ;;
    16k | large | https | vhosts | latency)
        env+=(SCENARIO="$name" "${h1[@]}")
        ((SMOKE)) && env+=(PROXIES="gateway-uring")
        ;;
    openloop)
        env+=(SCENARIO=openloop "${h1[@]}" ROUNDS="${OPENLOOP_ROUNDS:-1}")
        if ((SMOKE)); then
            env+=(PROXIES="gateway-uring" FRACTIONS="0.5")
        else
            env+=(PROXIES="gateway-uring gateway-epoll nginx haproxy direct")
        fi
        ;;
    tls-h2)
        script="tls-h2.sh"
        env+=(ROUNDS="$ROUNDS" DURATION="$DURATION")
        ((SMOKE)) && env+=(SMOKE=1 WARMUP=1 PROXIES="gateway-uring" IDLE_CONNECTIONS=200)
        ;;
    overload)
        script=overload.sh
        ((SMOKE)) && env+=(PROXIES="gateway-on" DURATION=4 UNLOADED_DURATION=2)
        ;;
    esac
    log "== $name: ${env[*]} $script"
    if env "${env[@]}" "$SCRIPT_DIR/$script" >"$WORK/$name.log" 2>&1 && [[ -s $SUITE_DIR/$file.json ]]; then
        if ((SMOKE)) && ! has_gateway_row "$SUITE_DIR/$file.json"; then
            tail -n 20 "$WORK/$name.log" >&2
            log "== $name: FAILED: no gateway row in $SUITE_DIR/$file.json"
            FAILED+=("$name")
        else
            log "== $name: done"
        fi
    else
        tail -n 30 "$WORK/$name.log" >&2
        log "== $name: FAILED (its log is above)"
        FAILED+=("$name")
    fi
    cp "$WORK/$name.log" "$SUITE_DIR/$file.log" 2>/dev/null || true
}

has_gateway_row() { # FILE: some summary entry (or overload proxy) is the gateway's
    jq -e '[.. | objects | (.proxy? // empty) | strings | select(startswith("gateway"))] | length > 0' "$1" >/dev/null
}

summarize() {
    local cmd="loadtests/bench/suite.sh"
    ((SMOKE)) && cmd="SMOKE=1 $cmd"
    [[ $PGO == 1 ]] || cmd="PGO=0 $cmd"
    [[ $ONLY == "small 16k large https vhosts latency openloop tls-h2 overload" ]] || cmd="ONLY=\"$ONLY\" $cmd"
    if "$TARGET/bench-report" summarize "$SUITE_DIR" --command "$cmd" >"$WORK/summarize.log" 2>&1; then
        cat "$SUITE_DIR/summary.md"
        log "wrote $SUITE_DIR/summary.{json,md} and the plots"
    else
        cat "$WORK/summarize.log" >&2
        FAILED+=(summary)
    fi
}

main "$@"
