#!/usr/bin/env bash
# Thirtieth session: this session's cbi-filter against d479ac2's (the last
# stop's) on the same machine, in turn: a batch of 32 JPEGs of 4096^2 to
# JPEG (dog.json, no --device) and one such JPEG to PNG (unsharp.json);
# the codec-only bound before and after. The old binary comes in
# bundle-old/ (xz), the new one in the bundle (CBI_BUNDLE_BINARIES="cbi-filter").
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
xz -dc bundle-old/cbi-filter-d479ac2.xz > /tmp/cbi-filter-old && chmod +x /tmp/cbi-filter-old
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
codec_only $d/in jpg
for r in 1 2 3; do
  for b in old new; do
    bin=$([ $b = old ] && echo /tmp/cbi-filter-old || echo $u/bin/cbi-filter)
    rm -rf $d/out; t0=$(date +%s.%N)
    $bin --input-dir $d/in --output-dir $d/out --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>&1
    t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 -v n=$b 'BEGIN { printf "  batch %s: %.2f s whole process; ", n, b - a }'
    grep -E '^wall' /tmp/bs.txt | cut -d';' -f1
    grep -hE '^jpeg' /tmp/bs.txt | sed 's/^/      /'
  done
done
for r in 1 2 3; do
  for b in old new; do
    bin=$([ $b = old ] && echo /tmp/cbi-filter-old || echo $u/bin/cbi-filter)
    t0=$(date +%s.%N); $bin $d/in/img000.jpg --pipeline-file apps/bench/pipelines/unsharp.json -o $d/$b.png; t1=$(date +%s.%N)
    awk -v a=$t0 -v b=$t1 -v n=$b 'BEGIN { printf "  one photo -> PNG %s: %.3f s\n", n, b - a }'
  done
done
cmp $d/old.png $d/new.png && echo "  one photo: old and new outputs identical"
codec_only $d/in jpg
echo "${SECONDS}s"
