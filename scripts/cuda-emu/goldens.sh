#!/bin/bash
# The CUDA path's "must match" checks on the emulated device (run.sh first):
# every golden model of tests/lit/runtime through `tfrun --device cuda` in f32
# (1e-4 absolute), f16 and bf16 (2e-2 of the largest |logit|), and greedy and
# beam generation of tests/lit/generate (identical tokens, scores within 1e-4).
#   scripts/cuda-emu/goldens.sh [BUILD_DIR]   (default /tmp/tfc-cuda-emu)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/tfc-cuda-emu}
cd "$ROOT"
fail=0
for f in bert gpt2 torch-transformer tutorial-codersarts tutorial-simple tutorial-wandb tutorial-floydhub; do
  t=tests/lit/runtime/$f.test
  c=$(grep "RUN: tfc compile" $t | grep -v "no-fusion\|precision" | head -1 |
      sed "s/# RUN: //; s#%models#models#; s#%golden#tests/golden#g; s#%t/fused.bin#$OUT/$f.bin#")
  r=$(grep "RUN: tfrun %t/fused.bin" $t | grep -v threads | head -1 |
      sed "s/# RUN: tfrun //; s#%golden#tests/golden#g; s#%t/fused.bin#$OUT/$f.bin#; s#--output-dir %t/fused##")
  build/bin/$c >/dev/null 2>&1 || { echo "$f: compile failed"; fail=1; continue; }
  for dt in f32 f16 bf16; do
    rm -rf "$OUT/o-$f-$dt"
    "$OUT/tfrun" $r --device cuda --dtype $dt --output-dir "$OUT/o-$f-$dt" >/dev/null ||
      { echo "$f $dt: run failed"; fail=1; continue; }
    out=$(ls "$OUT/o-$f-$dt"/*.npy | head -1)
    tol=$([ $dt = f32 ] && echo "--atol 1e-4" || echo "--rtol 2e-2")
    echo -n "$f $dt: "
    /usr/bin/python3 scripts/compare_npy.py "$out" tests/golden/$f/output.npy $tol || fail=1
  done
done
for f in tutorial-floydhub tutorial-wandb gpt2; do
  t=tests/lit/generate/$f.test
  c=$(grep "RUN: tfc compile" $t | head -1 |
      sed "s/# RUN: //; s#%models#models#; s#%golden-gen#tests/golden-gen#g; s#%t/m.bin#$OUT/g-$f.bin#")
  build/bin/$c >/dev/null 2>&1 || { echo "$f: compile failed"; fail=1; continue; }
  for kind in greedy beam; do
    line=$(grep "RUN: tfrun %t/m.bin --generate.*--output-dir %t/$kind\$" $t | head -1)
    [ -n "$line" ] || continue
    r=$(echo "$line" | sed "s/# RUN: tfrun //; s#%golden-gen#tests/golden-gen#g; s#%t/m.bin#$OUT/g-$f.bin#; s#--output-dir %t/$kind##")
    rm -rf "$OUT/gen-$f-$kind" && mkdir -p "$OUT/gen-$f-$kind"
    "$OUT/tfrun" $r --device cuda --output-dir "$OUT/gen-$f-$kind" >/dev/null ||
      { echo "$f $kind: run failed"; fail=1; continue; }
    echo -n "$f generate $kind: "
    /usr/bin/python3 scripts/compare_gen.py "$OUT/gen-$f-$kind" tests/golden-gen/$f/$kind | tail -1 || fail=1
  done
done
exit $fail
