#!/usr/bin/env bash
# Call 9: the final build (16 MP rule, one halo lane): GPU tests and sanitizers; a user's run, order alternating.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
. apps/bench/issue21_calls/common.sh
SECONDS=0
suites test_fusion test_defaults
sanitize 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.GrayPairs*:Fusion.Blends*'
d=/tmp/e; rm -rf $d; mkdir -p $d
python3 -c "
import cv2; m = cv2.imread('bundle/samples/butterfly.jpg')
cv2.imwrite('$d/in24.jpg', cv2.resize(m, (6000, 4000), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 95])
cv2.imwrite('$d/in16.jpg', cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 95])"
P="color:gray | gaussian:5 | sobel:mag"
run() {  # size flags
  local t0 t1; t0=$(date +%s.%N); $u/bin/cbi-filter $d/in$1.jpg --pipeline "$P" --device cuda $2 -o "$d/out$1$2.png" || echo FAIL; t1=$(date +%s.%N)
  awk -v f="$2" -v a=$t0 -v b=$t1 -v s=$1 'BEGIN { printf "%s MP cbi-filter --device cuda %s: %.3f s\n", s, f, b - a }'
}
for s in 16 24; do
  $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda --print-pipeline | tail -1
  $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda -o $d/warm.png
  for i in 1 2 3; do
    if [ $((i % 2)) = 1 ]; then run $s ""; run $s --no-fuse; else run $s --no-fuse; run $s ""; fi
  done
  cmp $d/out$s.png "$d/out$s--no-fuse.png" && echo "$s MP: default and --no-fuse byte-identical"
  for flags in "" "--no-fuse"; do
    echo "$s MP $flags $(/usr/bin/time -v $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda $flags -o $d/o.png 2>&1 | grep -E 'Maximum resident')"
  done
done
echo "${SECONDS}s"
