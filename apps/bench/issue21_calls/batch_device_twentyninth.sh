#!/usr/bin/env bash
# Twenty-ninth session: small batches, the CPU or the GPU. Whole-process
# time of cbi-filter on batches of SIZES JPEGs of 4096^2 (to JPEG), with
# no flag beyond the filter (a batch's default device: the GPU
# where there is one) and with --device cpu, in turn, twice; a light
# filter (--blur 9) and the difference of Gaussians.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
# SIZES: the batch sizes (at most 128; default 1 2 4 8 32); ROUNDS (default 2);
# DEVS: default (no --device), or --device's values (default: default cpu).
sizes=${SIZES:-1 2 4 8 32}
d=/tmp/b; rm -rf $d; mkdir -p $d/in
if [ "$(echo $sizes | tr ' ' '\n' | sort -n | tail -1)" -gt 32 ]; then photos4096_x4 /tmp/b32 $d/in; else photos4096 $d/in; fi
for n in $sizes; do mkdir -p $d/in$n; for f in $(ls $d/in | head -$n); do ln -s $d/in/$f $d/in$n/$f; done; done
declare -A args=([blur]='--blur 9' [dog]='--pipeline-file apps/bench/pipelines/dog.json')
for job in blur dog; do
  for n in $sizes; do
    line="$job n=$n"
    for r in $(seq ${ROUNDS:-2}); do
      for dev in ${DEVS:-default cpu}; do
        extra=(); [ $dev != default ] && extra=(--device $dev)
        rm -rf $d/out; mkdir -p $d/out
        t0=$(date +%s.%N)
        $u/bin/cbi-filter --input-dir $d/in$n --output-dir $d/out ${args[$job]} "${extra[@]}" --stats > /tmp/o.txt 2>&1 || { echo "FAIL $job $n $dev"; tail -2 /tmp/o.txt; }
        t1=$(date +%s.%N)
        [ $dev = default ] && [ $r = 1 ] && dev="default($(grep -m1 -o '^device [a-z0-9:]*' /tmp/o.txt | cut -c8-))"
        line="$line $dev $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.3f", b - a }')"
      done
    done
    echo "$line  (outputs: $(ls $d/out | wc -l))"
  done
done
echo "${SECONDS}s"
