#!/usr/bin/env bash
# Twenty-first session, call 4: a 3x3 Sobel magnitude's sum of squares by
# one exact FMA and the output bytes packed by permutes (new: bundle/),
# against hi (call 3's kept build, as bundle-extra/hi-bin.tar.xz), in turn,
# twice; then the new build on the issue's pipelines with their floors
# (final3_nineteenth.sh's runs), Nsight Compute's counts, the GPU suites and
# sanitizers. Everything goes back in one tarball.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call4; mkdir -p $d
unpack hi; mkdir -p /tmp/new/bin && cp $u/bin/cbi-bench /tmp/new/bin/
in_turn $d 100000 hi new
issue_pipes $d
ncu_gray $u/bin/cbi-bench 8192x8192 $d/ncu-new.txt
checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" \
  test_fusion test_defaults test_filters_cuda
tar -C $d -cJf $OUT/call4.tar.xz .
