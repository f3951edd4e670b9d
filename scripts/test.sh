#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds, and runs
# ctest (GoogleTest units and the lit suite: IR, frontend diagnostics, models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The venv of the Hugging Face tests (transformers, PyPI torch; tests/hf). Without
# it (TFC_NO_HF_VENV=1, or PyPI out of reach) ctest reports hf-bert as skipped.
if [[ -z "${TFC_NO_HF_VENV:-}" ]]; then
  tests/hf/setup_venv.sh || echo "tests/hf/setup_venv.sh failed: the hf-bert test will be skipped"
fi
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}

# The installed package: build examples/embed against it (find_package(tfrun)) and
# run it on the model.bin the tests compiled.
rm -rf "$BUILD_DIR/install" "$BUILD_DIR/embed"
cmake --install "$BUILD_DIR" --prefix "$BUILD_DIR/install" > /dev/null
cmake -S examples/embed -B "$BUILD_DIR/embed" -G Ninja \
  -DCMAKE_PREFIX_PATH="$PWD/$BUILD_DIR/install" > /dev/null
cmake --build "$BUILD_DIR/embed" > /dev/null
LD_LIBRARY_PATH="$PWD/$BUILD_DIR/install/lib" "$BUILD_DIR/embed/embed" \
  "$BUILD_DIR/tests/floydhub-small.bin"
"$BUILD_DIR/install/bin/tfrun" "$BUILD_DIR/tests/floydhub-small.bin" > /dev/null
echo "examples/embed: built against the installed tfrun package and ran"
# The installed tfc starts and compiles (it needs LLVM/MLIR 16's shared
# libraries through its RUNPATH), and the installed tfrun runs what it wrote
# and prints its --info.
"$BUILD_DIR/install/bin/tfc" compile models/tutorial-simple.yaml --set d_model=32 \
  -o "$BUILD_DIR/install-check.bin"
"$BUILD_DIR/install/bin/tfrun" --info "$BUILD_DIR/install-check.bin"
echo "installed tfc and tfrun: compiled and ran models/tutorial-simple.yaml"

# The fuzzers (docs/testing.md), about 60 s each, when clang has libFuzzer.
# TFC_FUZZ_SECONDS sets the time per target; TFC_FUZZ_SECONDS=0 skips them.
FUZZ_SECONDS=${TFC_FUZZ_SECONDS:-60}
FUZZ_CLEAN=(fuzz_model_load fuzz_model_run fuzz_safetensors fuzz_npy fuzz_yaml
  fuzz_hf_dir)
probe=$(mktemp -d)
if [[ "$FUZZ_SECONDS" == 0 ]]; then
  echo "fuzzers: skipped (TFC_FUZZ_SECONDS=0)"
elif ! command -v clang++ > /dev/null; then
  echo "fuzzers: skipped (no clang++ on PATH; apt-get install clang)"
elif ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer,address,undefined - -o "$probe/probe" 2> /dev/null; then
  echo "fuzzers: skipped (clang++ cannot link -fsanitize=fuzzer,address,undefined; apt-get install libclang-rt-dev)"
else
  scripts/fuzz.sh "$FUZZ_SECONDS" "${FUZZ_CLEAN[@]}"
fi
rm -rf "$probe"

# Last, so its summary is the closing line.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2
