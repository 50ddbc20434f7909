#!/usr/bin/env bash
# Twenty-seventh session, call 1: do the gray pipeline's edge warps set its
# time at 4096^2 (one wave)? The pair kernel as built (new: the bundle)
# against one whose edge warps copy nothing (nocopy: lanes outside the
# image take zeros, right only for a constant-0 border;
# bundle-extra/nocopy.tar.xz), both on --border constant:0, 4096^2 and
# 8192^2, in turn, twice; block orders that spread the edge blocks over the
# SMs (the bundle, default border); Nsight Compute's SM activity at 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new nocopy.tar.xz
d=$OUT/edges; mkdir -p $d
for round in 1 2; do
  for b in new nocopy; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 \
      --border constant:0 --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round.csv > /tmp/$b-$round.txt 2>&1
    echo "$b $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/new-?.txt /tmp/nocopy-?.txt | head
python3 apps/bench/issue21_calls/rows.py $d/new-1.csv $d/nocopy-1.csv $d/new-2.csv $d/nocopy-2.csv | grep -E " (default|fused) "
args=()
for o in "" "+column:1" "+column:3" "+tile:4x4"; do
  args+=(--pipeline "color:gray | gaussian:5@stream:256x20$o | sobel:mag@stream:256x20$o")
done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" "${args[@]}" --runs 20 --csv $d/orders.csv > /tmp/orders.txt 2>&1
echo "orders rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/orders.txt | head
python3 apps/bench/issue21_calls/rows.py $d/orders.csv | grep -E " (default|fused) "
for b in new nocopy; do
  timeout 90 ncu -k regex:chain_stream -c 1 --metrics gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 --border constant:0 \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$b.log 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"; grep -E "gpu__time|sm__cycles|inst_executed|warps_active" /tmp/ncu-$b.log
done
