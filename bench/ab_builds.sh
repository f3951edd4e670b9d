#!/usr/bin/env bash
# A/B of two builds of tfc on the same models and inputs: did a change (a
# refactor, a new kernel path) move the speed? Each build compiles the models
# itself (so each runs its own plan and format), then the two builds' tfrun
# alternate for ROUNDS rounds of `tfrun --bench N` (interleaved, so the
# machine's drift hits both alike), and the medians and their ratio are
# printed, at 1 and 2 threads.
#
#   bench/ab_builds.sh A_BUILD_DIR B_BUILD_DIR [ROUNDS]
#
# Models (random weights; shapes of the peer benchmarks, bench/bench_*.py):
#   embed:     BERT at MiniLM-L6's shape (d 384, 6 layers, 12 heads, FFN 1536),
#              32 rows of 20-40 tokens, forward;
#   translate: tutorial-floydhub at OPUS-MT's shape (d 512, 6+6 layers, 8 heads,
#              FFN 2048, vocabularies 8000), 8 sources of 12-20 tokens, beam 4,
#              24 new tokens;
# each in f32 and int8. Prints one line per (model, precision, threads):
#   embed f32 t1: A 41.2 ms  B 40.9 ms  B/A 0.993
# Needs /usr/bin/python3 with numpy (for the inputs).
set -euo pipefail
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 - "$W" <<'EOF'
import sys
import numpy as np
w = sys.argv[1]
rng = np.random.default_rng(0)
lens = rng.integers(20, 41, 32)
ids = np.zeros((32, lens.max()), np.int64)
for i, n in enumerate(lens):
    ids[i, 0], ids[i, 1:n - 1], ids[i, n - 1] = 101, rng.integers(1000, 30522, n - 2), 102
np.save(f"{w}/tokens.npy", ids)
np.save(f"{w}/token_types.npy", np.zeros_like(ids))
lens = rng.integers(12, 21, 8)
src = np.zeros((8, lens.max()), np.int64)
for i, n in enumerate(lens):
    src[i, :n - 1], src[i, n - 1] = rng.integers(3, 8000, n - 1), 2
np.save(f"{w}/src.npy", src)
EOF
EMBED=(--set d_model=384 --set heads=12 --set d_ff=1536 --set layers=6 --set max_batch=32)
TRANSLATE=(--set d_model=512 --set heads=8 --set d_ff=2048 --set layers=6 --set src_vocab=8000
           --set tgt_vocab=8000 --set max_len=64 --set max_batch=32)
for side in A B; do
  dir=${!side}
  for p in f32 int8; do
    "$dir/bin/tfc" compile "$ROOT/models/bert.yaml" "${EMBED[@]}" --precision "$p" \
      -o "$W/$side-embed-$p.bin" 2>/dev/null
    "$dir/bin/tfc" compile "$ROOT/models/tutorial-floydhub.yaml" "${TRANSLATE[@]}" \
      --precision "$p" -o "$W/$side-translate-$p.bin" 2>/dev/null
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
run() { # side model precision threads -> ms
  local dir=${!1} args
  if [[ $2 == embed ]]; then
    args=(--input "tokens=$W/tokens.npy" --input "token_types=$W/token_types.npy" --bench 5)
  else
    args=(--generate --input "src=$W/src.npy" --beam 4 --max-len 24 --bench 2)
  fi
  "$dir/bin/tfrun" "$W/$1-$2-$3.bin" --threads "$4" "${args[@]}" |
    sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | head -1
}
for model in embed translate; do
  for p in f32 int8; do
    for t in 1 2; do
      : > "$W/a" && : > "$W/b"
      for ((r = 0; r < ROUNDS; ++r)); do
        run A "$model" "$p" "$t" >> "$W/a"
        run B "$model" "$p" "$t" >> "$W/b"
      done
      ma=$(median < "$W/a")
      mb=$(median < "$W/b")
      printf '%s %s t%s: A %s ms  B %s ms  B/A %.3f\n' "$model" "$p" "$t" "$ma" "$mb" \
        "$(echo "$mb / $ma" | bc -l)"
    done
  done
done
