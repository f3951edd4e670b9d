#!/usr/bin/env bash
# ctest python-text: tests/python/text_test.py (the text helpers against
# transformers) in the venv of tests/hf/setup_venv.sh (transformers, PyPI torch,
# tokenizers, sentencepiece, tqdm), after `pip install --no-deps .` there (the
# build folder is python-install's, so this rebuilds nothing). Without that venv it
# prints why and exits 77 (skipped).
# Usage: tests/python/run_text.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
if [ ! -x "$VENV/bin/with-libs" ] || ! HF_HUB_OFFLINE=1 "$VENV/bin/with-libs" "$VENV/bin/python" \
     -c 'import transformers, torch, tokenizers, sentencepiece, tqdm' > /dev/null 2>&1; then
  echo "SKIPPED: no venv with transformers, torch, tokenizers, sentencepiece and tqdm at $VENV;"
  echo "make it with tests/hf/setup_venv.sh"
  exit 77
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
cd "$ROOT"
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps \
     --force-reinstall . > "$VENV.tfc-install.log" 2>&1; then
  cat "$VENV.tfc-install.log"
  echo "FAILED: pip install --no-deps . into $VENV"
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tfc-python-text.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"  # outside the tree: only the installed tfc can be imported
TFC_SOURCE_DIR="$ROOT" HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error "$VENV/bin/with-libs" "$VENV/bin/python" \
  "$ROOT/tests/python/text_test.py"
