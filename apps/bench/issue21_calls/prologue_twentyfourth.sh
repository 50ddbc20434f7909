#!/usr/bin/env bash
# Twenty-fourth session, call 1: the pair kernel's first rows loaded at
# once (pro) against the previous commit (cur), as xz tarballs of
# bin/cbi-bench in bundle-extra/; the bundle (pro) runs test_fusion and its
# sanitizers. Then, on cur: the gray pipeline on one-warp blocks
# (stream:128xH) against two-warp blocks (stream:256xH); Nsight Compute's
# warp states and stall sources on the gray pair kernel at 4096^2 and 8192^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds=(cur pro)
d=/tmp/call1; mkdir -p $d
for b in "${builds[@]}"; do unpack $b; cuobjdump --dump-resource-usage /tmp/$b/bin/cbi-bench 2>/dev/null | grep -A1 "$gray_pair_kernel" | tail -1 | sed "s/^/$b /"; done
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion
in_turn $d 300 "${builds[@]}"
args=()
for w in 128 256; do for h in 16 20 24; do
  args+=(--pipeline "color:gray | gaussian:5@stream:${w}x$h | sobel:mag@stream:${w}x$h")
done; done
/tmp/cur/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 6000x4000 --size 8192x8192 \
  --filter sobel:mag --schedule stream:256x16 "${args[@]}" --runs 20 --csv $d/blocks.csv > /tmp/blocks.txt 2>&1; echo "blocks rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/blocks.txt | head
python3 apps/bench/issue21_calls/shapes_table.py $d/blocks.csv
for s in 4096x4096 8192x8192; do ncu_gray /tmp/cur/bin/cbi-bench $s $d/ncu-$s.txt WarpStateStats SourceCounters; done
grep -E "Warp Cycles|stalled|spends" $d/ncu-*.txt | head -30
for s in 4096x4096 8192x8192; do
  timeout 60 ncu -k regex:chain_stream -c 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio" \
    /tmp/cur/bin/cbi-bench --suite filters --image 8u:3 --size $s --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 5 > $d/stalls-$s.txt 2>&1
  echo "stalls $s rc=$? ${SECONDS}s"; grep -E "stalled" $d/stalls-$s.txt | sort -k3 -g -r | head -8
done
tar -C $d -cJf $OUT/call1.tar.xz .
