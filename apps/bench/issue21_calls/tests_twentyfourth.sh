#!/usr/bin/env bash
# Twenty-fourth session, call 8 (on an H100): test_fusion with a 3-channel
# gaussian:5 | sobel:mag pair on stream:WxH added (the constant weights on
# 3 channels), and its pair tests under memcheck and racecheck.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion
