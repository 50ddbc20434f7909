#!/usr/bin/env bash
# Issue 22, call 3: --codec auto on two GPUs, before and after the cap on
# JPEGs waiting for the GPUs' decoders counts every device that decodes
# (pipeline/batch.cpp, kDeviceJpegs per device). Builds in turn, twice:
# old (bundle-extra/old-filter.tar.xz, cbi-filter of 977a42c) and new
# (bundle/). 1600 generated 2048x2048 JPEGs (q90), --blur 9 and
# color:gray|gaussian:5|sobel:mag, --device cuda:0, cuda:all, mpirun -n 2.
# The GPUs' utilisation each second at the end (nvidia-smi dmon).
# Run on the GPU host from the repository root: apps/bench/issue22/decoders.sh
set -uo pipefail
source apps/bench/issue22/common.sh
mkdir -p /tmp/old && tar -C /tmp/old -xJf bundle-extra/old-filter.tar.xz || exit 1
for round in 1 2; do
  for b in old new; do
    bin=$([ $b = old ] && echo /tmp/old/bin/cbi-filter || echo $u/bin/cbi-filter)
    for f in blur three; do
      args=(--input-dir $dir/in --stats); [ $f = blur ] && args+=(--blur 9) || args+=(--pipeline "color:gray|gaussian:5|sobel:mag")
      run "$b $f cuda:0" $bin "${args[@]}" --output-dir $dir/o --device cuda:0
      run "$b $f cuda:all" $bin "${args[@]}" --output-dir $dir/o --device cuda:all
      run "$b $f mpirun -n 2" mpirun -n 2 --bind-to none $bin "${args[@]}" --output-dir $dir/o --device cuda
    done
  done
done
finish
