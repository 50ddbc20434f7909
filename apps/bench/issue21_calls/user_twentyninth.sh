#!/usr/bin/env bash
# Twenty-ninth session, user's check (9d14288's cbi-filter, with nvJPEG):
# one 4096^2 JPEG to PNG with no flag beyond the pipeline (unsharp mask,
# difference of Gaussians) against OpenCV in Python doing the same, order
# alternating; a batch of 32 such JPEGs to JPEG with no --device (the batch
# rule's choice) against the codec-only bound in the same call.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
cat > /tmp/ocv.py <<'PY'
import sys, time
t0 = time.time()
import cv2
job, src, dst = sys.argv[1:4]
img = cv2.imread(src)
if job == "dog":
    out = cv2.addWeighted(cv2.GaussianBlur(img, (5, 5), 0), 4, cv2.GaussianBlur(img, (9, 9), 0), -4, 128)
else:
    out = cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (9, 9), 0), -0.5, 0)
cv2.imwrite(dst, out)
print(f"  OpenCV (Python): {time.time() - t0:.3f} s")
PY
for job in unsharp dog; do
  echo "== one photo (4096^2 JPEG) -> PNG: $job"
  for i in 1 2 3; do
    t0=$(date +%s.%N); $u/bin/cbi-filter $d/in/img000.jpg --pipeline-file apps/bench/pipelines/$job.json -o $d/cbi-$job.png; t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter: %.3f s\n", b - a }'
    python3 /tmp/ocv.py $job $d/in/img000.jpg $d/ocv-$job.png
  done
  python3 -c "
import cv2; a = cv2.imread('$d/cbi-$job.png'); b = cv2.imread('$d/ocv-$job.png')
print('  cbi vs OpenCV: max |diff|', int(cv2.absdiff(a, b).max()), 'pixels differing', int((a != b).sum()), 'of', a.size)"
done
echo "== batch: 32 JPEGs of 4096^2 -> JPEG, no --device, dog.json"
for r in 1 2; do
  rm -rf $d/out; t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>&1
  t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter batch: %.2f s, %.2f images/s (whole process)\n", b - a, 32 / (b - a) }'
  grep -E '^wall|^device' /tmp/bs.txt | sed 's/^/    /'
done
ls $d/out | wc -l
codec_only $d/in jpg
python3 -c "import cv2; cv2.imwrite('$OUT/unsharp-preview.png', cv2.resize(cv2.imread('$d/cbi-unsharp.png'), (1024, 1024), interpolation=cv2.INTER_AREA))"
