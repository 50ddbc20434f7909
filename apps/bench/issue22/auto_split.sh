#!/usr/bin/env bash
# Issue 22, call 8: how --codec auto (the default) splits the JPEGs between
# the devices' decoders and OpenCV (--stats' "jpeg decodes" line), on one
# GPU and on two; 1600 generated 2048x2048 JPEGs (q90), --blur 9, in turn,
# twice. From the repository root on the GPU host.
set -uo pipefail
source apps/bench/issue22/common.sh
for round in 1 2; do
  for dev in cuda:0 cuda:all; do
    run "auto $dev" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device $dev
  done
done
finish
