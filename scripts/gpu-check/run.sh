#!/usr/bin/env bash
# Runs the CUDA checks on a GPU machine from the bundle pack.sh made (see there):
#   1. the CUDA instances of the kernel tests (tfc-backend-kernel-tests);
#   2. the runtime tests (tfrun-tests: CudaMatchesCpu, DeviceRuntime, the CPU ones),
#      and the engine's tests with every session and engine on the GPU;
#   3. compare.py: small compiled models on the CPU and on CUDA (forward and generation);
#   4. bench/bench_cuda.py --prebuilt: the encoder against PyTorch on the same GPU;
#   5. tfc-bench-attention-cuda: the fused attention against cuBLAS and cuDNN;
#   6. tfc-bench-linear-cuda: int8 and int4 linear layers against f32 and bf16;
#   7. compute-sanitizer memcheck over the CUDA kernel tests, where it works;
#   8. bench_llm.py, when the bundle has LLMs (pack.sh with LLM=1): tfrun --generate
#      at Qwen2.5-0.5B's and Llama-3.2-1B's shapes, prefill and decode tokens/s.
# Each step has its own time limit; logs go to $OUT (or ./gpu-check-out).
#
#   scripts/gpu-check/run.sh [BUNDLE_DIR]      (default .gpu-bundle; ONLY=NAME runs
#                                               that step alone, e.g. ONLY=bench-llm)
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUNDLE=${1:-.gpu-bundle}
LOGS=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$LOGS"
X=/tmp/tfc-gpu-check
rm -rf "$X" && mkdir -p "$X"
tar -C "$X" -xJf "$BUNDLE/bundle.tar.xz" 2>/dev/null ||
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$BUNDLE/bundle.tar.xz" "$X" || { echo "run.sh: cannot unpack the bundle"; exit 1; }
B=$X/b
# The runtime tests name their model.bin files by the absolute path of the build here.
mkdir -p "$(cat "$B/testmodels/PATH")" && cp "$B"/testmodels/*.bin "$(cat "$B/testmodels/PATH")/"
mkdir -p "$(cat "$B/fixtures/PATH")" && cp "$B"/fixtures/*.bin "$(cat "$B/fixtures/PATH")/"
cudalibs=$(for n in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libcudnn.so.9; do
  ldconfig -p | awk -v n="$n" '$1 == n {print $NF; exit}'
  find /usr/local/cuda/ /usr/local/cuda*/ /opt -name "$n" 2>/dev/null | head -1
done | xargs -r -n1 dirname | awk '!seen[$0]++' | paste -sd:)
export LD_LIBRARY_PATH=$B/lib:$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== machine"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
echo "cuda libraries: $cudalibs"; nproc; date -u
step() { # step NAME SECONDS CMD...
  local name=$1 secs=$2; shift 2
  [[ -n "${ONLY:-}" && "$name" != "$ONLY" ]] && return 0
  echo; echo "== $name (limit ${secs}s)"
  local t0=$SECONDS
  timeout -k 5 "$secs" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  echo "rc=$rc in $((SECONDS - t0))s"
  tail -n "${TAILN:-25}" "$LOGS/$name.log"
}
TAILN=30 step kernel-tests 90 "$B/bin/tfc-backend-kernel-tests" --gtest_filter='*cuda*' --gtest_brief=1
TAILN=30 step runtime-tests 90 "$B/bin/tfrun-tests" --gtest_brief=1
TAILN=30 step engine-tests 120 env TFC_ENGINE_TEST_DEVICE=cuda "$B/bin/tfrun-engine-tests" \
  --gtest_brief=1
TAILN=60 step compare 90 python3 scripts/gpu-check/compare.py "$B"
if [[ -d "$B/bench" ]]; then
  TAILN=40 step bench-encoder 150 env PYTHONUNBUFFERED=1 python3 bench/bench_cuda.py \
    --prebuilt "$B/bench" --build "$B"
fi
if [[ "${NO_BENCH:-0}" != 1 ]]; then
  TAILN=40 step bench-attention 90 "$B/bin/tfc-bench-attention-cuda" --runs 30 --warmup 5
fi
TAILN=20 step bench-linear 120 "$B/bin/tfc-bench-linear-cuda" --runs 30 --warmup 3
if command -v compute-sanitizer >/dev/null; then
  TAILN=15 step sanitizer 50 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/bin/tfc-backend-kernel-tests" --gtest_filter='*cuda_f16*:*cuda_f32*' --gtest_brief=1
fi
if [[ -d "$B/llm" && ( -z "${ONLY:-}" || "$ONLY" == bench-llm ) ]]; then
  (cd "$B/llm" && xz -d -T4 ./*.xz)
  TAILN=80 step bench-llm 240 python3 scripts/gpu-check/bench_llm.py "$B" "$B/llm" \
    ${LLM_PROFILE:+--profile}
fi
date -u
