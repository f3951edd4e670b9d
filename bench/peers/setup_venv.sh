#!/usr/bin/env bash
# The Python peers of bench/bench_peers.py, in a venv (never the system Python):
# numpy, onnxruntime, ctranslate2, onnx (torch.onnx.export), safetensors, and
# PyTorch from PyPI (MKL) without its ~3 GB of CUDA wheels (/work/shared/BUILD-NOTES.md):
#   1. pip download --no-deps torch; pip install --no-deps that wheel, then its pure
#      Python dependencies (filelock sympy networkx jinja2 fsspec typing_extensions mpmath);
#   2. pip install --no-deps the CUDA wheels torch loads at import and the CUDA toolkit at
#      /usr/local/cuda lacks, pinned as the wheel's METADATA says (bench/peers/torch_pins.py);
#   3. $VENV/bin/with-libs CMD...: runs CMD with LD_LIBRARY_PATH set to those packages'
#      lib/ folders and /usr/local/cuda/lib64 (bench/peers/run.sh uses it).
# Usage: bench/peers/setup_venv.sh      (venv: $BENCH_VENV, default build/bench-venv;
#                                         base interpreter: $PYTHON, default python3)
# Idempotent: what is installed already is skipped. Reaches Debian and PyPI only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
PY=${PYTHON:-python3}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}
t0=$(date +%s)
installed=()

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating venv $VENV ($("$PY" --version 2>&1), $(command -v "$PY"))"
    "$PY" -m venv "$VENV"
    installed+=("venv")
fi
vpy="$VENV/bin/python"
pip=("$vpy" -m pip --disable-pip-version-check)
has() { "${pip[@]}" show -q "$1" >/dev/null 2>&1; }

# 1. small wheels that install directly
need=()
for p in numpy onnxruntime ctranslate2 onnx safetensors; do has "$p" || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}"
    "${pip[@]}" install -q "${need[@]}"
    installed+=("${need[@]}")
fi

# 2. torch without its CUDA dependencies
if ! has torch; then
    dl=$(mktemp -d "${TMPDIR:-/tmp}/bench-venv-dl.XXXXXX")
    trap 'rm -rf "$dl"' EXIT
    echo "downloading torch (--no-deps)"
    "${pip[@]}" download -q --no-deps torch -d "$dl"
    whl=$(ls "$dl"/torch-*.whl)
    echo "installing $(basename "$whl") --no-deps (pip's warning that torch's CUDA" \
         "requirements are not installed is expected)"
    "${pip[@]}" install -q --no-deps "$whl"
    "${pip[@]}" install -q filelock sympy networkx jinja2 fsspec typing_extensions mpmath
    mapfile -t pins < <("$vpy" "$ROOT/bench/peers/torch_pins.py" "$whl" --cuda-lib "$CUDA_LIB" \
                        --download-dir "$dl")
    if [ ${#pins[@]} -gt 0 ]; then
        echo "installing --no-deps ${pins[*]}"
        "${pip[@]}" install -q --no-deps "${pins[@]}"
    fi
    installed+=("$(basename "$whl")" filelock sympy networkx jinja2 fsspec typing_extensions mpmath "${pins[@]}")
fi

# 3. the wrapper that puts the CUDA wheels' lib/ folders on LD_LIBRARY_PATH
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
libdirs=$(find "$site/nvidia" "$site"/nvidia_* "$site"/cusparselt -maxdepth 3 -type d -name lib \
          2>/dev/null | sort | tr '\n' ':' || true)
cat > "$VENV/bin/with-libs" <<WRAP
#!/bin/sh
# Written by bench/peers/setup_venv.sh: runs "\$@" with the CUDA wheels' lib/ folders
# (that PyPI torch loads at import) and $CUDA_LIB on LD_LIBRARY_PATH.
export LD_LIBRARY_PATH="${libdirs}${CUDA_LIB}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$@"
WRAP
chmod +x "$VENV/bin/with-libs"

# check, and say what is there
"$VENV/bin/with-libs" "$vpy" - <<'CHECK'
import importlib
for m in ["numpy", "onnxruntime", "ctranslate2", "onnx", "safetensors", "torch"]:
    mod = importlib.import_module(m)
    extra = ""
    if m == "torch":
        extra = f" (MKL: {mod.backends.mkl.is_available()}, threads {mod.get_num_threads()})"
    if m == "ctranslate2":
        extra = f" (CPU compute types: {sorted(mod.get_supported_compute_types('cpu'))})"
    print(f"  {m:<12} {mod.__version__}{extra}")
CHECK
if [ ${#installed[@]} -gt 0 ]; then
    echo "installed into $VENV: ${installed[*]}"
else
    echo "nothing to install: $VENV is complete"
fi
echo "run with: bench/peers/run.sh [bench_peers.py args]   ($(( $(date +%s) - t0 )) s)"
