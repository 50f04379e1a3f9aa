#!/usr/bin/env bash
# Runs every cargo-fuzz target of the gateway for FUZZ_SECONDS each (default 60), one after
# the other on one job, and prints the executions per target. Installs the nightly toolchain
# and cargo-fuzz first if they are missing.
#
#   gateway/fuzz/run.sh                  # all targets, 60 s each
#   FUZZ_SECONDS=10 gateway/fuzz/run.sh chunked h1_request
#
# Exit status: 0 if no target found a crash, 1 otherwise (artifacts under gateway/fuzz/artifacts/).
set -euo pipefail

cd "$(dirname "$0")"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

mkdir -p logs
declare -A execs status
failed=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    echo "== $t: ${FUZZ_SECONDS}s" >&2
    if cargo +nightly fuzz run "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$FUZZ_SECONDS" -jobs=1 -workers=1 -print_final_stats=1 \
        >"logs/$t.log" 2>&1; then
        status[$t]=ok
    else
        status[$t]=CRASH
        failed=1
    fi
    # With -jobs, libFuzzer runs the target in a child process that logs to ./fuzz-<job>.log.
    if [ -f fuzz-0.log ]; then
        cat fuzz-0.log >>"logs/$t.log"
        rm -f fuzz-0.log
    fi
    execs[$t]=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
    tail -n 3 "logs/$t.log" >&2
done

printf '\n%-16s %14s %8s  %s\n' target executions result log
for t in "${targets[@]}"; do
    printf '%-16s %14s %8s  %s\n' "$t" "${execs[$t]:-?}" "${status[$t]}" "gateway/fuzz/logs/$t.log"
done
exit "$failed"
