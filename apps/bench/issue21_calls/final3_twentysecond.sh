#!/usr/bin/env bash
# Twenty-second session, call 8: the last commit (bundle/ of 5f3900e):
# the GPU suites and sanitizers, then a user's run (user_run.sh: one 4096^2
# JPEG with no schedule flag against OpenCV in Python, a batch of 32 against
# the codec-only bound in the same call).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
final_checks
. apps/bench/issue21_calls/user_run.sh
