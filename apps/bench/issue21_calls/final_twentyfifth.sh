#!/usr/bin/env bash
# Twenty-fifth session, calls 4 and 6 (on an H100): the last commit's code (the
# full bundle): every GPU suite (the *Cli* tests left out, as bundle/run.sh
# does: they run the build tree's cbi-filter), the fusion sanitizers, the
# issue's pipelines with their floors, a user's run.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
for t in test_tuning test_devices; do
  "$u/bin/$t" --gtest_brief=1 --gtest_filter=-*Cli* > "/tmp/$t.log" 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' "/tmp/$t.log" | tr '\n' ' ')"
done
suites test_cuda_errors test_cuda_wait test_jpeg_gpu test_graph test_schedules
final_checks
d=/tmp/call4; mkdir -p $d
issue_pipes $d
cp $d/final-*.csv $OUT/
. apps/bench/issue21_calls/user_run.sh
