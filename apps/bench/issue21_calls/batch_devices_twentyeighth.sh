#!/usr/bin/env bash
# Twenty-eighth session, call 3 (on an H100): a batch of 32 4096^2 JPEGs
# through dog.json on the 16-core host, PNG and JPEG outputs, with no
# --device flag (the default), --device cpu and --device cuda, in turn,
# twice, with --stats; then the codec-only bounds (OpenCV decode + encode,
# one process per core) for both output formats.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in
photos4096 $d/in
for fmt in png jpg; do
  echo "== batch: 32 JPEGs of 4096^2 -> $fmt, dog.json"
  for r in 1 2; do
    for dev in default cpu cuda; do
      a=(); [ $dev != default ] && a=(--device $dev)
      rm -rf $d/out-$dev; t0=$(date +%s.%N)
      $u/bin/cbi-filter --input-dir $d/in --output-dir $d/out-$dev --format $fmt "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs-$dev.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
      t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v n=$dev 'BEGIN { printf "  %-8s whole process %.2f s, %.2f images/s", n, b - a, 32 / (b - a) }'
      grep -E '^wall' /tmp/bs-$dev.txt | sed 's/;.*//; s/^/ | batch /'
    done
  done
  for dev in default cpu cuda; do echo "  $dev, last round:"; grep -v '^$' /tmp/bs-$dev.txt | grep -E 'decode|process|encode|device|wall /' | sed 's/^/    /'; done
  codec_only $d/in $fmt
done
echo "${SECONDS}s"
