#!/usr/bin/env bash
# Twenty-fourth session, call 4 (on an H100): a Gaussian 5x5 of default
# sigma before a 3x3 Sobel magnitude with its weights as constants (b5: the
# bundle) against the code before it (blk: bundle-extra/blk-bin.tar.xz, as
# blk/bin). The bundle's fusion tests and sanitizers; the pairs in turn,
# twice; Nsight Compute on b5's gray pair kernel at 8192^2 and 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds b5 blk-bin.tar.xz
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
d=/tmp/call4; mkdir -p $d
three_run=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192
           --filter sobel:mag --schedule stream:256x16 "${three_args[@]}")
one_run=(--size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 "${one_args[@]}")
table_variants=fused,default builds_in_turn $d 300 blk b5
for s in 8192x8192 4096x4096; do
  for b in blk b5; do ncu_gray /tmp/$b/bin/cbi-bench $s $d/ncu-$b-$s.txt | grep -E "Duration|Executed Instructions|Issued Warp"; done
done
tar -C $d -cJf $OUT/call4.tar.xz .
