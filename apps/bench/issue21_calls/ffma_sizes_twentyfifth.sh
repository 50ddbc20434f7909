#!/usr/bin/env bash
# Twenty-fifth session, call 3: the sum of squares of an 8-bit Sobel
# magnitude as one fused multiply-add on the device (new: the bundle) against
# call 2's edge-copy build (edges: bundle-extra/edges.tar.xz), after the
# bundle's suites and sanitizers. Then on the bundle: where the fused gray
# pipelines win now (fused against no pairs fused, 640x480 to 4096^2, two
# rounds), the gray pipeline's strip shapes at 1920x1080, 4096^2 and
# 8192^2, and Nsight Compute's per-instruction counts of the unsharp mask's
# blend kernel at 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new edges.tar.xz
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults test_filters_cuda
d=/tmp/c3; mkdir -p $d
in_turn $d 200 edges new
sizes=(640x480 1280x720 1920x1080 2560x1920 3000x2000 4096x4096)
pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | gaussian:5"
       --pipeline "color:gray | gaussian:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | sobel:x")
size_args=(); for s in "${sizes[@]}"; do size_args+=(--size "$s"); done
for round in 1 2; do
  $u/bin/cbi-bench --suite filters --image 8u:3 "${size_args[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --runs 20 \
    --csv $d/sizes$round.csv > /tmp/s$round.txt 2>&1
  echo "sizes $round rc=$? ${SECONDS}s"
done
grep -hE "DIFFERS|error|FAIL" /tmp/s?.txt | head
python3 apps/bench/issue21_calls/fused_vs_unfused.py $d "${sizes[@]}"
args=()
for w in 128 256; do for h in 12 16 20 24; do
  args+=(--pipeline "color:gray | gaussian:5@stream:${w}x$h | sobel:mag@stream:${w}x$h")
done; done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" "${args[@]}" --runs 20 --csv $d/shapes.csv > /tmp/shapes.txt 2>&1; echo "shapes rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/shapes.txt | head
python3 apps/bench/issue21_calls/shapes_table.py $d/shapes.csv
timeout 120 ncu --kernel-name-base mangled -k regex:BlendedStencils -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --section Occupancy --section LaunchStats -f -o /tmp/r-blend $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 \
  --filter gaussian:9 --schedule stream:256x16 --pipeline apps/bench/pipelines/unsharp.json --runs 20 > /tmp/ncu-blend.log 2>&1
echo "ncu blend rc=$? ${SECONDS}s"
ncu -i /tmp/r-blend.ncu-rep --page source --csv --print-source sass | xz -9 > $OUT/src-blend-4096.csv.xz
ncu -i /tmp/r-blend.ncu-rep --page details > $OUT/details-blend-4096.txt 2>&1
grep -E "Duration|Achieved Occupancy|Executed Instructions  |Issued Warp|Waves" $OUT/details-blend-4096.txt | head
tar -C $d -cJf $OUT/c3.tar.xz .
