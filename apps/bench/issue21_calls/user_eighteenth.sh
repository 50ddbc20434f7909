#!/usr/bin/env bash
# Eighteenth session, call 9: the final code (after the review, chain_gray
# both checks and packs the gray weights). A user's run first (user_run.sh:
# one 4096^2 photo with no flags against OpenCV, a batch against the
# codec-only bound), then the GPU suites and sanitizers. Everything also goes to $OUT/log.txt.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
{
  gpu_line; nproc
  . apps/bench/issue21_calls/user_run.sh
  checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.Blends*' test_fusion test_defaults test_filters_cuda
  echo "${SECONDS}s"
} 2>&1 | tee $OUT/log.txt
