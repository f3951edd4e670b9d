#!/usr/bin/env bash
# ctest python-text (and avx2/python-text): tests/python/text_test.py (the text
# helpers; python-serve runs serve_test.py, `tfc serve`, the same way)
# helpers against transformers) in the venv of tests/hf/setup_venv.sh
# (transformers, PyPI torch, tokenizers, sentencepiece, tqdm), with the tfc package
# from SITE first on PYTHONPATH. ctest python-text-install fills SITE first
# (`run_text.sh --install SITE`: `pip install --no-deps --target SITE .`, whose
# build folder is python-install's, so it rebuilds nothing). The venv itself is
# never modified, so one venv can serve several build trees, and the capped and
# uncapped runs read the same install. Without that venv, or without SITE, it
# prints why and exits 77 (skipped).
# Usage: tests/python/run_text.sh [--install] SITE
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
install=0
if [[ "${1:-}" == "--install" ]]; then
  install=1
  shift
fi
SITE=${1:?usage: run_text.sh [--install] SITE [SCRIPT]}
# SCRIPT: text_test.py (ctest python-text) or serve_test.py (ctest python-serve, which
# also needs the serving packages and the openai client: tests/hf/setup_venv.sh).
SCRIPT=${2:-text_test.py}
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
if [ ! -x "$VENV/bin/with-libs" ] || ! HF_HUB_OFFLINE=1 "$VENV/bin/with-libs" "$VENV/bin/python" \
     -c 'import transformers, torch, tokenizers, sentencepiece, tqdm' > /dev/null 2>&1; then
  echo "SKIPPED: no venv with transformers, torch, tokenizers, sentencepiece and tqdm at $VENV;"
  echo "make it with tests/hf/setup_venv.sh"
  exit 77
fi
if [[ $install == 1 ]]; then
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
  cd "$ROOT"
  rm -rf "$SITE"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps \
       --target "$SITE" . > "$SITE.log" 2>&1; then
    if grep -q -E "No matching distribution|Could not find a version|NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution" "$SITE.log"; then
      echo "SKIPPED: PyPI is out of reach (the build needs scikit-build-core and nanobind):"
      tail -5 "$SITE.log"
      exit 77
    fi
    cat "$SITE.log"
    echo "FAILED: pip install --no-deps --target $SITE ."
    exit 1
  fi
  echo "tfc installed into $SITE for $VENV"
  exit 0
fi
if [[ "$SCRIPT" == serve_test.py ]] && ! "$VENV/bin/python" \
     -c 'import starlette, uvicorn, prometheus_client, jinja2, openai' > /dev/null 2>&1; then
  echo "SKIPPED: no starlette, uvicorn, prometheus-client, jinja2 and openai in $VENV;"
  echo "install them with tests/hf/setup_venv.sh"
  exit 77
fi
if [[ "$SCRIPT" == ray_test.py ]] && ! "$VENV/bin/python" \
     -c 'import ray.serve, ray.data, pyarrow, openai, starlette, uvicorn' > /dev/null 2>&1; then
  echo "SKIPPED: no ray[serve,data] (or the serving packages) in $VENV;"
  echo "install them with tests/hf/setup_venv.sh"
  exit 77
fi
if [ ! -f "$SITE/tfc/__init__.py" ]; then
  echo "SKIPPED: no tfc package in $SITE (ctest python-text-install puts it there)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tfc-python-text.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"  # outside the tree: only the installed tfc can be imported
TFC_SOURCE_DIR="$ROOT" TFC_TEXT_SITE="$SITE" PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" \
  HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error "$VENV/bin/with-libs" "$VENV/bin/python" \
  "$ROOT/tests/python/$SCRIPT"
