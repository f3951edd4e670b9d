#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, and runs
# ctest (GoogleTest units and the lit suite: IR, frontend diagnostics, models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j 2
