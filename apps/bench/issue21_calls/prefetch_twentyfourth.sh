#!/usr/bin/env bash
# Twenty-fourth session, call 7 (on an H100), an experiment: the pair
# kernel asking L2 for the input row 3 (pf3) or 6 (pf6) rows ahead of the
# one it loads (prefetch.global.L2, one instruction a row, no registers),
# against the code without it (b5: 76f5918). All three as NAME/bin/cbi-bench
# in bundle-extra/prefetch.tar.xz. The pairs in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds bundle prefetch.tar.xz
d=/tmp/call7; mkdir -p $d
three_run=(--size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 "${three_args[@]}")
one_run=(--size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 "${one_args[@]}")
table_variants=fused,default builds_in_turn $d 400 b5 pf3 pf6
tar -C $d -cJf $OUT/call7.tar.xz .
