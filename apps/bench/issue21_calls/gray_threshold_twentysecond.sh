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
python3 - $d "${sizes[@]}" <<'PY'
import csv, sys, collections
o, sizes = sys.argv[1], sys.argv[2:]
d = collections.defaultdict(list)
for n in (1, 2):
    for r in csv.DictReader(open(f"{o}/sizes{n}.csv")):
        if r["suite"] == "pipeline": d[(r["workload"], r["width"] + "x" + r["height"], r["variant"])].append(float(r["median_ms"]))
for w in sorted({k[0] for k in d}):
    for s in sizes:
        f, n = d[(w, s, "fused")], d[(w, s, "no-pairs")]
        print(f"{w[:36]:36s} {s:10s} fused {' '.join(f'{x:.4f}' for x in f)} | no-pairs {' '.join(f'{x:.4f}' for x in n)} | ratio {sum(f)/sum(n):.3f}")
PY
tar -C $d -cJf $OUT/$call.tar.xz .
