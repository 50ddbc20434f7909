#!/usr/bin/env bash
# Twenty-fourth session, call 3 (on an H100): the new code (blk: the bundle)
# against the previous commit (cur, bundle-extra/curpro.tar.xz) in turn,
# twice: the issue's pipelines 640x480 to 8192^2 with their floors, single
# 8-bit stencils on the default table's choice; then the new code's pair
# kernel under Nsight Compute (occupancy, and the stall reasons per issued
# instruction) at 4096^2 and 8192^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds blk curpro.tar.xz
suites test_fusion test_defaults
d=/tmp/call3; mkdir -p $d
three_run=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192
           --filter gaussian:9 --filter sobel:mag --schedule default "${three_args[@]}"
           --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json)
one_run=(--size 4096x4096 --size 8192x8192 --filter gaussian:9 --filter sobel:mag --schedule default "${one_args[@]}")
table_variants=fused,default builds_in_turn $d 420 cur blk
for s in 4096x4096 8192x8192; do
  ncu_gray /tmp/blk/bin/cbi-bench $s $d/ncu-$s.txt
  timeout 60 ncu -k regex:chain_stream -c 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio" \
    /tmp/blk/bin/cbi-bench --suite filters --image 8u:3 --size $s --filter sobel:mag --schedule stream:256x16 \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $d/stalls-$s.txt 2>&1
  echo "stalls $s rc=$? ${SECONDS}s"; grep -E "stalled" $d/stalls-$s.txt | sort -k3 -g -r | head -8
done
tar -C $d -cJf $OUT/call3.tar.xz .
