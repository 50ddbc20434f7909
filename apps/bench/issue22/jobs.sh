#!/usr/bin/env bash
# Issue 22, call 5: --codec auto with more worker threads than cores. The
# GPU's hardware JPEG decode blocks its worker (cudaStreamSynchronize while
# it holds a decoder state; the others wait for a state), so up to 6 workers
# per device wait without using a core. The bundle's cbi-filter with
# --jobs 32 (the cores: the default), 44 and 56, in turn, twice; 1600
# generated 2048x2048 JPEGs (q90), --blur 9, --device cuda:0 and cuda:all;
# the GPUs' utilisation each second at the end. From the repository root on
# the GPU host.
set -uo pipefail
source apps/bench/issue22/common.sh
for round in 1 2; do
  for j in 32 44 56; do
    for dev in cuda:0 cuda:all; do
      run "jobs $j $dev" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device $dev --jobs $j
    done
  done
done
finish
