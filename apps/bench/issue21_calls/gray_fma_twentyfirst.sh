#!/usr/bin/env bash
# Twenty-first session, call 2: the pair kernel's gray conversion rounded by
# one fused multiply-add (ffma), and the first stencil's column sums as
# partial sums that each input row extends (new = ffma + partial sums). The
# new build's tests and sanitizers (bundle/), then, as xz tarballs of
# bin/cbi-bench in bundle-extra/: base (7adf07d), ffma, new, in turn, twice;
# Nsight Compute on base and new; the new kernel's SASS.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
builds=(base ffma new)
for b in "${builds[@]}"; do unpack $b; done
three_args+=(--pipeline "color:gray | blur:3 | sobel:mag")
one_args+=(--pipeline "blur:3 | gaussian:5")
VARIANTS=fused,default,unfused in_turn $OUT 400 "${builds[@]}"
for b in base new; do
  [ $SECONDS -gt 480 ] && break
  ncu_gray /tmp/$b/bin/cbi-bench 8192x8192 $OUT/ncu-$b.txt
done
sass_gray /tmp/new/bin/cbi-bench $OUT/sass-new.txt
