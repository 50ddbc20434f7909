#!/usr/bin/env bash
# Eighteenth session, call 1: the pair kernel's gray conversion as integer dot
# products (chain_gray_pairs) and one clamp fewer in the 8-bit Sobel
# magnitude. The new build's tests and sanitizers; base (6eec59a) and new
# alternating; the new pair kernels' SASS; Nsight Compute on the new default
# gray pipeline.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*' test_fusion test_defaults test_filters_cuda
unpack base
for round in 1 2; do
  for b in base new; do
    bin=/tmp/base/bin/cbi-bench; [ $b = new ] && bin=$u/bin/cbi-bench
    $bin --suite filters --image 8u:3 --size 4096x4096 --size 6000x4000 --size 8192x8192 --filter sobel:mag \
      --schedule stream:256x16 "${gray_pipes[@]}" --runs 20 --csv $OUT/$b-pipes$round.csv > /tmp/$b-p$round.txt 2>&1
    echo "$b pipes $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-p?.txt | head
python3 apps/bench/issue21_calls/compare.py $OUT '*-pipes*.csv'
cuobjdump -sass $u/bin/cbi-bench > /tmp/all.sass 2>&1; echo "sass rc=$?"
python3 - <<'PY' | xz -9 > $OUT/chain.sass.xz
import re
for p in re.split(r'(?=\n\s*Function : )', open('/tmp/all.sass').read()):
    if 'chain_stream' in p.split('\n', 2)[1]:
        print(p)
PY
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats --section SchedulerStats"
for size in 8192x8192 4096x4096; do
  [ $SECONDS -gt 480 ] && break
  timeout 100 ncu -k regex:chain_stream -c 1 $S $u/bin/cbi-bench --suite filters --image 8u:3 --size $size \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $OUT/ncu-$size.txt 2>&1; echo "ncu $size rc=$? ${SECONDS}s"
  grep -E "Duration|Executed Ipc A|Achieved Occupancy|Registers Per|Waves Per SM|DRAM Throughput|Executed Instructions  " $OUT/ncu-$size.txt | head -12
done
