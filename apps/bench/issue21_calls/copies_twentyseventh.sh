#!/usr/bin/env bash
# Twenty-seventh session, call 6: call 5's Nsight Compute counts showed its
# shuffle copies raising the row loop's register pressure in every warp
# (the store's 8 bounds checks recomputed each row). Two builds that hold
# fewer registers in the copy (bundle-extra/two.tar.xz): shflseq (the
# shuffles a part at a time, the lane's copy read in two halves) and
# smemrow (the warp's row through shared memory again, each lane's two
# source words read with two 8-byte loads). SASS counts of the pair
# kernels, then new (the bundle) and both as call 4 timed them, in turn,
# twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new two.tar.xz
for b in new shflseq smemrow; do
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
        print(sys.argv[2], tag, sum(c.values()), "ISETP", c["ISETP"], "SHFL", c["SHFL"], "LDS", c["LDS"], "P2R", c["P2R"], "STL+LDL", c["STL"] + c["LDL"])
PY
done
d=$OUT/copies; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
for round in 1 2; do
  for b in new shflseq smemrow; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-3.csv > /tmp/$b-$round-3.txt 2>&1
    echo "$b $round 3 rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-$round-1.csv > /tmp/$b-$round-1.txt 2>&1
    echo "$b $round 1 rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[12]-[13].txt | head
python3 apps/bench/issue21_calls/pair_table.py $d new shflseq
python3 apps/bench/issue21_calls/pair_table.py $d new smemrow
