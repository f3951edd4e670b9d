#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, then compile the
# trained demo model (models/demo-reverse.yaml: the FloydHub tutorial's Transformer,
# trained by scripts/train_demo.py to reverse digit strings) and generate with it:
# tfrun runs the whole greedy decoding loop, with its KV cache, inside the runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p build/demo
set -x
./build/bin/tfc compile models/demo-reverse.yaml --weights models/demo-reverse.safetensors \
  --report -o build/demo/demo-reverse.bin
/usr/bin/python3 scripts/demo_reverse.py encode 31415 9876543210 271 80486 123123 \
  -o build/demo/src.npy
./build/bin/tfrun build/demo/demo-reverse.bin --generate --input src=build/demo/src.npy
./build/bin/tfrun build/demo/demo-reverse.bin --generate --input src=build/demo/src.npy \
  --beam 3 --output-dir build/demo
/usr/bin/python3 scripts/demo_reverse.py check build/demo/src.npy build/demo
