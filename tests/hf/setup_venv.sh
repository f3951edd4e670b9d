#!/usr/bin/env bash
# The venv the Hugging Face tests (tests/hf) run in: bench/peers/setup_venv.sh's venv
# (numpy, safetensors, PyPI torch without its CUDA wheels) plus transformers,
# tokenizers, and sentencepiece and tqdm (the Python package's text helpers,
# tests/python/run_text.sh), all from PyPI (never the system Python). The tests build random-weight
# checkpoints locally (save_pretrained); nothing is downloaded at test time.
# Usage: tests/hf/setup_venv.sh   (venv: $BENCH_VENV, default build/bench-venv)
# Idempotent: what is installed already is skipped.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export BENCH_VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
"$ROOT/bench/peers/setup_venv.sh"
vpy="$BENCH_VENV/bin/python"
need=()
# starlette, uvicorn, prometheus-client, jinja2 and openai: `tfc serve` and the
# official OpenAI client its test (tests/python/serve_test.py) talks to it with.
for p in transformers tokenizers sentencepiece tqdm jinja2 starlette uvicorn \
         prometheus-client openai; do
  "$vpy" -m pip --disable-pip-version-check show -q "$p" >/dev/null 2>&1 || need+=("$p")
done
# Ray with Serve and Data (tfc.ray; tests/python/ray_test.py). pyarrow marks Data.
"$vpy" -c 'import ray.serve, ray.data, pyarrow' >/dev/null 2>&1 || need+=("ray[serve,data]")
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  "$vpy" -m pip --disable-pip-version-check install -q "${need[@]}"
fi
HF_HUB_OFFLINE=1 "$BENCH_VENV/bin/with-libs" "$vpy" -c \
  'import transformers, tokenizers; print("  transformers", transformers.__version__, "tokenizers", tokenizers.__version__)'
