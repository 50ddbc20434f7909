# Sourced from the repository root after common.sh (it reads $u and $OUT). A user's run: one 4096^2 photo (butterfly.jpg
# resized, JPEG) with no schedule flag against OpenCV in Python doing the same job, order
# alternating; a batch of 32 such photos (--device cuda, JPEG out) against the codec-only
# bound (OpenCV decode + encode of the same files, one process per core) in the same call.
d=/tmp/b; rm -rf $d; mkdir -p $d/in
python3 - $d/in <<'PY'
import sys, cv2
from multiprocessing import Pool
m = cv2.imread('bundle/samples/butterfly.jpg'); out = sys.argv[1]
big = cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC)
def make(i):
    img = cv2.flip(big, i % 3 - 1) if i % 4 else big
    assert cv2.imwrite(f"{out}/img{i:03d}.jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])
with Pool() as p: p.map(make, range(32))
PY
P="color:gray | gaussian:5 | sobel:mag"
echo "== one photo (4096^2 JPEG), no schedule flag, order alternating"
for i in 1 2 3; do
  t0=$(date +%s.%N); $u/bin/cbi-filter $d/in/img000.jpg --pipeline "$P" -o $d/one.png; t1=$(date +%s.%N)
  python3 - $d <<'PY'
import sys, time
t0 = time.time()
import cv2, numpy as np
d = sys.argv[1]
g = cv2.GaussianBlur(cv2.cvtColor(cv2.imread(d + "/in/img000.jpg"), cv2.COLOR_BGR2GRAY), (5, 5), 0)
m = cv2.magnitude(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1))
cv2.imwrite(d + "/opencv.png", np.clip(np.rint(m), 0, 255).astype(np.uint8))
print(f"  OpenCV (Python, imports included): {time.time() - t0:.3f} s")
PY
  awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter (no flags: device auto): %.3f s\n", b - a }'
done
$u/bin/cbi-filter $d/in/img000.jpg --pipeline "$P" --print-pipeline | tail -1
python3 -c "
import cv2; a = cv2.imread('$d/one.png', 0); b = cv2.imread('$d/opencv.png', 0); print('  cbi vs OpenCV: max |diff|', cv2.absdiff(a, b).max(), 'pixels differing', (a != b).sum(), 'of', a.size)"
echo "== batch: 32 JPEGs of 4096^2 -> JPEG, --device cuda, no schedule"
for r in 1 2; do
  rm -rf $d/out; t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out --device cuda --pipeline "$P" --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
  t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter batch: %.2f s, %.2f images/s\n", b - a, 32 / (b - a) }'
done
grep -v '^$' /tmp/bs.txt | head -12 | sed 's/^/    /'
ls $d/out | wc -l
python3 - $d/in <<'PY'
import sys, os, time, glob
from multiprocessing import Pool
import cv2
cv2.setNumThreads(1)
files = sorted(glob.glob(sys.argv[1] + "/*"))
def work(f):
    img = cv2.imread(f, cv2.IMREAD_UNCHANGED)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return len(buf)
for r in (1, 2):
    with Pool(os.cpu_count()) as p:
        t = time.time(); p.map(work, files, chunksize=1); t = time.time() - t
    print(f"  codec-only (OpenCV decode+encode, {os.cpu_count()} processes): {len(files)} files in {t:.2f} s = {len(files) / t:.2f} images/s")
PY
echo "${SECONDS}s"
python3 -c "import cv2; a = cv2.imread('$d/one.png', 0); cv2.imwrite('$OUT/one-preview.png', cv2.resize(a, (1024, 1024), interpolation=cv2.INTER_AREA))"
