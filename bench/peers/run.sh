#!/bin/sh
# Runs bench/bench_peers.py with the venv of bench/peers/setup_venv.sh
# ($BENCH_VENV, default build/bench-venv) and its LD_LIBRARY_PATH wrapper.
# Usage: bench/peers/run.sh [bench_peers.py args]   e.g. bench/peers/run.sh --quick
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
if [ ! -x "$VENV/bin/with-libs" ]; then
    echo "no venv at $VENV: run bench/peers/setup_venv.sh first" >&2
    exit 1
fi
exec "$VENV/bin/with-libs" "$VENV/bin/python" "$ROOT/bench/bench_peers.py" "$@"
