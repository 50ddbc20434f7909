#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: installs what is
# missing, builds Release into build/, then
#   scripts/setup.sh demo   runs cbi-filter on a sample photo (build/butterfly-blur9.png)
#   scripts/setup.sh test   runs the whole test suite through ctest
# Idempotent: a second run installs nothing and rebuilds only what changed.
# The CUDA backend is built when nvcc is found (PATH or /usr/local/cuda);
# set CBI_WITH_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ "$mode" != demo ] && [ "$mode" != test ]; then
  echo "usage: scripts/setup.sh demo|test" >&2
  exit 2
fi

packages=(build-essential cmake pkg-config libopencv-dev libtbb-dev libcli11-dev libgtest-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing packages; run this first:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=$PATH:/usr/local/cuda/bin; fi
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA="${CBI_WITH_CUDA:-AUTO}"
cmake --build build -j"$jobs"

if [ "$mode" = demo ]; then
  ./build/cbi-filter samples/butterfly.jpg --blur 9 --schedule column:32 -o build/butterfly-blur9.png
  echo "setup: wrote build/butterfly-blur9.png"
else
  ctest --test-dir build --output-on-failure -j"$jobs"
fi
