#!/usr/bin/env bash
# Twenty-fourth session, call 2: blocks of as many warps as divide a row's
# chunks (blk: the bundle, with pro's first rows loaded at once) against
# pro and cur (the previous commit), cbi-bench of each in
# bundle-extra/curpro.tar.xz as cur/bin and pro/bin. The bundle's tests and
# sanitizers; then the three builds in turn, twice: the pairs, single 8-bit
# stencils on the default table's choice and the blends, 1920x1080 to 8192^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds blk curpro.tar.xz
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.Blends*' test_fusion test_defaults test_filters_cuda
d=/tmp/call2; mkdir -p $d
three_run=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192
           --filter gaussian:9 --filter sobel:mag --filter blur:9 --schedule default "${three_args[@]}"
           --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json)
one_run=(--size 4096x4096 --size 8192x8192 --filter gaussian:9 --filter sobel:mag --schedule default "${one_args[@]}")
table_variants=fused,default builds_in_turn $d 480 cur pro blk
tar -C $d -cJf $OUT/call2.tar.xz .
