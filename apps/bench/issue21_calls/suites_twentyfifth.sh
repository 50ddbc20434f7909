#!/usr/bin/env bash
# Twenty-fifth session, call 9 (on an H100): the last commit's code (the
# full bundle at 6afb8fc): every GPU suite (the *Cli* tests left out, as
# bundle/run.sh does), the fusion sanitizers, and the gray pipeline's
# default plan on a 1920x1080 image.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
python3 -c "import cv2; cv2.imwrite('/tmp/hd.png', cv2.resize(cv2.imread('bundle/samples/butterfly.jpg'), (1920, 1080)))"
$u/bin/cbi-filter /tmp/hd.png --pipeline "color:gray | gaussian:5 | sobel:mag" --device cuda --print-pipeline
$u/bin/cbi-filter /tmp/hd.png --pipeline "gaussian:3 | gaussian:3" --device cuda --print-pipeline | tail -3
