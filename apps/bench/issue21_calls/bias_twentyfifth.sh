#!/usr/bin/env bash
# Twenty-fifth session, call 5: constant biases for the 3x3 Sobel magnitude
# after a 5x5 Gaussian of default sigma, and that Gaussian's rounding as one
# byte permute (new: the bundle), against the previous commit (ffma:
# bundle-extra/ffma.tar.xz), after test_fusion, test_defaults and the pair
# sanitizers; both builds in turn, three rounds; instruction counts.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new ffma.tar.xz
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.PairsMeasured*' test_fusion test_defaults
d=$OUT
three_run=(--size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 "${three_args[@]}")
one_run=(--size 4096x4096 --filter sobel:mag --schedule stream:256x16 "${one_args[@]}")
for round in 1 2 3; do
  for b in ffma new; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${three_run[@]}" --runs 30 --csv "$d/$b-three$round.csv" > /tmp/$b-t$round.txt 2>&1
    echo "$b three $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt | head
python3 apps/bench/issue21_calls/builds_table.py "$d" fused,default ffma new
for b in ffma new; do
  timeout 60 ncu -k regex:chain_stream -c 1 --section InstructionStats --section SpeedOfLight --section Occupancy /tmp/$b/bin/cbi-bench \
    --suite filters --image 8u:3 --size 4096x4096 --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$b.txt 2>&1
  echo "$b $(grep -E 'Duration|Executed Instructions  |Achieved Occupancy' /tmp/ncu-$b.txt | tr -s ' ' | tr '\n' ';')"
done
(cd $d && tar -cJf csv.tar.xz *.csv && rm -f *.csv)
