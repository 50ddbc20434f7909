#!/usr/bin/env bash
# Twenty-first session, call 5: the final code. A user's run (user_run.sh:
# one 4096^2 photo with no flags against OpenCV, a batch against the
# codec-only bound); the issue's pipelines with their floors (call 4's
# runs); Nsight Compute's counts; the GPU suites and sanitizers. Everything
# also goes to $OUT/log.txt; the CSVs in one tarball.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
c=/tmp/call5; mkdir -p $c
{
  gpu_line; nproc
  . apps/bench/issue21_calls/user_run.sh
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 8192x8192 \
    --filter sobel:mag --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
    --runs 20 --csv $c/final-pipes.csv > /tmp/p.txt 2>&1; echo "pipes rc=$? ${SECONDS}s"
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
    --runs 20 --csv $c/final-blends.csv > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
  grep -hE "DIFFERS|error|FAIL" /tmp/p.txt /tmp/b.txt | head
  python3 apps/bench/issue21_calls/pipes_table.py $c final-pipes final-blends
  ncu_gray $u/bin/cbi-bench 8192x8192 $c/ncu-8192.txt
  ncu_gray $u/bin/cbi-bench 4096x4096 $c/ncu-4096.txt
  checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" \
    test_fusion test_defaults test_filters_cuda
  echo "${SECONDS}s"
} 2>&1 | tee $OUT/log.txt
tar -C $c -cJf $OUT/call5.tar.xz .
