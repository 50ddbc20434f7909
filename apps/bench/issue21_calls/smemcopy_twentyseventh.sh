#!/usr/bin/env bash
# Twenty-seventh session, call 7: the edge copies as committed (smemcopy:
# bundle-extra/smemcopy.tar.xz, cbi-bench only): the warp's row through
# shared memory as before, each lane's copy two 8-byte loads and byte
# permutes by selectors built once (chain_lane_copy, out of line), the
# byte path's offsets read in the loop. Uncapped, its pair kernels asked
# for as many registers as the bundle's (ptxas). New (the bundle) against
# smemcopy, default border and constant:0, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new smemcopy.tar.xz
d=$OUT/smemcopy; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
for round in 1 2; do
  for b in new smemcopy; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-3.csv > /tmp/$b-$round-3.txt 2>&1
    echo "$b $round 3 rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-1.csv > /tmp/$b-$round-1.txt 2>&1
    echo "$b $round 1 rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[12]-[13].txt | head
python3 apps/bench/issue21_calls/pair_table.py $d new smemcopy
