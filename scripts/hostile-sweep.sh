#!/usr/bin/env bash
# Hostile-input sweep of the real cbi-filter: bad, truncated and
# decompression-bomb files (generated here, plus fuzz/regressions/fuzz_image)
# through single-image mode with six filter sets, and the folder through
# batch mode with five option sets. Counts wrong exit codes (every case must
# exit 1), errors that are not exactly one line each, crashes or hangs,
# leftover temporaries and changed inputs: all must be 0.
#   scripts/hostile-sweep.sh [path/to/cbi-filter]     (default build/cbi-filter)
# CBI_SWEEP_DEVICE=cuda runs it on the GPU (JPEGs then go through the GPU
# decoder where the build has nvJPEG: the errors must be the same).
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
CF=$(realpath "${1:-$repo/build/cbi-filter}")
device=${CBI_SWEEP_DEVICE:-cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir bad
python3 - <<'PY'
import os, random, struct, zlib
random.seed(1)
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
def png(w, h, data):
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
            chunk(b'IDAT', data) + chunk(b'IEND', b''))
rows = b''.join(b'\x00' + bytes(random.getrandbits(8) for _ in range(40 * 3)) for _ in range(30))
good = png(40, 30, zlib.compress(rows))
open('good.png', 'wb').write(good)
cases = {
    'zero.png': b'', 'random.png': bytes(random.getrandbits(8) for _ in range(3000)),
    'trunc.png': good[:len(good) // 2], 'text.jpg': b'hello\n', 'badlen.jpg': b'\xff\xd8\xff\xe0' + b'\x00' * 40,
    'shortidat.png': png(400, 300, zlib.compress(b'\x00' * 1000)[:30]),
    'bomb.png': png(100000, 100000, zlib.compress(b'\x00' * 100)),
    'hugebmp.bmp': b'BM' + struct.pack('<IHHI', 0, 0, 0, 54) +
                   struct.pack('<IiiHHIIiiII', 40, 30000, 30000, 1, 24, 0, 0, 0, 0, 0, 0) + b'\x00' * 100,
    'pnm.ppm': b'P6\n5000 5000\n255\n' + b'\x00' * 100,
    'bad.tiff': b'II*\x00' + struct.pack('<I', 8) + struct.pack('<H', 0),
    'nl\nname.png': b'nope',
}
for name, data in cases.items(): open('bad/' + name, 'wb').write(data)
os.symlink('/nonexistent.png', 'bad/dangling.png')
os.mkdir('bad/dir.png')
PY
cp "$repo"/fuzz/regressions/fuzz_image/* bad/
# A real JPEG cut in its scan data, and one with nothing after its SOI.
head -c 20000 "$repo/samples/butterfly.jpg" > bad/cut.jpg
head -c 2 "$repo/samples/butterfly.jpg" > bad/soi.jpg

cases=0 wrong_code=0 multi=0 hangs=0 outputs=0 leftovers=0
snapshot() { find bad good.png -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(snapshot)
for f in bad/*; do
  for filters in "--blur 3" "--gaussian 9" "--sobel mag" "--color sepia" \
                 "--pipeline color:gray|gaussian:5|sobel:mag" "--blur 9 --schedule auto --tuning-cache $work/t.json"; do
    cases=$((cases + 1))
    timeout 60 "$CF" "$f" $filters --device "$device" -o out.png 2>err.txt >/dev/null
    rc=$?
    [ $rc -ne 1 ] && { wrong_code=$((wrong_code + 1)); echo "exit $rc: $f $filters"; }
    [ $rc -ge 124 ] && hangs=$((hangs + 1))
    [ "$(wc -l < err.txt)" -ne 1 ] && { multi=$((multi + 1)); echo "not one line: $f $filters"; cat err.txt; }
    [ -e out.png ] && { outputs=$((outputs + 1)); rm -f out.png; echo "output written: $f $filters"; }
  done
done
for options in "--output-dir outb" "--output-dir outb --format png" "--in-place" \
               "--output-dir outb --skip-existing --recursive" "--output-dir outb --jobs 64 --in-flight 1"; do
  cases=$((cases + 1))
  timeout 120 "$CF" --input-dir bad $options --blur 3 --device "$device" --quiet 2>err.txt
  rc=$?
  [ $rc -ne 1 ] && { wrong_code=$((wrong_code + 1)); echo "batch exit $rc: $options"; }
  [ $rc -ge 124 ] && hangs=$((hangs + 1))
  files=$(ls -A -q bad | grep -vc '\.cbi\.')
  [ "$(wc -l < err.txt)" -ne "$files" ] && { multi=$((multi + 1)); echo "batch: not one line per file: $options"; cat err.txt; }
  ls -A bad outb 2>/dev/null | grep -q '\.cbi-tmp-' && leftovers=$((leftovers + 1))
done
[ "$before" = "$(snapshot)" ] && changed=0 || changed=1
echo "cases $cases: wrong exit codes $wrong_code, not one line $multi, crashes or hangs $hangs," \
     "outputs of failed runs $outputs, leftover temporaries $leftovers, inputs changed $changed"
[ $((wrong_code + multi + hangs + outputs + leftovers + changed)) -eq 0 ]
