#!/usr/bin/env bash
# Nineteenth session, call 2: which stencil pairs win fused now that a
# default-fused pair's strip height follows the image (call 1), by size:
# fused (--fuse-stencils) against no-pairs, gray pipelines and other pairs,
# 640x480 to 8192^2. Then the registers and shared memory of the 8-bit
# stream kernels (cuobjdump), and their strip heights at more sizes, to
# check the waves model on single stencils and blends (measured only).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
$u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${gray_pipes[@]}" \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" \
  --runs 20 --csv $OUT/pairs3.csv > /tmp/p3.txt 2>&1; echo "pairs 8u:3 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" \
  --runs 20 --csv $OUT/pairs1.csv > /tmp/p1.txt 2>&1; echo "pairs 8u:1 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p1.txt /tmp/p3.txt | head
python3 - $OUT <<'PY'
import csv, sys
d = {}
for n in ("pairs3", "pairs1"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] == "pipeline":
            d[(r["workload"], r["channels"], int(r["width"]), int(r["height"]), r["variant"])] = float(r["median_ms"])
for k in sorted({k[:4] for k in d if k[4] == "fused"}, key=lambda k: (k[1], k[0], k[2] * k[3])):
    f, n, df = d[k + ("fused",)], d[k + ("no-pairs",)], d[k + ("default",)]
    print(f"{k[0][:36]:36s} 8u:{k[1]} {k[2]:>5d}x{k[3]:<5d} fused {f:.4f} default {df:.4f} no-pairs {n:.4f} fused/no-pairs {f / n:.3f}")
PY
C=/usr/local/cuda/bin
$C/cuobjdump --dump-resource-usage $u/bin/cbi-bench 2>/dev/null | awk '/Function/ { f = $2 } /REG:/ { print f, $0 }' |
  grep -E "stream8_kernel|chain_stream" | sed -E 's/^([^ :]*):? .*(REG:[0-9]+).*(SHARED:[0-9]+).*/\1 \2 \3/' > /tmp/res.txt
$C/cu++filt < <(cut -d' ' -f1 /tmp/res.txt) | sed -E 's/cbi::|std::|unsigned char/ /g; s/ +/ /g' > /tmp/names.txt
paste -d'|' /tmp/names.txt <(cut -d' ' -f2- /tmp/res.txt) > $OUT/kernel-resources.txt
echo "kernels: $(wc -l < $OUT/kernel-resources.txt); registers (count: REG):"; grep -o "REG:[0-9]*" $OUT/kernel-resources.txt | sort | uniq -c | tr '\n' ' '; echo
sched=(); for h in 8 12 16 20 24; do sched+=(--schedule stream:256x$h); done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 640x480 --size 6000x4000 --size 8192x8192 \
  --filter gaussian:9 --filter sobel:mag --filter blur:5 "${sched[@]}" --runs 20 --csv $OUT/single3.csv > /tmp/s3.txt 2>&1
echo "single 8u:3 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:1 --size 1920x1080 --size 4096x4096 --size 8192x8192 \
  --filter gaussian:5 --filter sobel:mag --filter blur:9 "${sched[@]}" --runs 20 --csv $OUT/single1.csv > /tmp/s1.txt 2>&1
echo "single 8u:1 rc=$? ${SECONDS}s"
python3 - $OUT <<'PY'
import csv, sys, re, collections
d = collections.defaultdict(dict)
for n in ("single3", "single1"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        m = re.search(r"256x(\d+)$", r["variant"])
        if m: d[(r["workload"], r["channels"], r["width"] + "x" + r["height"])][int(m.group(1))] = float(r["median_ms"])
for k, v in d.items():
    print(f"{k[0][:12]:12s} 8u:{k[1]} {k[2]:>10s} " + "  ".join(f"H{h} {v[h]:.4f}" for h in sorted(v)))
PY
