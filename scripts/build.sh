#!/usr/bin/env bash
# Configures and builds tfc into ./build (Ninja, ccache when present). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache keys on the compile command, which names sources by absolute path:
# with the checkout as the base, paths inside it are made relative, so a fresh
# clone in another folder (CI's) hits what an earlier build here cached.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
# 2 jobs: each MLIR translation unit needs ~350 MB and this is a 2-core machine.
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
