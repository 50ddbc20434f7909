#!/usr/bin/env bash
# Twenty-first session, call 5: the final code. A user's run (user_run.sh:
# one 4096^2 photo with no flags against OpenCV, a batch against the
# codec-only bound); the issue's pipelines with their floors (call 4's
# runs); Nsight Compute's counts; the GPU suites and sanitizers. Everything
# also goes to $OUT/log.txt; the CSVs in one tarball.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
c=/tmp/call5; mkdir -p $c
{
  gpu_line; nproc
  . apps/bench/issue21_calls/user_run.sh
  issue_pipes $c
  ncu_gray $u/bin/cbi-bench 8192x8192 $c/ncu-8192.txt
  ncu_gray $u/bin/cbi-bench 4096x4096 $c/ncu-4096.txt
  checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" \
    test_fusion test_defaults test_filters_cuda
  echo "${SECONDS}s"
} 2>&1 | tee $OUT/log.txt
tar -C $c -cJf $OUT/call5.tar.xz .
