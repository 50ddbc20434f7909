#!/usr/bin/env bash
# Thirtieth session, last call: the full bundle of the last commit (with
# nvJPEG): every GPU suite and the fusion sanitizers (gpu_suites); a user's
# runs: one 4096^2 JPEG to PNG against OpenCV in Python (JPEG inputs are now
# decoded by libjpeg-turbo directly), what a JPEG with a corrupt scan gives
# on the CPU and with --codec gpu, and a batch of 32 JPEGs against the
# codec-only bound in the same call.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
echo "${SECONDS}s"
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
cat > /tmp/ocv.py <<'PY'
import sys, time
t0 = time.time()
import cv2
src, dst = sys.argv[1:3]
img = cv2.imread(src)
cv2.imwrite(dst, cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (9, 9), 0), -0.5, 0))
print(f"  OpenCV (Python): {time.time() - t0:.3f} s")
PY
echo "== one photo (4096^2 JPEG) -> PNG: unsharp mask"
for i in 1 2 3; do
  t0=$(date +%s.%N); $u/bin/cbi-filter $d/in/img000.jpg --pipeline-file apps/bench/pipelines/unsharp.json -o $d/cbi.png; t1=$(date +%s.%N)
  awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter: %.3f s\n", b - a }'
  python3 /tmp/ocv.py $d/in/img000.jpg $d/ocv.png
done
python3 -c "
import cv2; a = cv2.imread('$d/cbi.png'); b = cv2.imread('$d/ocv.png')
print('  cbi vs OpenCV: max |diff|', int(cv2.absdiff(a, b).max()), 'samples differing', int((a != b).sum()), 'of', a.size)"
echo "== a JPEG whose scan is cut at a third, an end-of-image marker after it"
python3 -c "
d = open('$d/in/img000.jpg', 'rb').read(); open('$d/cut.jpg', 'wb').write(d[:len(d) // 3] + b'\xff\xd9')"
mkdir -p $d/cutdir && cp $d/cut.jpg $d/cutdir/ && cp $d/in/img001.jpg $d/cutdir/
for codec in auto gpu; do
  $u/bin/cbi-filter $d/cut.jpg --blur 3 --codec $codec -o $d/cut-$codec.png; echo "  one image, --codec $codec: rc=$? output: $(ls $d/cut-$codec.png 2>/dev/null | wc -l)"
  rm -rf $d/cutout; $u/bin/cbi-filter --input-dir $d/cutdir --output-dir $d/cutout --blur 3 --codec $codec --device cuda --stats 2>&1 | grep -E "error|files:|jpeg decodes" | sed 's/^/    /'
done
echo "== batch: 32 JPEGs of 4096^2 -> JPEG, no --device, dog.json"
for r in 1 2; do
  rm -rf $d/out; t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>&1
  t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter batch: %.2f s, %.2f images/s (whole process)\n", b - a, 32 / (b - a) }'
  grep -E '^wall|^device|^jpeg' /tmp/bs.txt | sed 's/^/    /'
done
ls $d/out | wc -l
codec_only $d/in jpg
echo "${SECONDS}s"
