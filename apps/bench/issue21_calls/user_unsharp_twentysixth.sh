# Sourced from the repository root after common.sh (it reads $u and $OUT). A user's run of the
# unsharp mask (apps/bench/pipelines/unsharp.json: gaussian:9 + blend:1.5:-0.5:0): one 4096^2 JPEG
# (butterfly.jpg resized) to PNG, no schedule flag, with the default device (auto) and with
# --device cuda, against OpenCV in Python doing the same job (GaussianBlur, addWeighted), order
# alternating; then the outputs compared.
d=/tmp/un; rm -rf $d; mkdir -p $d
python3 - $d <<'PY'
import sys, cv2
m = cv2.imread('bundle/samples/butterfly.jpg')
assert cv2.imwrite(sys.argv[1] + "/big.jpg", cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 92])
PY
P=apps/bench/pipelines/unsharp.json
echo "== unsharp mask, one photo (4096^2 JPEG -> PNG), no schedule flag, order alternating"
for i in 1 2 3; do
  for dev in auto cuda; do
    t0=$(date +%s.%N); $u/bin/cbi-filter $d/big.jpg --pipeline-file $P --device $dev -o $d/cbi-$dev.png; t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 -v dev=$dev 'BEGIN { printf "  cbi-filter --device %s: %.3f s\n", dev, b - a }'
  done
  python3 - $d <<'PY'
import sys, time
t0 = time.time()
import cv2
d = sys.argv[1]
img = cv2.imread(d + "/big.jpg")
sharp = cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (9, 9), 0), -0.5, 0)
cv2.imwrite(d + "/opencv.png", sharp)
print(f"  OpenCV (Python, imports included): {time.time() - t0:.3f} s")
PY
done
$u/bin/cbi-filter $d/big.jpg --pipeline-file $P --device cuda --print-pipeline | tail -2
python3 -c "
import cv2
a = cv2.imread('$d/cbi-cuda.png'); b = cv2.imread('$d/opencv.png'); c = cv2.imread('$d/cbi-auto.png')
print('  cbi (cuda) vs cbi (auto): max |diff|', cv2.absdiff(a, c).max())
print('  cbi vs OpenCV: max |diff|', cv2.absdiff(a, b).max(), 'samples differing', (a != b).sum(), 'of', a.size)"
