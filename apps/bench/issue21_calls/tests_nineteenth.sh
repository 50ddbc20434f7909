#!/usr/bin/env bash
# Nineteenth session, call 4: the GPU suites and sanitizers on the final
# rule (smoothing pairs by samples), and what the executor plans for the
# smoothing pairs around the threshold.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
python3 -c "
import cv2, numpy as np
for w, h, c in ((3000, 2000, 1), (3000, 2000, 3), (1920, 1080, 3), (4096, 4096, 1)):
    cv2.imwrite(f'/tmp/plan-{w}x{h}-{c}.png', np.zeros((h, w, c) if c == 3 else (h, w), np.uint8))"
for f in 3000x2000-1 3000x2000-3 1920x1080-3 4096x4096-1; do
  echo "  $f blur:3 | gaussian:5: $($u/bin/cbi-filter /tmp/plan-$f.png --device cuda --pipeline 'blur:3 | gaussian:5' --print-pipeline | grep -c 'through line buffers') fused"
done
checks "Fusion.DefaultPairsTakeTheirStripHeightFromTheImage:Fusion.PairsMeasuredFaster*:Fusion.StreamPairs*:Fusion.StencilPairsOnStream*" \
  test_fusion test_defaults test_filters_cuda
