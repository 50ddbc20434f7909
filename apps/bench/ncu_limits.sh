#!/usr/bin/env bash
# Nsight Compute on the fused pipelines at 4096^2 that stay above 2x their floor, for the
# measured reason: instructions executed, issue rate, occupancy, DRAM and SM
# throughput. On the GPU host, from a bundle made by scripts/gpu-bundle.sh:
#   OUT=dir apps/bench/ncu_limits.sh BUNDLE
# Results: docs/performance.md#what-limits-the-fused-pipelines.
b=${1:?usage: ncu_limits.sh BUNDLE}
OUT=${OUT:-/tmp/cbi-out}; mkdir -p "$OUT"
mkdir -p /tmp/cbi-bundle && [ -x /tmp/cbi-bundle/bin/cbi-bench ] || { tar -C /tmp/cbi-bundle -xJf "$b/libs.tar.xz" && tar -C /tmp/cbi-bundle -xJf "$b/bin.tar.xz"; }
export LD_LIBRARY_PATH=/tmp/cbi-bundle/lib:/usr/local/cuda/lib64
bench=/tmp/cbi-bundle/bin/cbi-bench
ncu=/usr/local/cuda/bin/ncu
prof() {  # name kernel-regex launch-count cbi-bench args...
  local name=$1 kern=$2 count=$3; shift 3
  $ncu --kernel-name regex:"$kern" --launch-skip 6 --launch-count $count --section SpeedOfLight --section Occupancy \
    --section SchedulerStats --section LaunchStats --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    $bench --border replicate --runs 20 --warmup 3 "$@" > $OUT/ncu-$name.txt 2>&1
  echo "== $name"
  grep -E '^  [a-z_]|Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|inst_executed|Waves Per SM' $OUT/ncu-$name.txt | sed 's/  */ /g' | head -40
}
prof blur31-8u3 sep_stencil 1 --filter blur:31 --image 8u:3 --schedule sep:32x32
prof blur31-32f1 sep_stencil 1 --filter blur:31 --image 32f:1 --schedule sep:64x32
prof blur9-32f1 sep_stencil 1 --filter blur:9 --image 32f:1 --schedule sep:128x32
prof gauss9-32f3 sep_stencil 1 --filter gaussian:9 --image 32f:3 --schedule sep:64x32
prof sepia-32f3 vec_color 1 --filter color:sepia --image 32f:3 --schedule vec:4
prof pipeline 'sep_stencil|stream8' 2 --filter color:sepia --image 8u:3 --schedule vec:8 --pipeline "color:gray | gaussian:5@sep:64x32 | sobel:mag@stream:256x16"
