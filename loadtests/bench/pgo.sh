#!/usr/bin/env bash
# pgo: builds the gateway with profile-guided optimisation (rustc's -Cprofile-generate /
# -Cprofile-use, LLVM's instrumentation profiles).
#
#   loadtests/bench/pgo.sh              # prints the path of the optimised binary on its last line
#
# 1. builds an instrumented gateway (its own target directory, target/pgo-gen);
# 2. trains it: one worker, both I/O drivers, behind it the bundled origin (`origin`, loadtests)
#    answering with 2 bytes and with 16 KiB (`/bytes/16384`); h2load sends HTTP/1.1, HTTPS, h2c and HTTP/2 over
#    TLS, many connections and one at a time, new TLS connections, requests over a route's rate
#    limit (429) and to an endpoint that refuses connections (502/503), the access log on in
#    the epoll run; the gateway is stopped with
#    SIGTERM, so that its profile is written as it exits;
# 3. merges the profiles with the llvm-profdata of rustc's own LLVM version (rustup's
#    llvm-tools component where rustup has it, else Debian's llvm-<major>, installed as root);
# 4. builds the gateway with the merged profile (target/pgo/release/gateway).
#
# The training covers what the benchmark suite measures because that is what an edge gateway
# serves; it is not the suite (other ports, the bundled origin instead of nginx, h2load instead
# of wrk, shorter runs).
#
# Knobs: TRAIN_SECONDS [4] per load and driver; PGO_DIR [target/pgo-data]: profiles (raw and
# merged, removed first); CARGO_PROFILE [release].

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=lib.sh
source "$ROOT/loadtests/bench/lib.sh"
BENCH=pgo # lib.sh's log and die prefix (bench_init would also take a lock and a work directory)

TRAIN_SECONDS=${TRAIN_SECONDS:-4}
TARGET_BASE=${CARGO_TARGET_DIR:-$ROOT/target}
PGO_DIR=${PGO_DIR:-$TARGET_BASE/pgo-data}
PROFILE=${CARGO_PROFILE:-release}
whole_numbers TRAIN_SECONDS

# --- tools ---------------------------------------------------------------------------------------
install_tools h2load:nghttp2-client openssl python3

# llvm-profdata of rustc's LLVM major version (the raw profile format follows LLVM's).
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[[ -n $llvm_major ]] || die "cannot read rustc's LLVM version (rustc -vV)"
profdata=""
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
find_profdata() {
    local p
    for p in "$sysroot/lib/rustlib/$host/bin/llvm-profdata" "$(command -v "llvm-profdata-$llvm_major" || true)"; do
        [[ -n $p && -x $p ]] && {
            profdata=$p
            return 0
        }
    done
    return 1
}
if ! find_profdata; then
    timeout 120 rustup component add llvm-tools >/dev/null 2>&1 || true
    if ! find_profdata && ((EUID == 0)); then
        log "installing llvm-$llvm_major from Debian (for llvm-profdata)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "llvm-$llvm_major" >/dev/null || true
    fi
    find_profdata || die "no llvm-profdata for LLVM $llvm_major (rustup component add llvm-tools, or apt-get install llvm-$llvm_major)"
fi

