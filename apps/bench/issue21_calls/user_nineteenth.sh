#!/usr/bin/env bash
# Nineteenth session, call 9: the final code (after the review: one
# occupancy query per strip-height choice, Stream8Shape::blocks). A user's
# run (user_run.sh: one 4096^2 photo with no flags against OpenCV, a batch
# against the codec-only bound); one photo's plan and time with --device
# cuda; the issue's pipelines; then the GPU suites and sanitizers.
# Everything also goes to $OUT/log.txt.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
{
  gpu_line; nproc
  . apps/bench/issue21_calls/user_run.sh
  echo "== one photo, --device cuda, no schedule: plan, then whole-process time (3 runs)"
  $u/bin/cbi-filter $d/in/img000.jpg --device cuda --pipeline "$P" --print-pipeline | grep -E "@|kernels run"
  $u/bin/cbi-filter $d/in/img000.jpg --device cuda --blur 5 --print-pipeline | grep -E "@"
  for i in 1 2 3; do
    t0=$(date +%s.%N); $u/bin/cbi-filter $d/in/img000.jpg --device cuda --pipeline "$P" -o $d/gpu.png; t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 'BEGIN { printf "  cbi-filter --device cuda: %.3f s\n", b - a }'
  done
  python3 -c "import cv2; a = cv2.imread('$d/gpu.png', 0); b = cv2.imread('$d/one.png', 0); print('  GPU vs CPU output: max |diff|', cv2.absdiff(a, b).max())"
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline "$P" --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
    --runs 20 --csv $OUT/pipes.csv > /tmp/p.txt 2>&1; echo "pipes rc=$? ${SECONDS}s"
  grep -hE "DIFFERS|error|FAIL" /tmp/p.txt | head
  python3 - $OUT <<'PY'
import csv, sys
for r in csv.DictReader(open(f"{sys.argv[1]}/pipes.csv")):
    if r["suite"] == "pipeline" and r["variant"] in ("default", "unfused"):
        print(f'  {r["workload"][-36:]:36s} {r["width"]}x{r["height"]} {r["variant"]:8s} {float(r["median_ms"]):.4f} ({float(r["x_floor"]):.2f}x)')
PY
  checks "Fusion.DefaultStreamSchedules*:Fusion.PairsMeasuredFaster*:Fusion.Blends*:Fusion.StreamPairs*:Fusion.StencilPairsOnStream*" \
    test_fusion test_defaults test_filters_cuda
  echo "${SECONDS}s"
} 2>&1 | tee $OUT/log.txt
