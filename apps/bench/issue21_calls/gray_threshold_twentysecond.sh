#!/usr/bin/env bash
# Twenty-second session, call 5: where the fused gray pipelines start
# winning with this session's pair kernel (bundle/, the final code of call
# 4): fused against no pairs fused, 2 MP to 16.8 MP, two rounds (threshold.sh's
# method, more sizes). Call 6 (argument xy): gray pairs ending in sobel:x or
# sobel:y, 4.9 MP to 12 MP.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
call=call5
sizes=(1920x1080 2048x1536 2560x1920 3000x2000 3264x2448 4000x3000 4096x4096)
pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | gaussian:5" --pipeline "color:gray | gaussian:3 | sobel:mag")
if [ "${1:-}" = xy ]; then
  call=call6
  sizes=(2560x1920 3000x2000 3264x2448 4000x3000)
  pipes=(--pipeline "color:gray | gaussian:5 | sobel:x" --pipeline "color:gray | blur:3 | sobel:y" --pipeline "color:gray | gaussian:3 | sobel:x" --pipeline "color:gray | gaussian:5 | sobel:mag")
fi
d=/tmp/$call; mkdir -p $d
size_args=(); for s in "${sizes[@]}"; do size_args+=(--size "$s"); done
for round in 1 2; do
  $u/bin/cbi-bench --suite filters --image 8u:3 "${size_args[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --runs 20 \
    --csv $d/sizes$round.csv > /tmp/s$round.txt 2>&1
  echo "sizes $round rc=$? ${SECONDS}s"
done
grep -hE "DIFFERS|error|FAIL" /tmp/s?.txt | head
python3 apps/bench/issue21_calls/fused_vs_unfused.py $d "${sizes[@]}"
tar -C $d -cJf $OUT/$call.tar.xz .
