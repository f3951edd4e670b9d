#!/usr/bin/env bash
# Installs the Debian packages tfc builds and tests with. Idempotent: it asks apt only
# for packages that are missing, so a second run costs a dpkg query and nothing else.
# Usage: scripts/setup.sh [--with-torch]   (--with-torch adds python3-torch, used only
# to regenerate goldens and to run the PyTorch side of the benchmarks).
set -euo pipefail

pkgs=(
  cmake ninja-build ccache g++ pkg-config
  llvm-16-dev llvm-16-tools libmlir-16-dev mlir-16-tools
  libdnnl-dev libopenblas-openmp-dev libyaml-cpp-dev nlohmann-json3-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy
)
if [[ "${1:-}" == "--with-torch" ]]; then
  pkgs+=(python3-torch)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
