#!/usr/bin/env bash
# Twenty-ninth session: the batch rule on a mixed folder: a 640x480 JPEG
# first (by name), then 31 JPEGs of 4096^2; the difference of Gaussians.
# The default's device (its --stats) and time against --device cpu and cuda.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in $d/mix
photos4096 $d/in
python3 -c "import cv2; cv2.imwrite('$d/mix/a-small.jpg', cv2.resize(cv2.imread('bundle/samples/butterfly.jpg'), (640, 480)))"
for f in $(ls $d/in | head -31); do ln -s $d/in/$f $d/mix/$f; done
for dev in default cpu cuda default; do
  extra=(); [ $dev != default ] && extra=(--device $dev)
  rm -rf $d/out; t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/mix --output-dir $d/out --pipeline-file apps/bench/pipelines/dog.json "${extra[@]}" --stats > /tmp/o.txt 2>&1
  t1=$(date +%s.%N)
  echo "$dev: $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.3f s", b - a }'), $(grep -o '^device [^,]*' /tmp/o.txt | tr '\n' ' ') outputs $(ls $d/out | wc -l)"
done
