#!/usr/bin/env bash
# Twenty-first session, call 3: a Sobel magnitude's high 16-bit lane made a
# float by one shift-and-add (hi), and the pair kernel capped at 64
# registers (r64). The bundle's tests and sanitizers (bundle/: hi at 72),
# then, as xz tarballs of bin/cbi-bench in bundle-extra/: cur (9706dd1),
# hi, r64 (cur at 64), hi64, in turn, twice; Nsight Compute's stall reasons
# on cur. Every CSV and report goes back in one tarball (a call returns 8 files).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
builds=(cur hi r64 hi64)
d=/tmp/call3; mkdir -p $d
for b in "${builds[@]}"; do unpack $b; done
in_turn $d 420 "${builds[@]}"
ncu_gray /tmp/cur/bin/cbi-bench 8192x8192 $d/ncu-cur.txt WarpStateStats
for b in cur hi; do sass_gray /tmp/$b/bin/cbi-bench $d/sass-$b.txt; done
tar -C $d -cJf $OUT/call3.tar.xz .
