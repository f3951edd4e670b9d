#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, then compile a
# bundled model (tutorial-floydhub at a small size) to model.bin with its fusion
# report, and run it with tfrun.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
set -x
./build/bin/tfc compile models/tutorial-floydhub.yaml \
  --set d_model=64 --set heads=4 --set d_ff=128 --set layers=1 \
  --set src_vocab=100 --set tgt_vocab=100 --report -o build/quickstart.bin
./build/bin/tfrun build/quickstart.bin --profile
