#!/usr/bin/env bash
# Every fuzz target for FUZZ_SECONDS each (default 15) on the STABLE toolchain, for CI: they keep
# building and keep finding nothing. No nightly and no cargo-fuzz needed: the targets are built
# with the coverage instrumentation `cargo fuzz build --sanitizer none` passes to rustc (all of it
# stable; only the sanitizers need nightly, see run.sh for those) and the libFuzzer that
# libfuzzer-sys compiles (needs a C++ compiler), then each binary is run by itself.
#
#   gateway/fuzz/ci.sh                     # all targets
#   FUZZ_SECONDS=60 gateway/fuzz/ci.sh chunked
#
# Inputs: seeds/<target>/ and regressions/<target>/ (read), corpus/<target>/ (grown, not
# committed). A crash, timeout, leak or out-of-memory fails the run: the input is copied to
# regressions/<target>/ (where `cargo test -p gateway --test fuzz_inputs` replays it from then
# on) and printed in hex, so it survives a CI machine that keeps nothing.
set -euo pipefail
cd "$(dirname "$0")"
FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
triple="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target}"
# As cargo-fuzz 0.13 sets them for `--sanitizer none` on Linux. `--target` keeps them off build
# scripts and proc macros.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 --cfg fuzzing"

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi

echo "== building ${#targets[@]} fuzz targets (stable, coverage instrumentation)" >&2
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo build --locked --profile fuzz-ci --target "$triple" "${bins[@]}"

mkdir -p logs
failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    inputs=("corpus/$t")
    for d in "seeds/$t" "regressions/$t"; do [ -d "$d" ] && inputs+=("$d"); done
    log="logs/$t.log"
    if "$CARGO_TARGET_DIR/$triple/fuzz-ci/$t" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 "${inputs[@]}" >"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        failed=1
        mkdir -p "regressions/$t"
        for a in "artifacts/$t"/*; do
            [ -f "$a" ] || continue
            cp "$a" "regressions/$t/"
            echo "!! $t: $(basename "$a") kept as gateway/fuzz/regressions/$t/$(basename "$a"); its bytes:" >&2
            od -An -tx1 -v "$a" | head -c 4096 >&2
        done
        tail -n 30 "$log" >&2
    fi
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)"
    summary+=("$(printf '%-16s %12s %8s' "$t" "${execs:-?}" "$result")")
done

printf '\n%-16s %12s %8s\n' target executions result >&2
printf '%s\n' "${summary[@]}" >&2
exit "$failed"
