#!/usr/bin/env bash
# Twenty-sixth session, call 10: after the review's refactor (4590b00: pair
# row sums without the compile-time use check, the finish picked in one
# branch; ptxas registers and spills unchanged): test_fusion, test_defaults,
# test_filters_cuda and the fusion sanitizers; the blends once; a user's run
# (user_run.sh: the gray pipeline on one 4096^2 JPEG with no flags against
# OpenCV, a batch of 32 against the codec-only bound) and the unsharp mask.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
final_checks
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 "${blend_args[@]}" --runs 20 --csv "$OUT/blends.csv" > /tmp/b.txt 2>&1
echo "blends rc=$? ${SECONDS}s"; grep -hE "DIFFERS|error|FAIL" /tmp/b.txt | head
python3 apps/bench/issue21_calls/pipes_table.py "$OUT" blends
. apps/bench/issue21_calls/user_run.sh
. apps/bench/issue21_calls/user_unsharp_twentysixth.sh
