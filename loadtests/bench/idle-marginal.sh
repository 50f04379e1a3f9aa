#!/usr/bin/env bash
# idle-marginal: the gateway's memory per idle plain keep-alive connection, as a first batch
# and as the marginal cost of a second batch opened after it (whose connections reuse what the
# first batch's burst left in the allocator). One worker pinned to CPU 0, a direct-response
# route (no origin), `tls-idle.py --plain --request` on CPU 1; Pss of the gateway from
# /proc/PID/smaps_rollup, one second after each batch is open.
#
#   loadtests/bench/idle-marginal.sh BIN [DRIVER [COUNT]]     # DRIVER io_uring|epoll, COUNT 8000
#   MIMALLOC_ARENA_EAGER_COMMIT=0 loadtests/bench/idle-marginal.sh BIN   # no huge pages in mimalloc's arena
#
# Prints one line: first batch and second batch KiB per connection, and AnonHugePages. Needs
# 2 x COUNT + 1024 file descriptors.
set -euo pipefail

BIN=${1:?usage: idle-marginal.sh BIN [DRIVER [COUNT]]}
DRIVER=${2:-io_uring}
COUNT=${3:-8000}
DIR=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$DIR"' EXIT
PORT=$((20000 + RANDOM % 20000))
cat >"$DIR/gateway.toml" <<EOT
[server]
workers = 1
io_driver = "$DRIVER"
admin = false
log_level = "warn"
[server.limits]
max_connections_per_worker = $((2 * COUNT + 1024))
[server.timeouts]
header_read = "120s"
idle = "120s"
[[listeners]]
name = "plain"
address = "127.0.0.1:$PORT"
[[routes]]
name = "all"
match = { path_prefix = "/" }
direct_response = { status = 200, body = "ok" }
EOT
root_args=()
[[ $(id -u) == 0 ]] && root_args=(--allow-root)
taskset -c 0 "$BIN" run --config "$DIR/gateway.toml" "${root_args[@]}" >"$DIR/gateway.log" 2>&1 &
GW=$!
PIDS+=("$GW")
sleep 1
pss() { awk '/^Pss:/ {print $2}' "/proc/$GW/smaps_rollup"; }
huge() { awk '/^AnonHugePages:/ {print $2}' "/proc/$GW/smaps_rollup"; }
before=$(pss)
after=()
for batch in 1 2; do
    taskset -c 1 python3 "$(dirname "$0")/tls-idle.py" --port "$PORT" --count "$COUNT" --request --plain \
        >"$DIR/client$batch.txt" 2>&1 &
    PIDS+=("$!")
    for ((i = 0; i < 600; i++)); do
        grep -qs '^READY ' "$DIR/client$batch.txt" && break
        sleep 0.1
    done
    grep -q "^READY opened=$COUNT " "$DIR/client$batch.txt" || {
        echo "batch $batch: $(head -n 2 "$DIR/client$batch.txt")" >&2
        exit 1
    }
    sleep 1
    after+=("$(pss)")
done
awk -v d="$DRIVER" -v n="$COUNT" -v p0="$before" -v p1="${after[0]}" -v p2="${after[1]}" -v h="$(huge)" \
    'BEGIN { printf "%s: first batch %.2f KiB/conn, second batch %.2f KiB/conn (%d each; AnonHugePages %d kB)\n", d, (p1 - p0) / n, (p2 - p1) / n, n, h }'
