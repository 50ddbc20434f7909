#!/usr/bin/env bash
# Twenty-fifth session, call 8: test_fusion and test_defaults with a
# Gaussian before a Gaussian or a Sobel fused by default (the bundle), and
# the pair sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.PairsMeasured*:Fusion.DefaultStreamSchedules*' test_fusion test_defaults
