#!/usr/bin/env bash
# Twenty-eighth session, call 2 (on an H100): PNG outputs before and after
# the bands (pipeline/png_bands.hpp), on the 16-core host. "old" is the
# final cbi-filter with bd750b8's pipeline/image_io.cpp linked in (OpenCV's
# PNG encoder on one core), "new" the bundle's; BIN carries both
# (bin/cbi-filter and old/bin/cbi-filter). One 4096^2 and one 6000x4000
# JPEG to PNG with no flag beyond the pipeline, old and new in turn, 3
# runs each, with --stats; then a batch of 32 4096^2 JPEGs to PNG
# (--device cuda, dog.json), old and new in turn, twice, beside the
# codec-only bound (OpenCV decode + PNG encode, one process per core).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
python3 - $d <<'PY'
import cv2, sys
m = cv2.imread('bundle/samples/butterfly.jpg'); d = sys.argv[1]
assert cv2.imwrite(f"{d}/p24.jpg", cv2.resize(m, (6000, 4000), interpolation=cv2.INTER_CUBIC), [cv2.IMWRITE_JPEG_QUALITY, 92])
PY
for img in in/img000.jpg p24.jpg; do
  for p in "color:gray|gaussian:5|sobel:mag" "apps/bench/pipelines/dog.json"; do
    case $p in *.json) a=(--pipeline-file "$p") ;; *) a=(--pipeline "$p") ;; esac
    echo "== $img -> PNG: $p"
    for i in 1 2 3; do
      for b in old new; do
        bin=$u/bin/cbi-filter; [ $b = old ] && bin=$u/old/bin/cbi-filter
        t0=$(date +%s.%N); $bin $d/$img "${a[@]}" -o $d/$b.png --stats > /tmp/st.txt; t1=$(date +%s.%N)
        awk -v a=$t0 -v b=$t1 -v n=$b 'BEGIN { printf "  %s: %.3f s", n, b - a }'
        grep -E '^(device (cpu|cuda)|decode|run|encode)' /tmp/st.txt | awk '{printf " | %s %s", $1, $NF}'; echo
      done
    done
    python3 -c "
import cv2, os; a = cv2.imread('$d/old.png', -1); b = cv2.imread('$d/new.png', -1)
print('  old vs new: max |diff|', int(cv2.absdiff(a, b).max()), '; bytes old', os.path.getsize('$d/old.png'), 'new', os.path.getsize('$d/new.png'))"
  done
done
echo "== batch: 32 JPEGs of 4096^2 -> PNG, --device cuda, dog.json, old and new in turn"
for r in 1 2; do
  for b in old new; do
    bin=$u/bin/cbi-filter; [ $b = old ] && bin=$u/old/bin/cbi-filter
    rm -rf $d/out-$b; t0=$(date +%s.%N)
    $bin --input-dir $d/in --output-dir $d/out-$b --format png --device cuda --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs-$b.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
    t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v n=$b 'BEGIN { printf "  %s: whole process %.2f s, %.2f images/s", n, b - a, 32 / (b - a) }'
    grep -E '^wall' /tmp/bs-$b.txt | sed 's/;.*//; s/^/ | batch /'
  done
done
for b in old new; do echo "  $b, last round:"; grep -v '^$' /tmp/bs-$b.txt | head -8 | sed 's/^/    /'; done
python3 -c "
import cv2, glob, os
n = 0
for f in sorted(glob.glob('$d/out-new/*.png')):
    a = cv2.imread(f, -1); b = cv2.imread(f.replace('out-new', 'out-old'), -1); n += int(cv2.absdiff(a, b).max() > 0)
print('  batch outputs old vs new: files with any pixel different:', n, 'of', len(glob.glob('$d/out-new/*.png')))"
codec_only $d/in png
echo "${SECONDS}s"
