#!/usr/bin/env bash
# Issue 22, call 4: how many JPEGs may wait for the devices' decoders under
# --codec auto (pipeline/batch.cpp, kDeviceJpegs per decoding device): the
# bundle's cbi-filter (6) against builds of the same code with 12 and 24
# (the constant edited, cbi-filter rebuilt and stripped, packed into
# bundle/bin.tar.xz as bin/cbi-filter-12 and -24 for the call), in turn,
# twice; 1600 generated 2048x2048 JPEGs (q90), --blur 9, --device cuda:0
# and cuda:all; the GPUs' utilisation each second at the end. From the
# repository root on the GPU host (the call then ran bundle/run.sh tests).
set -uo pipefail
source apps/bench/issue22/common.sh
for round in 1 2; do
  for k in 6 12 24; do
    bin=$u/bin/cbi-filter; [ $k != 6 ] && bin=$u/bin/cbi-filter-$k
    for dev in cuda:0 cuda:all; do
      run "cap $k $dev" $bin --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device $dev
    done
  done
done
finish
