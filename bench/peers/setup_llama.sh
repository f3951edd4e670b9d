#!/usr/bin/env bash
# llama.cpp for bench/bench_llama.py, added to the bench venv (bench/peers/setup_venv.sh
# makes it first): llama-cpp-python from PyPI, which builds llama.cpp from its sdist
# (about 8 minutes on 2 cores), gguf and sentencepiece, and the sdist's vendored
# converter (convert_hf_to_gguf.py, its conversion/ package and gguf-py/) unpacked
# under $BENCH_VENV/llama.cpp-convert. Not part of scripts/test.sh: only the LLaMA
# benchmark needs it.
# Usage: bench/peers/setup_llama.sh     (venv: $BENCH_VENV, default build/bench-venv)
# Idempotent. Reaches PyPI only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
VERSION=0.3.36
"$ROOT/bench/peers/setup_venv.sh"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
if ! "${pip[@]}" show -q llama-cpp-python >/dev/null 2>&1; then
    echo "installing llama-cpp-python==$VERSION (builds llama.cpp: about 8 minutes on 2 cores)"
    CMAKE_ARGS="-DGGML_NATIVE=ON" "${pip[@]}" install -q "llama-cpp-python==$VERSION" gguf sentencepiece
fi
CONV="$VENV/llama.cpp-convert"
if [ ! -f "$CONV/convert_hf_to_gguf.py" ]; then
    tmp=$(mktemp -d)
    # The sdist itself (only it forced from source: its build dependencies come as
    # wheels, and reading its metadata compiles nothing).
    "${pip[@]}" download -q --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$VERSION" -d "$tmp"
    tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
    src=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
    mkdir -p "$CONV"
    cp -r "$src/convert_hf_to_gguf.py" "$src/gguf-py" "$CONV/"
    [ -d "$src/conversion" ] && cp -r "$src/conversion" "$CONV/"
    rm -rf "$tmp"
fi
echo "llama.cpp: $("$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)'), converter in $CONV"
