#!/usr/bin/env bash
# Twenty-fifth session, call 7: pairs without a gray conversion that do not
# end in a 3x3 Sobel (a blur or Gaussian after another, and a 5x5 Sobel
# after a Gaussian), fused against no pairs fused, on the last kernel code
# (the full bundle at 8e2859b), 8u:1 and 8u:3, 640x480 to 8192^2, two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/c7; mkdir -p $d
sizes=(640x480 1920x1080 3000x2000 4096x4096 8192x8192)
pipes=(--pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" --pipeline "blur:3 | blur:5" --pipeline "gaussian:3 | gaussian:3"
       --pipeline "gaussian:5 | sobel:mag:5")
size_args=(); for s in "${sizes[@]}"; do size_args+=(--size "$s"); done
for round in 1 2; do
  for im in 8u:1 8u:3; do
    $u/bin/cbi-bench --suite filters --image $im "${size_args[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --runs 20 \
      --csv $d/sizes-${im/:/}-$round.csv > /tmp/s$round.txt 2>&1
    echo "sizes $im $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/s?.txt | head
python3 apps/bench/issue21_calls/fused_vs_unfused.py $d "${sizes[@]}"
tar -C $d -cJf $OUT/c7.tar.xz .
