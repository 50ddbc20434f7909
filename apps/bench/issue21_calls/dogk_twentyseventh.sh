#!/usr/bin/env bash
# Twenty-seventh session, call 11: blends of two Gaussians skip the smaller
# one's zero weights (KB, its size: pair rows and the symmetric column pass;
# the larger side first). The bundle (new: test_fusion and cbi-bench of
# this code) against base (bundle-extra/base-head.tar.xz: 5afcf8f's
# cbi-bench): test_fusion, the blend tests under memcheck and racecheck,
# and the blends (difference of Gaussians, unsharp mask) in turn.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new base-head.tar.xz
timeout 100 $u/bin/test_fusion --gtest_brief=1 > /tmp/test_fusion.log 2>&1
echo "test_fusion rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/test_fusion.log | tr '\n' ' ') ${SECONDS}s"
grep -hE "Failure|FAILED|Expected|Which is" /tmp/test_fusion.log | head -10
d=$OUT/dogk; mkdir -p $d
run() {  # BUILD ROUND
  /tmp/$1/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 "${blend_args[@]}" \
    --runs 20 --csv $d/$1-$2-3.csv > /tmp/$1-$2.txt 2>&1
  echo "$1 $2 rc=$? ${SECONDS}s"
}
run base 1; run new 1
for tool in memcheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 99 $u/bin/test_fusion --gtest_brief=1 --gtest_filter='Fusion.Blends*' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ') ${SECONDS}s"
done
[ $SECONDS -lt 200 ] && { run base 2; run new 2; }
grep -hE "DIFFERS|error|FAIL" /tmp/base-?.txt /tmp/new-?.txt | head
python3 - $d <<'PY'
import csv, glob, sys
d = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    b, r, c = f.split("/")[-1][:-4].split("-")
    for x in csv.DictReader(open(f)):
        if x["suite"] == "pipeline" and x["variant"] == "default":
            d.setdefault((x["workload"].split("/")[-1], int(x["width"]) * int(x["height"]), x["width"] + "x" + x["height"]), {}).setdefault(b, []).append(
                (float(x["median_ms"]), float(x["x_floor"])))
for k in sorted(d):
    v = d[k]
    print(f"{k[0]:14s} {k[2]:>9s}  base " + " ".join(f"{m:.4f} ({x:.2f}x)" for m, x in v.get("base", [])) + "  new " +
          " ".join(f"{m:.4f} ({x:.2f}x)" for m, x in v.get("new", [])) +
          (f"  new/base {sum(m for m, _ in v['new']) / sum(m for m, _ in v['base']):.3f}" if "new" in v and "base" in v else ""))
PY
