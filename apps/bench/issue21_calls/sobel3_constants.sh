#!/usr/bin/env bash
# Eighteenth session, call 4: a 3x3 Sobel magnitude's weights as constants
# in the pair kernel. The new build's tests and sanitizers; "prev" (call 2's
# ring72 build, the code of 07344c3) and new alternating; Nsight Compute's
# instruction count on the new default gray pipeline at 8192^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*' test_fusion test_filters_cuda
unpack prev
for round in 1 2; do
  for b in prev new; do
    bin=/tmp/prev/bin/cbi-bench; [ $b = new ] && bin=$u/bin/cbi-bench
    $bin --suite filters --image 8u:3 --size 4096x4096 --size 6000x4000 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | sobel:x" \
      --runs 20 --csv $OUT/$b-gray$round.csv > /tmp/$b-g$round.txt 2>&1; echo "$b gray $round rc=$? ${SECONDS}s"
    $bin --suite filters --image 8u:1 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:3 | sobel:mag" \
      --runs 20 --csv $OUT/$b-one$round.csv > /tmp/$b-o$round.txt 2>&1; echo "$b one $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-g?.txt /tmp/*-o?.txt | head
python3 - $OUT <<'PY'
import collections, csv, glob, sys
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*-*.csv")):
    b = f.split("/")[-1].split("-")[0]
    for r in csv.DictReader(open(f)):
        d[(r["workload"][:36], r["variant"], r["width"], r["height"], r["channels"], b)].append((float(r["median_ms"]), float(r["x_floor"])))
for k in sorted({k[:5] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m, _ in d.get(k + (b,), [])) for b in ("prev", "new")]
    xf = d.get(k + ("new",), [(0, 0)])[0][1]
    print(f"{k[0]:36s} {k[1]:14s} {k[2]:>5s}x{k[3]:<5s} c{k[4]} | prev {cells[0]:14s} | new {cells[1]:14s} | new {xf:.2f}x floor")
PY
[ $SECONDS -lt 500 ] && timeout 60 ncu -k regex:chain_stream -c 1 --section SpeedOfLight --section Occupancy --section InstructionStats --section SchedulerStats \
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 8192x8192 --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $OUT/ncu-8192x8192.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"
grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Registers Per|DRAM Throughput|Executed Instructions  " $OUT/ncu-8192x8192.txt | head -12
