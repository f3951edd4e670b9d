#!/usr/bin/env bash
# Builds the libFuzzer targets into ./build-fuzz (clang, ASan + UBSan; see
# docs/testing.md) and runs each for SECONDS (default 60) on its corpus in
# tests/fuzz/corpus/<target>. Exits non-zero on any finding; the crashing input
# is left as build-fuzz/findings/<target>/crash-* (or leak-*, oom-*, timeout-*).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    e.g. scripts/fuzz.sh 3600 fuzz_npy
#
# Environment: FUZZ_BUILD_DIR (build-fuzz), FUZZ_JOBS (build jobs, 2),
# FUZZ_ARGS (extra libFuzzer flags), FUZZ_NO_BUILD=1 (use what is built).
# New inputs that add coverage go to build-fuzz/corpus/<target>, not to the
# checked-in seeds, so a run never dirties the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
ALL_TARGETS=(fuzz_model_load fuzz_model_run fuzz_safetensors fuzz_npy fuzz_yaml
  fuzz_hf_dir)
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
B=${FUZZ_BUILD_DIR:-build-fuzz}
CLANG=${CLANG:-clang}
CLANGXX=${CLANGXX:-clang++}

if [[ -z "${FUZZ_NO_BUILD:-}" ]]; then
  if [[ ! -f "$B/build.ninja" ]]; then
    cmake -G Ninja -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTFC_FUZZ=ON \
      -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="$CLANGXX" > /dev/null
  fi
  cmake --build "$B" -j "${FUZZ_JOBS:-2}" --target "${TARGETS[@]}"
fi

# The build lock (/tmp/tfc-build.lock) serialises heavy work on shared
# machines; take it for the runs unless a caller already holds it.
run_locked() {
  if [[ -z "${TFC_LOCK_HELD:-}" ]] && command -v flock > /dev/null && [[ -e /tmp/tfc-build.lock ]]; then
    TFC_LOCK_HELD=1 flock /tmp/tfc-build.lock "$@"
  else
    "$@"
  fi
}

# Fatal UBSan, no leak-check noise from MLIR's global registries, and a
# deterministic report for every crash.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

failed=()
for t in "${TARGETS[@]}"; do
  seeds=tests/fuzz/corpus/$t
  work=$B/corpus/$t
  findings=$B/findings/$t
  mkdir -p "$work" "$findings"
  echo "== $t: ${SECONDS_PER_TARGET}s on $seeds"
  log=$B/findings/$t.log
  # -rss_limit_mb: an input that makes the code allocate past 2 GiB is a
  # finding (a size taken from the file without a check).
  if run_locked "$B/bin/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/" ${FUZZ_ARGS:-} "$work" "$seeds" > "$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' "$log" | tr '\n' ' '
    echo
  else
    echo "!! $t: finding (log: $log)"
    grep -E 'ERROR: |runtime error:|SUMMARY|^    #[0-9] ' "$log" | head -12 || true
    failed+=("$t")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: findings in ${failed[*]} (inputs under $B/findings/)"
  exit 1
fi
echo "fuzz: ${TARGETS[*]}: no finding in ${SECONDS_PER_TARGET}s each"
