#!/usr/bin/env bash
# Twenty-fourth session, call 5 (on an H100): the final code (the full
# bundle): every GPU suite, the fusion sanitizers, the issue's pipelines
# with their floors (issue_pipes), then a user's run (user_run.sh).
# test_tuning's and test_devices's *Cli* tests need the build tree's
# cbi-filter and fail here (bundle/run.sh leaves them out).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
suites test_tuning test_devices test_cuda_errors test_cuda_wait test_jpeg_gpu
final_checks
d=/tmp/call5; mkdir -p $d
issue_pipes $d
cp $d/*.csv $OUT/
. apps/bench/issue21_calls/user_run.sh
