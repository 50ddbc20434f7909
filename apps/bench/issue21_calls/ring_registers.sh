#!/usr/bin/env bash
# Eighteenth session, call 2: the consumer's ring holds K2 rows, not 5, and
# the pair kernel's register cap. Builds, as xz tarballs of bin/cbi-bench in
# bundle-extra/: base-bin (6eec59a), dp2a (call 1's code), ring80 (ring of
# K2 rows, 80 registers as before), ring72 and ring64 (__maxnreg__ 72, 64).
# Each build's register and spill counts, then the builds in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds=(base dp2a ring80 ring72 ring64)
for b in "${builds[@]}"; do
  unpack $b
  echo "$b: $(cuobjdump -res-usage /tmp/$b/bin/cbi-bench 2>/dev/null | grep -A1 'chain_stream.*AnyBorderColorSource.*SobelOp.*Li3ELi1ELi2ELb1' | grep -oE 'REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+' | tr '\n' ' ')"
done
for round in 1 2; do
  for b in "${builds[@]}"; do
    [ $SECONDS -gt 520 ] && break 2
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter sobel:mag \
      --schedule stream:256x16 "${gray_pipes[@]}" --runs 20 --csv /tmp/$b-$round.csv > /tmp/$b-p$round.txt 2>&1
    echo "$b $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-p?.txt | head
python3 - "${builds[@]}" <<'PY'
import csv, glob, sys, collections
d = collections.defaultdict(list)
for b in sys.argv[1:]:
    for f in sorted(glob.glob(f"/tmp/{b}-?.csv")):
        for r in csv.DictReader(open(f)):
            if r["variant"] in ("default", "fused", "stream:256x16"):
                d[(r["workload"][:36], r["variant"], r["width"], b)].append(float(r["median_ms"]))
keys = sorted({k[:3] for k in d})
print(f'{"workload":36s} {"variant":14s} {"width":>5s} ' + " ".join(f"{b:>15s}" for b in sys.argv[1:]))
for k in keys:
    print(f"{k[0]:36s} {k[1]:14s} {k[2]:>5s} " + " ".join(f'{" ".join(f"{m:.4f}" for m in d.get(k + (b,), [])):>15s}' for b in sys.argv[1:]))
PY
python3 - "${builds[@]}" > $OUT/ring-registers.csv <<'PY'
import csv, glob, sys
w = None
for b in sys.argv[1:]:
    for f in sorted(glob.glob(f"/tmp/{b}-?.csv")):
        for r in csv.DictReader(open(f)):
            if w is None:
                w = csv.DictWriter(sys.stdout, ["build", "round"] + list(r))
                w.writeheader()
            w.writerow({"build": b, "round": f[-5], **r})
PY
