#!/usr/bin/env bash
# Thirtieth session: issue 21's table on the shipped code (the default plan
# against the fused, no-pairs and unfused plans, each pipeline's floor in
# the same run), Nsight Compute on the cells whose target is missed and on
# the same pipelines at 8192^2, then every GPU suite and the fusion
# sanitizers. Reports in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
gpu_line
issue_pipes "$OUT"
for s in 4096x4096 8192x8192; do ncu_gray "$u/bin/cbi-bench" $s "$OUT/ncu-gray-$s.txt"; done
for p in unsharp dog; do
  for s in 4096x4096 8192x8192; do ncu_blend "$u/bin/cbi-bench" apps/bench/pipelines/$p.json $s "$OUT/ncu-$p-$s.txt"; done
done
gpu_suites
echo "${SECONDS}s"
