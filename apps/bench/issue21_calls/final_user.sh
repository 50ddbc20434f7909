#!/usr/bin/env bash
# Call 10: GPU suites and sanitizers on the final code; one photo and a batch of 16 MP photos against OpenCV / the codec-only bound.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
SECONDS=0
suites test_filters_cuda test_fusion test_defaults
sanitize 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.GrayPairs*:Fusion.Blends*'
compute-sanitizer --tool memcheck --error-exitcode 99 $u/bin/test_filters_cuda --gtest_brief=1 --gtest_filter='*Stream*' > /tmp/mc2.log 2>&1
echo "memcheck test_filters_cuda *Stream* rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/mc2.log | tr '\n' ' ') ${SECONDS}s"
. apps/bench/issue21_calls/user_run.sh
