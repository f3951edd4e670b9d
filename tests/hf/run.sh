#!/usr/bin/env bash
# ctest's entry to the Hugging Face tests: runs tests/hf/SCRIPT (bert_test.py by
# default) in the venv tests/hf/setup_venv.sh makes (transformers, PyPI torch).
# Without that venv it prints why and exits 77, which ctest reports as skipped.
# Usage: tests/hf/run.sh TFC TFRUN WORKDIR [SCRIPT [ARGS...]]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
if [ ! -x "$VENV/bin/with-libs" ] || \
   ! HF_HUB_OFFLINE=1 "$VENV/bin/with-libs" "$VENV/bin/python" -c 'import transformers, torch' \
     >/dev/null 2>&1; then
  echo "SKIPPED: no venv with transformers and torch at $VENV; make it with tests/hf/setup_venv.sh"
  exit 77
fi
rm -rf "$3"
# Not from the source tree: a triton/ folder beside the script would shadow the package.
cd "$(dirname "$3")"
HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error "$VENV/bin/with-libs" "$VENV/bin/python" \
  "$ROOT/tests/hf/${4:-bert_test.py}" "$1" "$2" "$3" "${@:5}"
