#!/bin/sh
# Runs a peer benchmark with the venv of bench/peers/setup_venv.sh
# ($BENCH_VENV, default build/bench-venv) and its LD_LIBRARY_PATH wrapper:
# bench/bench_peers.py, or with a first argument `translate` / `embed` / `prefill` / `llama` /
# `service` bench/bench_<that>.py (those need transformers: tests/hf/setup_venv.sh
# adds it).
# Usage: bench/peers/run.sh [translate | embed | prefill | service | llama] [the script's args]
#   e.g. bench/peers/run.sh --quick; bench/peers/run.sh translate --quick
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${BENCH_VENV:-$ROOT/build/bench-venv}
if [ ! -x "$VENV/bin/with-libs" ]; then
    echo "no venv at $VENV: run bench/peers/setup_venv.sh first" >&2
    exit 1
fi
SCRIPT=bench_peers.py
case "$1" in
    translate|embed|prefill|service|llama) SCRIPT=bench_$1.py; shift ;;
esac
HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error exec "$VENV/bin/with-libs" "$VENV/bin/python" \
    "$ROOT/bench/$SCRIPT" "$@"
