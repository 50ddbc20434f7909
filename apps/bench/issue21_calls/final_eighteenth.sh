#!/usr/bin/env bash
# Eighteenth session, call 3: the final code (integer gray, ring of K2 rows,
# 72 registers). GPU suites and sanitizers; base (6eec59a) and new
# alternating over five sizes (where fusing pays: fused against no-pairs);
# Nsight Compute on the new default gray pipeline at 8192^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.Blends*' test_fusion test_defaults test_filters_cuda
unpack base
for round in 1 2; do
  sizes=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
  [ $round = 2 ] && sizes=(--size 4096x4096 --size 8192x8192)
  for b in base new; do
    bin=/tmp/base/bin/cbi-bench; [ $b = new ] && bin=$u/bin/cbi-bench
    $bin --suite filters --image 8u:3 "${sizes[@]}" "${gray_pipes[@]}" --runs 20 --csv $OUT/$b-pipes$round.csv > /tmp/$b-p$round.txt 2>&1
    echo "$b pipes $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-p?.txt | head
python3 apps/bench/issue21_calls/compare.py $OUT '*-pipes*.csv'
python3 - $OUT <<'PY'
import csv, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/new-pipes1.csv")):
    for r in csv.DictReader(open(f)):
        print(f'{r["workload"][:36]:36s} {r["variant"]:9s} {r["width"]:>5s}x{r["height"]:<5s} {float(r["median_ms"]):.4f} {float(r["x_floor"]):.2f}x')
PY
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section SchedulerStats"
[ $SECONDS -lt 500 ] && timeout 60 ncu -k regex:chain_stream -c 1 $S $u/bin/cbi-bench --suite filters --image 8u:3 --size 8192x8192 \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $OUT/ncu-8192x8192.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "Duration|Executed Ipc A|Issued Warp Per|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per|DRAM Throughput|Executed Instructions  " $OUT/ncu-8192x8192.txt | head -12