# --- 1. the instrumented build -------------------------------------------------------------------
rm -rf "$PGO_DIR"
mkdir -p "$PGO_DIR/raw"
PGO_DIR=$(cd "$PGO_DIR" && pwd) # rustc runs build scripts elsewhere: the profiles' path is absolute
log "instrumented build ($TARGET_BASE/pgo-gen)"
(cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$PGO_DIR/raw" \
    cargo build --locked --profile "$PROFILE" -p gateway --target-dir "$TARGET_BASE/pgo-gen" >&2)
(cd "$ROOT" && cargo build --locked --release -p loadtests --bin origin >&2)
GEN=$TARGET_BASE/pgo-gen/$PROFILE/gateway
ORIGIN_BIN=$TARGET_BASE/release/origin

# --- 2. training ---------------------------------------------------------------------------------
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

make_test_pki "$WORK/pki"
origin=$(free_port)
"$ORIGIN_BIN" --listen "127.0.0.1:$origin" --body-size 2 >"$WORK/origin.log" 2>&1 &
PIDS+=($!)
wait_port "$origin" || die "the origin did not start"
# A port nothing listens on: the "dead" cluster's endpoint (connections refused, 502 or 503).
dead=$(free_port)

# train DRIVER: one gateway run on that driver, every load against it.
train() {
    local driver=$1 plain tls conf pid
    plain=$(free_port)
    tls=$(free_port)
    conf=$WORK/gw-$driver.toml
    # The access log on in the epoll run only: its code is trained, the io_uring run's hot path
    # is the default's (no access log).
    local access_log=""
    [[ $driver == epoll ]] && access_log=$'[server.access_log]\nformat = "json"\npath = "/dev/null"'
    # io_uring may be refused where this runs (a container build's seccomp profile): "auto" then
    # falls back to epoll, said below, and the profile covers epoll only.
    local io_driver=$driver
    [[ $driver == io_uring ]] && io_driver=auto
    cat >"$conf" <<EOF
[server]
workers = 1
io_driver = "$io_driver"
log_level = "warn"
admin = false
$access_log

[[listeners]]
name = "plain"
address = "127.0.0.1:$plain"
protocols = ["h2", "http/1.1"]

[[listeners]]
name = "tls"
address = "127.0.0.1:$tls"
protocols = ["h2", "http/1.1"]
[listeners.tls]
certificates = [{ cert = "$WORK/pki/leaf-chain.pem", key = "$WORK/pki/leaf.key" }]

[[routes]]
name = "limited"
match = { path_prefix = "/limited" }
cluster = "origin"
rate_limit = { rate = 100 }

[[routes]]
name = "dead"
match = { path_prefix = "/dead" }
cluster = "dead"

[[routes]]
name = "all"
cluster = "origin"

[[clusters]]
name = "origin"
endpoints = ["127.0.0.1:$origin"]

[[clusters]]
name = "dead"
endpoints = ["127.0.0.1:$dead"]
EOF
    "$GEN" run --config "$conf" --allow-root >"$WORK/gw-$driver.log" 2>&1 &
    pid=$!
    wait_port "$plain" || die "the instrumented gateway ($driver) did not start: $(tail -5 "$WORK/gw-$driver.log")"
    wait_port "$tls" https || die "the instrumented gateway ($driver) did not start its TLS listener"
    local loads=(
        "--h1 -c64 http://127.0.0.1:$plain/"
        "--h1 -c64 http://127.0.0.1:$plain/bytes/16384"
        "--h1 -c1 http://127.0.0.1:$plain/"
        "--h1 -c64 https://127.0.0.1:$tls/"
        "--h1 -c1 https://127.0.0.1:$tls/"
        "-c16 -m32 http://127.0.0.1:$plain/"
        "-c16 -m32 https://127.0.0.1:$tls/"
        "-c1 -m1 http://127.0.0.1:$plain/"
        "-c16 -m8 https://127.0.0.1:$tls/bytes/16384"
    )
    local l
    for l in "${loads[@]}"; do
        # shellcheck disable=SC2086
        h2load -D "$TRAIN_SECONDS" $l >"$WORK/load.log" 2>&1 || die "h2load $l ($driver): $(tail -3 "$WORK/load.log")"
        grep -q " 0 failed, 0 errored" "$WORK/load.log" || die "h2load $l ($driver): $(grep 'requests:' "$WORK/load.log")"
    done
    # Answers of the gateway's own: 429 over a route's rate limit, 502/503 from an endpoint that
    # refuses connections (not 2xx, so h2load counts them failed; none may be errored).
    for l in "--h1 -c16 http://127.0.0.1:$plain/limited" "-c4 -m8 http://127.0.0.1:$plain/limited" \
        "--h1 -c4 http://127.0.0.1:$plain/dead"; do
        # shellcheck disable=SC2086
        h2load -D 1 $l >"$WORK/load.log" 2>&1 || die "h2load $l ($driver): $(tail -3 "$WORK/load.log")"
        grep -q " 0 errored" "$WORK/load.log" || die "h2load $l ($driver): $(grep 'requests:' "$WORK/load.log")"
    done
    # New TLS connections, one request each (HTTP/1.1 and HTTP/2).
    local i
    for i in 1 2 3 4 5; do
        h2load --h1 -n 200 -c 200 "https://127.0.0.1:$tls/" >"$WORK/load.log" 2>&1 ||
            die "h2load, new TLS connections ($driver): $(tail -3 "$WORK/load.log")"
        h2load -n 200 -c 200 "https://127.0.0.1:$tls/" >"$WORK/load.log" 2>&1 ||
            die "h2load, new TLS connections ($driver): $(tail -3 "$WORK/load.log")"
    done
    kill -TERM "$pid"
    wait "$pid" || die "the instrumented gateway ($driver) did not exit cleanly: $(tail -5 "$WORK/gw-$driver.log")"
    if [[ $driver == io_uring ]] && grep -q "falling back to epoll" "$WORK/gw-$driver.log"; then
        log "warning: io_uring is not available here: the profile covers the epoll driver only"
    fi
}

for driver in io_uring epoll; do
    log "training on $driver ($TRAIN_SECONDS s per load)"
    train "$driver"
done
ls "$PGO_DIR"/raw/*.profraw >/dev/null 2>&1 || die "the instrumented gateway wrote no profile"
"$profdata" merge -o "$PGO_DIR/merged.profdata" "$PGO_DIR"/raw/*.profraw
# Cargo does not see a profile's content, only RUSTFLAGS: a name of the profile's digest makes
# a new profile rebuild everything (the dependencies are optimised with it too), an unchanged
# one nothing.
profile=$PGO_DIR/merged-$(sha256sum "$PGO_DIR/merged.profdata" | cut -c1-16).profdata
mv "$PGO_DIR/merged.profdata" "$profile"

# --- 4. the optimised build ----------------------------------------------------------------------
log "optimised build ($TARGET_BASE/pgo)"
(cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$profile" \
    cargo build --locked --profile "$PROFILE" -p gateway --target-dir "$TARGET_BASE/pgo" >&2)
echo "$TARGET_BASE/pgo/$PROFILE/gateway"
