#!/usr/bin/env bash
# ctest python-install: the issue's check as a user runs it. A fresh venv
# (VENV, default build/python-venv, made anew each time), `pip install .` from the
# source tree, then, from outside the tree, `import tfc` compiles, runs, generates
# and streams. The other python-* tests run in this venv (ctest fixture python-venv).
# PyPI out of reach (nanobind, scikit-build-core and numpy come from it) or no
# `python3 -m venv`: prints why and exits 77, which ctest reports as skipped.
# Usage: tests/python/install.sh [VENV]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${1:-$ROOT/build/python-venv}
PY=${PYTHON:-python3}
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
if ! "$PY" -m venv "$VENV" > "$VENV.log" 2>&1; then
  echo "SKIPPED: '$PY -m venv' failed (on Debian: apt-get install python3-venv):"
  cat "$VENV.log"
  exit 77
fi
# The build runs under the project's 2-job rule; the build folder persists
# (pyproject.toml's build-dir), so only the first install builds everything.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
cd "$ROOT"
t0=$(date +%s)
# With the [serve] extra, as the README's `tfc serve` recipe installs it.
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check ".[serve]" > "$VENV.log" 2>&1; then
  if grep -q -E "No matching distribution|Could not find a version|NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution" "$VENV.log"; then
    echo "SKIPPED: PyPI is out of reach (pip install .[serve] needs scikit-build-core, nanobind, numpy, ...):"
    tail -5 "$VENV.log"
    exit 77
  fi
  cat "$VENV.log"
  echo "FAILED: pip install .[serve] (log above)"
  exit 1
fi
echo "pip install . took $(( $(date +%s) - t0 )) s"
# From outside the source tree, so that nothing but the installed package is found.
work=$(mktemp -d "${TMPDIR:-/tmp}/tfc-python-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
TFC_MODELS="$ROOT/models" "$VENV/bin/python" -c '
import os, sys, numpy as np, tfc
site = os.path.realpath(os.path.join(sys.prefix, "lib"))
assert os.path.realpath(tfc.__file__).startswith(site), (tfc.__file__, site)
m = tfc.compile(os.environ["TFC_MODELS"] + "/tutorial-floydhub.yaml", set={"d_model": 32,
    "heads": 4, "d_ff": 64, "layers": 1, "max_len": 16, "max_batch": 4, "src_vocab": 40,
    "tgt_vocab": 40})
s = m.session(threads=1)
src = np.array([[3, 14, 15, 9, 26]])
logits = s.run({"src": src, "tgt": np.array([[1, 5, 6]])})["logits"]
assert logits.shape == (1, 3, 40) and logits.dtype == np.float32, logits.shape
g = s.generate({"src": src}, max_len=8)
streamed = [t.token_id for t in s.generate_tokens({"src": src}, max_len=8)]
assert streamed == g[0].ids and len(g[0].ids) > 0, (streamed, g)
print("import tfc from", os.path.dirname(tfc.__file__), "- compiled, ran", logits.shape,
      "- generated", g[0].ids, "score %.4f" % g[0].score, "- streamed", streamed)
'
# The venv's `tfc` command (the package's console script): `tfc serve` is the
# server's, every other command the bundled compiler's.
serve_help=$("$VENV/bin/tfc" serve --help)
[[ "$serve_help" == *"--api-key"* ]] || { echo "FAILED: tfc serve --help: $serve_help"; exit 1; }
compile_help=$("$VENV/bin/tfc" compile --help)
[[ "$compile_help" == *"USAGE: tfc compile"* ]] || { echo "FAILED: tfc compile --help"; exit 1; }
echo "the venv's tfc command: tfc serve --help and tfc compile --help answered"
