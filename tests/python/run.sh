#!/usr/bin/env bash
# ctest's entry to the Python package's tests: runs tests/python/SCRIPT with the
# venv's python (VENV: tests/python/install.sh's, where `pip install .` put tfc),
# from a temporary folder outside the source tree, so only the installed package
# can be imported. Without that venv it prints why and exits 77 (skipped).
# Usage: tests/python/run.sh VENV SCRIPT
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$1
if ! "$VENV/bin/python" -c 'import tfc' > /dev/null 2>&1; then
  echo "SKIPPED: no venv with the tfc package at $VENV (ctest python-install makes it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tfc-python-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
TFC_SOURCE_DIR="$ROOT" "$VENV/bin/python" "$ROOT/tests/python/$2"
