#!/usr/bin/env bash
# Call 5: test_fusion and test_defaults with the 20 MP rule; a user's run: cbi-filter on 24 MP and 16.8 MP JPEGs,
# default (pairs fused from 20 MP) against --no-fuse and --fuse-stencils, and OpenCV doing the same.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
. apps/bench/issue21_calls/common.sh
suites test_fusion test_defaults
compute-sanitizer --tool memcheck --error-exitcode 99 $u/bin/test_fusion --gtest_brief=1 --gtest_filter='Fusion.StencilPairsOnStream*:Fusion.StreamPairs*' > /tmp/mc.log 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED' /tmp/mc.log | tr '\n' ' ')"
d=/tmp/e; rm -rf $d; mkdir -p $d
python3 -c "
import cv2; m = cv2.imread('bundle/samples/butterfly.jpg')
cv2.imwrite('$d/in24.jpg', cv2.resize(m, (6000, 4000), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 95])
cv2.imwrite('$d/in16.jpg', cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 95])"
ls -la $d
P="color:gray | gaussian:5 | sobel:mag"
for s in 24 16; do
  echo "== $s MP: --print-pipeline (default)"; $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda --print-pipeline | tail -4
  for i in 1 2 3; do
    for flags in "" "--no-fuse" "--fuse-stencils"; do
      t0=$(date +%s.%N); $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda $flags -o "$d/out$s$flags.png" || echo FAIL; t1=$(date +%s.%N)
      awk -v f="$flags" -v a=$t0 -v b=$t1 -v s=$s 'BEGIN { printf "%s MP cbi-filter --device cuda %s: %.3f s\n", s, f, b - a }'
    done
    python3 - $d $s <<'PY'
import sys, time
t0 = time.time()
import cv2, numpy as np
d, s = sys.argv[1], sys.argv[2]
g = cv2.cvtColor(cv2.imread(f"{d}/in{s}.jpg"), cv2.COLOR_BGR2GRAY)
g = cv2.GaussianBlur(g, (5, 5), 0)
m = cv2.magnitude(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1))
cv2.imwrite(f"{d}/opencv{s}.png", np.clip(np.rint(m), 0, 255).astype(np.uint8))
print(f"{s} MP OpenCV (Python, imports included): {time.time() - t0:.3f} s")
PY
  done
  cmp $d/out$s.png "$d/out$s--no-fuse.png" && cmp $d/out$s.png "$d/out$s--fuse-stencils.png" && echo "$s MP: default, --no-fuse and --fuse-stencils outputs byte-identical"
  python3 -c "
import cv2; a = cv2.imread('$d/out$s.png', 0); b = cv2.imread('$d/opencv$s.png', 0); print('$s MP cbi vs OpenCV: max |diff|', cv2.absdiff(a, b).max(), 'pixels differing', (a != b).sum(), 'of', a.size)"
  for flags in "" "--no-fuse"; do
    echo "$s MP $flags $(/usr/bin/time -v $u/bin/cbi-filter $d/in$s.jpg --pipeline "$P" --device cuda $flags -o $d/o.png 2>&1 | grep -E 'Maximum resident')"
  done
done
python3 -c "import cv2; a = cv2.imread('$d/out24.png', 0); cv2.imwrite('$OUT/out24-preview.png', cv2.resize(a, (1500, 1000), interpolation=cv2.INTER_AREA))"
