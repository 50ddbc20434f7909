#!/usr/bin/env bash
# Twenty-first session, call 1: the pair kernel's rings in shared memory
# (slots cycle by index; no register moves) at three register caps. The new
# build's tests and sanitizers (bundle/: the rings in shared memory, cap 72),
# then, as xz tarballs of bin/cbi-bench in bundle-extra/: base (7adf07d,
# rings in registers), smem72, smem56, smem48 (the same code capped at 72,
# 56, 48 registers), in turn, twice; Nsight Compute on base and the fastest.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
builds=(base smem72 smem56 smem48)
for b in "${builds[@]}"; do unpack $b; done
one_args+=(--pipeline "blur:3 | gaussian:5")
VARIANTS=all in_turn $OUT 420 "${builds[@]}"
for b in base smem56; do
  [ $SECONDS -gt 500 ] && break
  ncu_gray /tmp/$b/bin/cbi-bench 8192x8192 $OUT/ncu-$b.txt WarpStateStats
done
for b in base smem56; do sass_gray /tmp/$b/bin/cbi-bench $OUT/sass-$b.txt; done
