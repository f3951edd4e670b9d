#!/bin/bash
# Host emulation of the CUDA backend, for checking its logic on a machine with
# the CUDA toolkit but no GPU (docs/backend-cuda.md, "How it was checked"). Not a
# substitute for a GPU: it checks indexing, masks, tiling, barriers and the
# runtime's CUDA executor (uploads, dtype conversion, device KV caches), not
# cuBLASLt's real behaviour, the memory model or speed.
#
#   scripts/cuda-emu/run.sh [BUILD_DIR]     (default /tmp/tfc-cuda-emu)
#
# The .cu sources are rewritten to C++ (gen.py: kernel<<<cfg>>>(args) becomes a
# launch on host threads, one per CUDA thread, with barriers for __syncthreads
# and warp shuffles), compiled with g++, and linked with emu_runtime.cc, a fake
# CUDA runtime and cuBLAS/cuBLASLt (a reference GEMM) on host memory. Then it
# runs the backend kernel tests, the runtime's DeviceRuntimeTest (CUDA
# against CPU logits and greedy tokens) and the engine's tests on the emulated
# device, and builds an
# emulated tfrun at BUILD_DIR/tfrun for end-to-end checks:
#   BUILD_DIR/tfrun model.bin --device cuda --dtype bf16 --input ...
# Needs a configured build tree in build/ (for the test model).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/tfc-cuda-emu}
mkdir -p "$OUT"
CXX="g++ -std=c++20 -O1 -g -fopenmp -I$ROOT -I$ROOT/include -I/usr/local/cuda/include -I$ROOT/scripts/cuda-emu"
python3 "$ROOT/scripts/cuda-emu/gen.py" "$ROOT/backends/cuda/kernels_cuda.cu" "$OUT/emu_kernels.cc"
python3 "$ROOT/scripts/cuda-emu/gen.py" "$ROOT/backends/cuda/attention_cuda.cu" "$OUT/emu_attention.cc"
python3 "$ROOT/scripts/cuda-emu/gen.py" "$ROOT/backends/cuda/quant_cuda.cu" "$OUT/emu_quant.cc"
objs=()
compile() { # source object [extra flags]
  $CXX "${@:3}" -c "$1" -o "$OUT/$2" && objs+=("$OUT/$2")
}
compile "$OUT/emu_kernels.cc" emu_kernels.o -I"$ROOT/backends/cuda" -x c++
compile "$OUT/emu_attention.cc" emu_attention.o -I"$ROOT/backends/cuda" -x c++
compile "$OUT/emu_quant.cc" emu_quant.o -I"$ROOT/backends/cuda" -x c++
compile "$ROOT/backends/cuda/context_cuda.cc" context_cuda.o
compile "$ROOT/backends/cuda/kernels_cuda.cc" kernels_cuda.o
compile "$ROOT/backends/cuda/linear_cuda.cc" linear_cuda.o
compile "$ROOT/scripts/cuda-emu/emu_runtime.cc" emu_runtime.o
cuda=("${objs[@]}")
objs=()
compile "$ROOT/format/model_bin.cc" rt_model_bin.o -DTFC_VERSION_STRING='"emu"'
compile "$ROOT/format/arena_plan.cc" rt_arena_plan.o
compile "$ROOT/format/kernel_schema.cc" rt_kernel_schema.o
compile "$ROOT/format/metadata.cc" rt_metadata.o
for f in runtime/model.cc runtime/capi.cc runtime/session.cc runtime/executor.cc \
         runtime/step_model.cc runtime/device_cpu.cc runtime/generate.cc runtime/generate_beam.cc runtime/engine.cc runtime/engine_api.cc runtime/engine_memory.cc runtime/engine_rows.cc runtime/kv_blocks.cc backends/cpu/kernels_cpu.cc backends/kernel_rules.cc backends/kernel_call.cc \
         backends/cpu/embedding_cpu.cc backends/cpu/linear_cpu.cc backends/cpu/pointwise_cpu.cc \
         backends/cpu/shape_cpu.cc backends/cpu/reduce_cpu.cc backends/cpu/elementwise_cpu.cc backends/cpu/search_cpu.cc \
         backends/cpu/linear_dnnl.cc backends/cpu/dnnl_cache.cc backends/cpu/attention_cpu.cc backends/cpu/attention_row.cc backends/cpu/layer_norm_cpu.cc \
         backends/cpu/convert_cpu.cc backends/cpu/cpu_isa.cc backends/cpu/gemm_s8_avx2.cc backends/cpu/gemm_q4_avx2.cc backends/cpu/weight_memory.cc \
         backends/cpu/convert_avx2.cc; do
  compile "$ROOT/$f" "rt_$(basename "$f").o" -march=x86-64-v3
done
compile "$ROOT/backends/cpu/convert_avx512.cc" rt_convert_avx512.o -march=x86-64-v3 \
  -mavx512f -mavx512bw -mavx512vl -mavx512dq
compile "$ROOT/backends/cpu/gemm_q_avx512.cc" rt_gemm_q_avx512.o -march=x86-64-v3 \
  -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
compile "$ROOT/runtime/device_cuda.cc" rt_device_cuda.o -DTFC_HAVE_CUDA=1
rt=("${objs[@]}")
objs=()
compile "$ROOT/tests/unit/kernels/KernelTest.cpp" KernelTest.o -DTFC_HAVE_CUDA=1
compile "$ROOT/tests/reference/Reference.cpp" Reference.o
$CXX "${objs[@]}" "${cuda[@]}" "${rt[@]}" -ldnnl -lxxhash -lgtest -lgtest_main -lpthread -o "$OUT/kernel-tests"
objs=()
compile "$ROOT/tests/unit/runtime/DeviceRuntimeTest.cpp" DeviceRuntimeTest.o \
  -DTFC_TEST_MODEL="\"$ROOT/build/tests/floydhub-small.bin\""
$CXX "${objs[@]}" "${cuda[@]}" "${rt[@]}" -ldnnl -lxxhash -lgtest -lgtest_main -lpthread -o "$OUT/runtime-tests"
objs=()
compile "$ROOT/tests/unit/runtime/EngineTest.cpp" EngineTest.o \
  -DTFC_ENGINE_GPT2="\"$ROOT/build/tests/gpt2-engine.bin\"" \
  -DTFC_ENGINE_FLOYDHUB="\"$ROOT/build/tests/floydhub-engine.bin\"" \
  -DTFC_ENGINE_OLD_MODEL="\"$ROOT/tests/lit/runtime/Inputs/v5/floydhub-bf16.bin\""
$CXX "${objs[@]}" "${cuda[@]}" "${rt[@]}" -ldnnl -lxxhash -lgtest -lgtest_main -lpthread -o "$OUT/engine-tests"
objs=()
compile "$ROOT/tools/tfrun/tfrun.cpp" tool_tfrun.o -I"$ROOT/tools/tfrun"
compile "$ROOT/tools/tfrun/npy.cpp" tool_npy.o -I"$ROOT/tools/tfrun"
$CXX "${objs[@]}" "${cuda[@]}" "${rt[@]}" -ldnnl -lxxhash -lpthread -o "$OUT/tfrun"
"$OUT/kernel-tests" --gtest_brief=1
"$OUT/runtime-tests" --gtest_brief=1
# The engine with every session and engine on the emulated device (no stress
# run: host threads per CUDA thread make it slow).
TFC_ENGINE_TEST_DEVICE=cuda "$OUT/engine-tests" --gtest_brief=1 --gtest_filter=-*Stress*
echo "emulated tfrun: $OUT/tfrun (--device cuda)"
