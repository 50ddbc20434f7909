#!/usr/bin/env bash
# Twenty-seventh session, call 9: call 8 found call 7's edge warps slow to
# start (their set-up computed each byte's source through an out-of-line
# call, dividing by a run-time channel count, into local memory): lean
# (bundle-extra/lean.tar.xz, cbi-bench only) computes the sources inline
# with the channels a constant and stores none. New (the bundle) against
# lean, the pair pipelines, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new lean.tar.xz
d=$OUT/lean; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
for round in 1 2; do
  for b in new lean; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-3.csv > /tmp/$b-$round-3.txt 2>&1
    echo "$b $round 3 rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-1.csv > /tmp/$b-$round-1.txt 2>&1
    echo "$b $round 1 rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[12]-[13].txt | head
python3 apps/bench/issue21_calls/pair_table.py $d new lean
