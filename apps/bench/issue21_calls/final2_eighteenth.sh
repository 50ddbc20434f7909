#!/usr/bin/env bash
# Eighteenth session, call 6: the final code (pairs ending in a 3x3 Sobel
# fuse by default). GPU suites and sanitizers; the issue's pipelines with
# their floors (default, no-pairs, unfused); a user's run of the new default
# on a 24 MP photo, whole process, against --no-fuse. Test counts print last.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.Blends*' test_fusion test_defaults test_filters_cuda > /tmp/suites.txt
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
  --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
  --runs 20 --csv $OUT/final-3.csv > /tmp/f3.txt 2>&1; echo "8u:3 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:1 --size 1920x1080 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "blur:3 | sobel:x" \
  --runs 20 --csv $OUT/final-1.csv > /tmp/f1.txt 2>&1; echo "8u:1 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/f3.txt /tmp/f1.txt | head
python3 - $OUT <<'PY'
import csv, sys
for n in ("final-3", "final-1"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        print(f'{r["workload"][:36]:36s} {r["variant"]:14s} {r["width"]:>5s}x{r["height"]:<5s} c{r["channels"]} {float(r["median_ms"]):.4f} ms {float(r["x_floor"]):.2f}x floor')
PY
d=/tmp/u; rm -rf $d; mkdir -p $d
python3 -c "
import cv2; m = cv2.imread('bundle/samples/butterfly.jpg')
assert cv2.imwrite('$d/in.jpg', cv2.resize(m, (6000, 4000), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 95])"
P="gaussian:5 | sobel:mag"
$u/bin/cbi-filter $d/in.jpg --pipeline "$P" --device cuda --print-pipeline | tail -1
$u/bin/cbi-filter $d/in.jpg --pipeline "$P" --device cuda --no-fuse --print-pipeline | tail -1
for i in 1 2 3; do
  order="default no-fuse"; [ $i = 2 ] && order="no-fuse default"
  for v in $order; do
    f=""; [ $v = no-fuse ] && f=--no-fuse
    TIMEFORMAT="  $v: %R s"; time $u/bin/cbi-filter $d/in.jpg --pipeline "$P" --device cuda $f -o $d/$v.png
  done
done
cmp $d/default.png $d/no-fuse.png && echo "  outputs byte-identical"
cat /tmp/suites.txt
