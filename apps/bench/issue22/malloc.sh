#!/usr/bin/env bash
# Issue 22, call 7: whether the batch waits on the kernel for its decoded
# images' memory. A 2048x2048 RGB image is 12.6 MB: glibc maps each such
# allocation afresh (mmap, page faults, munmap). The cbi-filter of the cap change on
# 1600 generated JPEGs (q90), --blur 9, --device cuda:0, --codec auto and
# cpu, as is and with glibc told to keep such blocks in its heaps
# (MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824), in
# turn, twice. From the repository root on the GPU host.
set -uo pipefail
source apps/bench/issue22/common.sh
heap=(env MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824)
for round in 1 2; do
  for codec in auto cpu; do
    run "$codec as is" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0 --codec $codec
    run "$codec heap" "${heap[@]}" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0 --codec $codec
  done
done
finish
