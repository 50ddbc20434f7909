#!/usr/bin/env bash
# Twenty-eighth session, call 3 (on an H100): a batch of 32 4096^2 JPEGs
# through dog.json on the 16-core host, PNG and JPEG outputs, with no
# --device flag (the default), --device cpu and --device cuda, in turn,
# twice, with --stats; then the codec-only bounds (OpenCV decode + encode,
# one process per core) for both output formats.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in
python3 - $d <<'PY'
import sys, cv2
from multiprocessing import Pool
m = cv2.imread('bundle/samples/butterfly.jpg'); d = sys.argv[1]
big = cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC)
def make(i):
    img = cv2.flip(big, i % 3 - 1) if i % 4 else big
    assert cv2.imwrite(f"{d}/in/img{i:03d}.jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])
with Pool() as p: p.map(make, range(32))
PY
for fmt in png jpg; do
  echo "== batch: 32 JPEGs of 4096^2 -> $fmt, dog.json"
  for r in 1 2; do
    for dev in default cpu cuda; do
      a=(); [ $dev != default ] && a=(--device $dev)
      rm -rf $d/out-$dev; t0=$(date +%s.%N)
      $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out-$dev --format $fmt "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs-$dev.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
      t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v n=$dev 'BEGIN { printf "  %-8s whole process %.2f s, %.2f images/s", n, b - a, 32 / (b - a) }'
      grep -E '^wall' /tmp/bs-$dev.txt | sed 's/;.*//; s/^/ | batch /'
    done
  done
  for dev in default cpu cuda; do echo "  $dev, last round:"; grep -v '^$' /tmp/bs-$dev.txt | grep -E 'decode|process|encode|device|wall /' | sed 's/^/    /'; done
  python3 - $d/in $fmt <<'PY'
import sys, os, time, glob
from multiprocessing import Pool
import cv2
cv2.setNumThreads(1)
files = sorted(glob.glob(sys.argv[1] + "/*")); ext = "." + sys.argv[2]
def work(f):
    img = cv2.imread(f, cv2.IMREAD_UNCHANGED)
    ok, buf = cv2.imencode(ext, img, [cv2.IMWRITE_JPEG_QUALITY, 95] if ext == ".jpg" else [])
    return len(buf)
for r in (1, 2):
    with Pool(os.cpu_count()) as p:
        t = time.time(); p.map(work, files, chunksize=1); t = time.time() - t
    print(f"  codec-only (OpenCV decode + {ext} encode, {os.cpu_count()} processes): {len(files)} files in {t:.2f} s = {len(files) / t:.2f} images/s")
PY
done
echo "${SECONDS}s"
