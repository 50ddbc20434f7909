#!/usr/bin/env bash
# Twenty-sixth session, call 1: blends of Gaussians with pair rows (dp2a row
# pass) and the integer finish. test_fusion and test_filters_cuda, the
# blend sanitizers, the issue's pipelines, and Nsight Compute on the unsharp
# mask's and the difference of Gaussians' blend kernels at 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.Blends*' test_fusion test_filters_cuda
issue_pipes "$OUT"
for p in unsharp dog; do
  ncu_blend $u/bin/cbi-bench apps/bench/pipelines/$p.json 4096x4096 "$OUT/ncu-$p.txt"
done
