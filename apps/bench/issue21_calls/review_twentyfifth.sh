#!/usr/bin/env bash
# Twenty-fifth session, call 13: after the review's refactor (chain_taps_are
# checks weights and biases in one loop): test_fusion, test_defaults, the
# pair sanitizers, and the gray pair kernel's instruction count at 4096^2
# (call 5: 24,327,392 with the constant-bias kernel picked).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.PairsMeasured*:Fusion.DefaultStreamSchedules*' test_fusion test_defaults
timeout 60 ncu -k regex:chain_stream -c 1 --section InstructionStats --section SpeedOfLight $u/bin/cbi-bench --suite filters --image 8u:3 \
  --size 4096x4096 --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu.txt 2>&1
grep -E "Duration|Executed Instructions  " /tmp/ncu.txt
