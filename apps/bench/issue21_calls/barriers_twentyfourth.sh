#!/usr/bin/env bash
# Twenty-fourth session, call 6 (on an H100), an experiment not kept in the
# code: the pair kernel with blocks of up to 16 warps (w16: f33c351 with
# kChainMaxWarps = 16), and the same with a block barrier after every
# input row (bar) or every fourth (bar4: the bundle), so that the warps of
# a block walk their rows together. bundle-extra/barriers.tar.xz holds w16
# and bar. The gray pipeline, 8u:3, both stencils on stream:WxH given by
# name (W: 1 to 5 warps of 240 samples), --block 1024, three sizes.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds bar4 barriers.tar.xz
d=/tmp/call6; mkdir -p $d
args=()
for w in 128 256 720 960 1024; do for h in 16 20 24; do
  args+=(--pipeline "color:gray | gaussian:5@stream:${w}x$h | sobel:mag@stream:${w}x$h")
done; done
for round in 1 2; do
  for b in w16 bar bar4; do
    sizes=(--size 4096x4096); [ $round = 1 ] && sizes+=(--size 6000x4000 --size 8192x8192)
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --block 1024 --filter sobel:mag --schedule stream:256x16 \
      "${args[@]}" --runs 20 --csv $d/$b-$round.csv > /tmp/$b-$round.txt 2>&1; echo "$b $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[12].txt | head
python3 - $d <<'PY'
import csv, sys, re, glob, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    b = f.split("/")[-1].split("-")[0]
    for r in csv.DictReader(open(f)):
        if r["suite"] != "pipeline" or r["variant"] != "fused": continue
        m = re.search(r"stream:(\d+)x(\d+)", r["workload"])
        d[(r["width"] + "x" + r["height"], int(m.group(1)), int(m.group(2)), b)].append(float(r["median_ms"]))
sizes = sorted({k[0] for k in d}); print("size       W     H  |  w16            bar            bar4")
for s in sizes:
    for w in (128, 256, 720, 960, 1024):
        for h in (16, 20, 24):
            cells = [" ".join(f"{v:.4f}" for v in d.get((s, w, h, b), [])) for b in ("w16", "bar", "bar4")]
            if any(cells): print(f"{s:10s} {w:5d} {h:3d}  | " + " | ".join(f"{c:13s}" for c in cells))
PY
tar -C $d -cJf $OUT/call6.tar.xz .
