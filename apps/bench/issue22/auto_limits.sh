#!/usr/bin/env bash
# Issue 22, call 6: what holds --codec auto (the default) near 600 images/s
# on one GPU, with the CPU and the JPEG engine not saturated: the
# bundle's cbi-filter on 1600 generated 2048x2048 JPEGs (q90), --blur 9, --device
# cuda:0, as is; with --strip (no metadata read or written: exiv2 left
# out); writing to /dev/shm (tmpfs: no disk under fsync); with --in-flight
# 128 (twice the default tokens); and --codec cpu beside them; in turn,
# twice. From the repository root on the GPU host.
set -uo pipefail
source apps/bench/issue22/common.sh
df -h /tmp /dev/shm | tail -2
for round in 1 2; do
  run "as is" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0
  run "--strip" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0 --strip
  rm -rf /dev/shm/o
  run "out on /dev/shm" $u/bin/cbi-filter --input-dir $dir/in --output-dir /dev/shm/o --blur 9 --stats --device cuda:0
  rm -rf /dev/shm/o
  run "--in-flight 128" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0 --in-flight 128
  run "--codec cpu" $u/bin/cbi-filter --input-dir $dir/in --output-dir $dir/o --blur 9 --stats --device cuda:0 --codec cpu
done
finish
