#!/usr/bin/env bash
# Twenty-second session, call 7: the final code (bundle/, with gray pairs
# ending in a 3x3 Sobel fused from 7 MP): the GPU suites and sanitizers; a
# 12 MP JPEG (butterfly.jpg resized to 4000x3000) through the gray pipeline
# with no schedule flag on the GPU: the plan, and the output against
# --no-fuse's, byte for byte.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
final_checks
d=/tmp/photo; mkdir -p $d
python3 -c "import cv2; m = cv2.imread('bundle/samples/butterfly.jpg'); assert cv2.imwrite('$d/12mp.jpg', cv2.resize(m, (4000, 3000), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 92])"
P="color:gray | gaussian:5 | sobel:mag"
$u/bin/cbi-filter $d/12mp.jpg --pipeline "$P" --device cuda --print-pipeline | grep -E "fused|kernels"
for i in 1 2 3; do
  t0=$(date +%s.%N); $u/bin/cbi-filter $d/12mp.jpg --pipeline "$P" --device cuda -o $d/fused.png; t1=$(date +%s.%N)
  $u/bin/cbi-filter $d/12mp.jpg --pipeline "$P" --device cuda --no-fuse -o $d/plain.png; t2=$(date +%s.%N)
  awk -v a=$t0 -v b=$t1 -v c=$t2 'BEGIN { printf "  whole process: default %.3f s, --no-fuse %.3f s\n", b - a, c - b }'
done
cmp $d/fused.png $d/plain.png && echo "default and --no-fuse outputs: identical"
