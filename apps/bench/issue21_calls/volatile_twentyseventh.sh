#!/usr/bin/env bash
# Twenty-seventh session, call 4: call 3's shuffle copies were slower in
# every cell, at 8192^2 too, where edge warps are 2 of 35: the row loop
# lost its barriers, so the copies' shared-memory loads could be hoisted
# out of it for every warp. edgesvol (bundle-extra/edgesvol.tar.xz) reads
# them with a volatile load. The SASS of the gray pair kernel of both builds
# (instruction, shuffle, local-memory counts), then new (the bundle) against
# edgesvol as call 3 ran them, on the default border, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new edgesvol.tar.xz
for b in new edgesvol; do
  sass_gray /tmp/$b/bin/cbi-bench /tmp/$b.sass
  echo "$b: SHFL $(grep -c SHFL /tmp/$b.sass) LDS $(grep -c 'LDS' /tmp/$b.sass) STL/LDL $(grep -cE 'STL|LDL' /tmp/$b.sass) WARPSYNC/BSSY $(grep -cE 'WARPSYNC|BSSY|NANOSLEEP' /tmp/$b.sass)"
done
cp /tmp/new.sass /tmp/edgesvol.sass $OUT/ 2>/dev/null; (cd $OUT && xz -9 *.sass)
d=$OUT/vol; mkdir -p $d
pairs_in_turn $d new edgesvol
