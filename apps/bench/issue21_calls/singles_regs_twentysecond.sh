#!/usr/bin/env bash
# Twenty-second session, call 3: single 8-bit stencils on the stream kernel
# (stream8_stencil in filters/cuda_backend.cu) with a register cap of 80
# (s80), and
# with the blends' kernel capped too (all80), against base (63cb9e5), in
# turn, twice: the default schedule's kernel on 8u:3 and 8u:1, the unsharp
# mask and the difference of Gaussians. Each variant replaces
# filters/cuda_backend.cu's object (-DCBI_STREAM8_REGS=N), all80 also
# cuda_blend.cu's (-DCBI_STREAM8_BLEND_REGS=80); all three as NAME/bin/cbi-bench
# in bundle-extra/singles-bins.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call3; mkdir -p $d
tar -C /tmp -xJf bundle-extra/singles-bins.tar.xz
filters=(--filter gaussian:9 --filter blur:9 --filter gaussian:7 --filter gaussian:5 --filter sobel:mag --filter sobel:mag:5)
for round in 1 2; do
  for b in base s80 all80; do
    [ $SECONDS -gt 420 ] && break 2
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --image 8u:1 --size 1920x1080 --size 4096x4096 --size 8192x8192 "${filters[@]}" \
      --schedule default --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json --runs 20 \
      --csv $d/$b-$round.csv > /tmp/$b-$round.txt 2>&1
    echo "$b $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-?.txt | head
python3 - $d base s80 all80 <<'PY'
import csv, sys, collections, glob
d = collections.defaultdict(list)
builds = sys.argv[2:]
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    b = f.split("/")[-1].rsplit("-", 1)[0]
    for r in csv.DictReader(open(f)):
        if r["suite"] == "pipeline" and r["variant"] != "default": continue
        w = r["workload"].replace("apps/bench/pipelines/", "")
        d[(w, r["width"] + "x" + r["height"], r["depth"] + ":" + r["channels"], b)].append((float(r["median_ms"]), float(r["x_floor"])))
print(f'{"workload":14s} {"size":>9s} {"fmt":5s} | ' + " | ".join(f"{b:>20s}" for b in builds))
for k in sorted({k[:3] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m, _ in d.get(k + (b,), [])) + (f" {d[k + (b,)][0][1]:.2f}x" if d.get(k + (b,)) else "") for b in builds]
    print(f"{k[0][:14]:14s} {k[1]:>9s} {k[2]:5s} | " + " | ".join(f"{c:>20s}" for c in cells))
PY
tar -C $d -cJf $OUT/call3.tar.xz .
