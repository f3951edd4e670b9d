#!/usr/bin/env bash
# Packs what the CUDA checks need for a GPU machine that has the CUDA toolkit and
# PyTorch but not this tree's toolchain (LLVM/MLIR, oneDNN, OpenBLAS): the CUDA-built
# binaries, the system libraries they load, model.bin files compiled here, and the
# prepared encoder benchmark (bench/bench_cuda.py --prepare). Run.sh, beside this file,
# unpacks and runs it there.
#
#   scripts/gpu-check/pack.sh [BUNDLE_DIR]     (default .gpu-bundle; BUILD_DIR=build;
#                                               NO_BENCH=1: without the benchmarks' models;
#                                               LLM=1: with make_llm.py's LLMs, ~10 MB)
#
# The bundle is one xz tarball (about 45 MB), because the device tool carries at most
# 64 MiB and oneDNN plus OpenBLAS alone are 77 MB. .gpu-bundle is git-ignored: a copy
# of the tree for the GPU machine must take it along explicitly.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build}
OUTDIR=${1:-.gpu-bundle}
PY=${PYTHON:-$BUILD/bench-venv/bin/python}
grep -q "TFC_HAVE_CUDA:INTERNAL=ON\|TFC_HAVE_CUDA.*ON" "$BUILD/CMakeCache.txt" 2>/dev/null ||
  [[ -f "$BUILD/lib/libtfrun_cuda.so" ]] || { echo "pack.sh: $BUILD has no CUDA backend" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/b/bin" "$stage/b/lib" "$stage/b/models" "$stage/b/testmodels" "$OUTDIR"
cp "$BUILD"/bin/{tfrun,tfc-backend-kernel-tests,tfrun-tests,tfrun-engine-tests,tfc-bench-attention-cuda,tfc-bench-linear-cuda} \
  "$stage/b/bin/"
cp -a "$BUILD"/lib/libtfrun.so* "$BUILD"/lib/libtfrun_cuda.so* "$stage/b/lib/"
# The non-CUDA system libraries the binaries load (ldd names them); the CUDA ones
# (cudart, cuBLAS, cuBLASLt) come from the GPU machine's toolkit.
for bin in "$BUILD"/bin/tfc-backend-kernel-tests "$BUILD"/bin/tfrun-tests "$BUILD"/lib/libtfrun.so; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt)\.so|/usr/local/cuda|/build/lib/' |
  while read -r lib; do cp -L "$lib" "$stage/b/lib/"; done
# The model.bin files the runtime tests name by absolute path.
cp "$BUILD"/tests/*.bin "$stage/b/testmodels/"
echo "$ROOT/$BUILD/tests" > "$stage/b/testmodels/PATH"
# ... and the format-5 fixture the engine tests refuse, by its source path.
mkdir -p "$stage/b/fixtures"
cp tests/lit/runtime/Inputs/v5/floydhub-bf16.bin "$stage/b/fixtures/"
echo "$ROOT/tests/lit/runtime/Inputs/v5" > "$stage/b/fixtures/PATH"
# Small models compiled here, run on the CPU and on CUDA there (run.sh compares).
TFC="$BUILD/bin/tfc"
small=(--set d_model=64 --set heads=4 --set d_ff=128 --set layers=2)
"$TFC" compile models/tutorial-floydhub.yaml -o "$stage/b/models/floydhub.bin" "${small[@]}" \
  --set src_vocab=500 --set tgt_vocab=500 --set max_len=64 --seed 3
"$TFC" compile models/tutorial-floydhub.yaml -o "$stage/b/models/floydhub-bf16.bin" "${small[@]}" \
  --set src_vocab=500 --set tgt_vocab=500 --set max_len=64 --seed 3 --precision bf16
"$TFC" compile models/tutorial-floydhub.yaml -o "$stage/b/models/floydhub-int8.bin" "${small[@]}" \
  --set src_vocab=500 --set tgt_vocab=500 --set max_len=64 --seed 3 --precision int8
"$TFC" compile models/torch-transformer.yaml -o "$stage/b/models/torch-transformer.bin" "${small[@]}" \
  --set src_vocab=500 --set tgt_vocab=500 --set max_len=64 --set pe_len=64 --seed 4
"$TFC" compile models/gpt2.yaml -o "$stage/b/models/gpt2.bin" "${small[@]}" \
  --set vocab=1000 --set max_len=128 --seed 5 --set bos_id=1 --set eos_id=2
"$TFC" compile models/bert.yaml -o "$stage/b/models/bert.bin" "${small[@]}" \
  --set vocab=1000 --set max_len=128 --seed 6
# The LLaMA family (rotary, grouped-query attention, RMS norm, SwiGLU, q/k norms) and
# T5 (relative position bias), from small Hugging Face directories (make_hf.py).
hfdir="$stage/hf"
"$PY" scripts/gpu-check/make_hf.py "$hfdir"
for m in llama-gqa llama-mqa qwen3 gemma2 t5; do
  "$TFC" compile "$hfdir/$m" -o "$stage/b/models/$m.bin"
done
# ... and int8 (a scale per group of 32) and int4 weights: Llama's untied lm_head,
# Qwen3's tied to its token table.
for m in llama-gqa qwen3; do
  for p in int8 int4; do
    "$TFC" compile "$hfdir/$m" -o "$stage/b/models/$m-$p.bin" --precision $p
  done
done
rm -rf "$hfdir"
# LLM=1: Qwen2.5-0.5B's and Llama-3.2-1B's shapes in f32, int8 and int4 (weights that
# compress: make_llm.py), for bench_llm.py; each model.bin xz'd on its own (10 GB
# of model.bin in about 10 MB), so the bundle's own xz need not read them.
if [[ "${LLM:-0}" == 1 ]]; then
  llm="$stage/llm-src"
  "$PY" scripts/gpu-check/make_llm.py "$llm"
  mkdir -p "$stage/b/llm"
  cp "$llm"/prompt*.npy "$stage/b/llm/"
  for m in qwen2.5-0.5b llama-3.2-1b; do
    for p in f32 int8 int4; do
      "$TFC" compile "$llm/$m" -o "$stage/b/llm/$m-$p.bin" --precision $p 2>/dev/null
      xz -T2 -1 "$stage/b/llm/$m-$p.bin"
    done
    rm -rf "${llm:?}/$m"
  done
fi
# NO_BENCH=1 leaves the encoder benchmark out (a bundle of ~20 MB, packed in seconds).
if [[ "${NO_BENCH:-0}" != 1 ]]; then
  "$PY" bench/bench_cuda.py --prepare "$stage/b/bench" --build "$BUILD"
fi
tar -C "$stage" -cf - b | xz -T2 -6 > "$OUTDIR/bundle.tar.xz"
ls -la "$OUTDIR/bundle.tar.xz"
