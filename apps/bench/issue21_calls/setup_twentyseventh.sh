#!/usr/bin/env bash
# Twenty-seventh session, call 5: edgesvol2 (bundle-extra/edgesvol2.tar.xz:
# call 4's build with its set-up loops rolled) against new (the bundle):
# SASS of the pair kernels that the timed pipelines run (instruction and
# opcode counts), Nsight Compute on gaussian:5 | sobel:mag 8u:1 at 8192^2
# (duration, instructions, per-SASS counts as CSV), then the pipelines as
# call 4 timed them.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new edgesvol2.tar.xz
for b in new edgesvol2; do
  cuobjdump -sass /tmp/$b/bin/cbi-bench > /tmp/$b-all.sass 2>/dev/null
  python3 - /tmp/$b-all.sass $b <<'PY'
import re, sys, collections
cur = None; funcs = collections.OrderedDict()
for l in open(sys.argv[1]):
    m = re.match(r"\s+Function : (\S+)", l)
    if m: cur = m.group(1); funcs[cur] = collections.Counter(); continue
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", l)
    if m and cur: funcs[cur][m.group(1)] += 1
for f, c in funcs.items():
    if "chain_stream" in f and "Li3ELi" in f and "Li2ELb" in f and "Lb1ELb1EE" in f:
        tag = ("gray " if "ColorSource" in f else "") + re.search(r"Li3ELi(\d)ELi2E", f).group(0)
        print(sys.argv[2], tag, sum(c.values()), "SHFL", c["SHFL"], "LDS", c["LDS"], "BSSY", c["BSSY"], "STL+LDL", c["STL"] + c["LDL"])
PY
done
for b in new edgesvol2; do
  timeout 120 ncu -k regex:chain_stream -c 1 --section SourceCounters --section SpeedOfLight --section Occupancy --section LaunchStats -f -o /tmp/r-$b \
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 \
    --pipeline "gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$b.log 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"
  ncu -i /tmp/r-$b.ncu-rep --page details --print-details all 2>/dev/null | grep -E "Duration|Executed Instructions  |Achieved Occupancy|Registers Per|Block Size|Grid Size" | head -8
  ncu -i /tmp/r-$b.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-$b-sass.csv" 2>&1
done
(cd $OUT && xz -9 ncu-*-sass.csv)
d=$OUT/setup; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
for round in 1 2; do
  for b in new edgesvol2; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-3.csv > /tmp/$b-$round-3.txt 2>&1
    echo "$b $round 3 rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-1.csv > /tmp/$b-$round-1.txt 2>&1
    echo "$b $round 1 rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[12]-[13].txt | head
python3 apps/bench/issue21_calls/pair_table.py $d new edgesvol2
