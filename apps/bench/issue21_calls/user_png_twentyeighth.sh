#!/usr/bin/env bash
# Twenty-eighth session, call 1 (on an H100): the full bundle of the last
# commit's code (CPU blends a row at a time, PNGs deflated in bands):
# every GPU suite and the fusion sanitizers; then a user's runs on the
# 16-core host: one 4096^2 JPEG to PNG with no flag beyond the pipeline
# (the gray pipeline, the difference of Gaussians, the unsharp mask)
# against OpenCV in Python doing the same, order alternating, with cbi's
# --stats; and a batch of 32 such JPEGs to PNG (--device cuda) against the
# codec-only bound (OpenCV decode + PNG encode, one process per core) in
# the same call.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
gpu_suites
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
cat > /tmp/ocv.py <<'PY'
import sys, time
t0 = time.time()
import cv2, numpy as np
job, src, dst = sys.argv[1:4]
t1 = time.time(); img = cv2.imread(src); t2 = time.time()
if job == "gray":
    g = cv2.GaussianBlur(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), (5, 5), 0)
    out = np.clip(np.rint(cv2.magnitude(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1))), 0, 255).astype(np.uint8)
elif job == "dog":
    out = cv2.addWeighted(cv2.GaussianBlur(img, (5, 5), 0), 4, cv2.GaussianBlur(img, (9, 9), 0), -4, 128)
else:
    out = cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (9, 9), 0), -0.5, 0)
t3 = time.time(); cv2.imwrite(dst, out); t4 = time.time()
print(f"  OpenCV (Python): {t4 - t0:.3f} s (imports {t1 - t0:.3f}, read {t2 - t1:.3f}, filter {t3 - t2:.3f}, write {t4 - t3:.3f})")
PY
declare -A args=([gray]='--pipeline color:gray|gaussian:5|sobel:mag' [dog]='--pipeline-file apps/bench/pipelines/dog.json'
                 [unsharp]='--pipeline-file apps/bench/pipelines/unsharp.json')
for job in gray dog unsharp; do
  echo "== one photo (4096^2 JPEG) -> PNG: $job, no other flag, order alternating"
  for i in 1 2 3; do
    t0=$(date +%s.%N); $u/bin/cbi-filter $d/in/img000.jpg ${args[$job]} -o $d/cbi-$job.png --stats > /tmp/st.txt; t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter: %.3f s", b - a }'
    grep -E '^(device (cpu|cuda)|decode|run|encode)' /tmp/st.txt | awk '{printf " | %s %s", $1, $NF}'; echo
    python3 /tmp/ocv.py $job $d/in/img000.jpg $d/ocv-$job.png
  done
  python3 -c "
import cv2, os; a = cv2.imread('$d/cbi-$job.png', -1); b = cv2.imread('$d/ocv-$job.png', -1)
print('  cbi vs OpenCV: max |diff|', int(cv2.absdiff(a, b).max()), 'pixels differing', int((a != b).sum()), 'of', a.size, '; bytes', os.path.getsize('$d/cbi-$job.png'), os.path.getsize('$d/ocv-$job.png'))"
done
echo "== batch: 32 JPEGs of 4096^2 -> PNG, --device cuda, --pipeline-file dog.json"
for r in 1 2; do
  rm -rf $d/out; t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out --format png --device cuda ${args[dog]} --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
  t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter batch: %.2f s, %.2f images/s\n", b - a, 32 / (b - a) }'
done
grep -v '^$' /tmp/bs.txt | head -14 | sed 's/^/    /'
ls $d/out | head -2; ls $d/out | wc -l
codec_only $d/in png
echo "${SECONDS}s"
python3 -c "import cv2; a = cv2.imread('$d/cbi-dog.png'); cv2.imwrite('$OUT/dog-preview.png', cv2.resize(a, (1024, 1024), interpolation=cv2.INTER_AREA))"
