#!/usr/bin/env bash
# Twenty-ninth session: blends of 8-bit Gaussians on the tensor cores
# (filters/cuda_mma8.cuh). test_fusion's blend cases (outputs against the
# unfused graph and the CPU), memcheck and racecheck on them, then cbi-bench
# (which checks each output against the CPU backend before timing it) on
# the unsharp mask and the difference of Gaussians: the tensor-core kernel
# at STEPS (strips of 16 * steps rows), and CBI_NO_MMA=1 (the 8-bit stream
# kernel), in turn, twice. CSVs in $OUT/mma.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
blend_tests
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $u/bin/test_fusion --gtest_brief=1 --gtest_filter='Fusion.BlendsFuse*' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/$tool.log | tr '\n' ' ') ${SECONDS}s"
  grep -m3 -E 'Invalid|Race|hazard' /tmp/$tool.log
done
d=$OUT/mma; mkdir -p $d
run() {  # NAME ROUND [ENV...]
  local name=$1 round=$2; shift 2
  for img in 8u:3 8u:1; do
    sizes=(--size 4096x4096); [ $img = 8u:3 ] && sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
    env "$@" $u/bin/cbi-bench --suite filters --image $img "${sizes[@]}" --filter gaussian:9 --schedule stream:256x16 \
      --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json --runs 20 \
      --csv $d/$name-$round-${img#8u:}.csv > /tmp/$name-$round-${img#8u:}.txt 2>&1
    echo "$name $round $img rc=$? ${SECONDS}s"
  done
}
# VARIANTS: NAME=ENV,ENV... each (default: strips of 2, 4 and 8 steps).
variants=${VARIANTS:-"mma2=CBI_MMA_STEPS=2 mma4=CBI_MMA_STEPS=4 mma8=CBI_MMA_STEPS=8"}
for round in 1 2; do
  for v in $variants; do IFS=, read -r -a envs <<< "${v#*=}"; run "${v%%=*}" $round "${envs[@]}"; done
  run stream8 $round CBI_NO_MMA=1
  [ $SECONDS -gt ${LIMIT:-400} ] && break
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-?-[13].txt | head
python3 - $d <<'PY'
import csv, glob, sys
d = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    b, r, c = f.split("/")[-1][:-4].split("-")
    for x in csv.DictReader(open(f)):
        if x["suite"] == "pipeline" and x["variant"] == "default":
            key = (x["workload"].split("/")[-1], c, int(x["width"]) * int(x["height"]), x["width"] + "x" + x["height"])
            d.setdefault(key, {}).setdefault(b, []).append((float(x["median_ms"]), float(x["x_floor"])))
for k in sorted(d):
    print(f"{k[0]:13s} 8u:{k[1]} {k[3]:>9s} " + "  ".join(b + " " + " ".join(f"{m:.4f} ({x:.2f}x)" for m, x in v) for b, v in sorted(d[k].items())))
PY
