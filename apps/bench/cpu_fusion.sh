#!/usr/bin/env bash
# Stencil pairs and chains on the CPU: cbi's default plan against every
# fusion the CPU takes (--fuse-stencils) and none (--no-fuse), and OpenCV's
# calls, in one process per line (cbi-chain-bench); two rounds.
#   apps/bench/cpu_fusion.sh BUILD_DIR THREADS [PHOTO]
set -euo pipefail
build=${1:?build directory}
threads=${2:?threads}
photo=${3:-$(dirname "$0")/../../samples/butterfly.jpg}
chains=("gaussian:5 | sobel:mag" "blur:3 | gaussian:5" "gaussian:9 | sobel:x" "blur:5 | sobel:mag:5"
        "color:gray | gaussian:5 | sobel:mag")
for round in 1 2; do
    for size in 1024 2048 4096; do
        for chain in "${chains[@]}"; do
            runs=$((size >= 4096 ? 11 : 31))
            "$build/cbi-chain-bench" "$photo" --chain "$chain" --size "$size" --threads "$threads" --runs "$runs"
        done
    done
done
