#!/usr/bin/env bash
# The current tables of docs/performance.md on the GPU host, in one device call, from the
# repository root with a bundle made by scripts/gpu-bundle.sh:
#   apps/bench/current.sh [BUNDLE] [tests] [bench] [cli] [orders]   (default: all four)
# tests:  the GPU suites (test_filters_cuda, test_cuda_errors, the GPU tests of
#         test_defaults, test_fusion and test_tuning); logs in $OUT/tests-*.log.
# bench:  cbi-bench, replicate border, the benchmark set (blur:9, gaussian:9,
#         sobel:mag:3, blur:31, color:sepia on 32f:1, 8u:3, 32f:3) with
#         `default` (the default table's choice: what a node without a
#         schedule runs), `auto` and the fixed schedules the table chooses
#         among; 4096^2 with NPP and CuPy timed on the same inputs, then
#         8192^2; and color:gray | gaussian:5 | sobel:mag with no schedules
#         against the hand-written plans. CSV: $OUT/bench-{4096,8192}.csv,
#         npp.csv, cupy.csv.
# cli:    whole-process cbi-filter on a 4096^2 RGB PNG (the sample photo
#         tiled), five passes: no schedule flags, `auto` with an empty
#         tuning cache (first run) and again (warm); median of 3.
# orders: apps/bench/orders.sh (tile orders, Nsight Compute hit rates).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=bundle
[ $# -gt 0 ] && [ -d "$1" ] && { bundle=$1; shift; }
parts=${*:-tests bench cli orders}
has() { [[ " $parts " == *" $1 "* ]]; }
out=${OUT:-/tmp/cbi-out-current}
mkdir -p "$out"
status=0
start=$SECONDS

bin=/tmp/cbi-bundle/bin
if [ ! -x "$bin/cbi-bench" ]; then
  mkdir -p /tmp/cbi-bundle && tar -C /tmp/cbi-bundle -xJf "$bundle/libs.tar.xz" && tar -C /tmp/cbi-bundle -xJf "$bundle/bin.tar.xz" || exit 1
fi
export LD_LIBRARY_PATH=/tmp/cbi-bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin
export CBI_SAMPLES_DIR="$PWD/$bundle/samples"

if has tests; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  pids=()
  for t in test_filters_cuda:'*' test_cuda_errors:'*' test_defaults:'*Cuda*' test_fusion:'*Gpu*' test_tuning:'*Cuda*-*Cli*'; do
    "$bin/${t%%:*}" --gtest_brief=1 --gtest_filter="${t#*:}" > "$out/tests-${t%%:*}.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  for t in test_filters_cuda test_cuda_errors test_defaults test_fusion test_tuning; do
    echo "$t: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \]' "$out/tests-$t.log" | tr '\n' ' ')"
  done
  echo "tests: $((SECONDS - start)) s"
fi

if has bench; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
  schedules=(default auto sep:128x32 sep:64x32 sep:32x32 stream:256x16 stream:128x16 stream:256x32 stream:512x8 vec:8 vec:4 vec:2)
  args=(--suite filters --border replicate --image 32f:1 --image 8u:3 --image 32f:3)
  for s in "${schedules[@]}"; do args+=(--schedule "$s"); done
  args8=("${args[@]}")  # 8192^2: without blur:31 (its per-pixel CPU reference alone takes minutes)
  for f in blur:9 gaussian:9 sobel:mag:3 color:sepia; do args+=(--filter "$f"); args8+=(--filter "$f"); done
  args+=(--filter blur:31)
  pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag"
         --pipeline "color:gray | gaussian:5@sep:64x32 | sobel:mag@stream:256x16"
         --pipeline "color:gray | gaussian:5@stream:256x16 | sobel:mag@stream:256x16")
  rm -rf /tmp/cbi-dump-current
  "$bin/cbi-bench" "${args[@]}" "${pipes[@]}" --size 4096x4096 --dump-dir /tmp/cbi-dump-current \
    --csv "$out/bench-4096.csv" --json "$out/bench-4096.json" > "$out/bench-4096.log" 2>&1 || status=1
  tail -3 "$out/bench-4096.log"
  echo "bench 4096: $((SECONDS - start)) s"
  nvcc -O3 -std=c++17 -arch=sm_90 apps/bench/npp_peer.cu -o /tmp/npp_peer -lnppif -lnppicc -lnppim -lnppc > /tmp/npp-build.log 2>&1 \
    && /tmp/npp_peer /tmp/cbi-dump-current "$out/npp.csv" > "$out/npp.log" 2>&1 || { status=1; tail -5 /tmp/npp-build.log; }
  python3 apps/bench/cupy_peer.py /tmp/cbi-dump-current "$out/cupy.csv" > "$out/cupy.log" 2>&1 || { status=1; tail -3 "$out/cupy.log"; }
  echo "peers: $((SECONDS - start)) s"
  "$bin/cbi-bench" "${args8[@]}" "${pipes[@]}" --size 8192x8192 \
    --csv "$out/bench-8192.csv" > "$out/bench-8192.log" 2>&1 || status=1
  tail -3 "$out/bench-8192.log"
  echo "bench 8192: $((SECONDS - start)) s"
fi

if has cli; then
  w=/tmp/cbi-cli17
  rm -rf "$w" && mkdir -p "$w"
  # The sample photo as PPM, tiled to 4096x4096 with numpy, then PNG (cbi-filter converts).
  "$bin/cbi-filter" "$bundle/samples/butterfly.jpg" --blur 1 --device cpu -o "$w/b.ppm"
  python3 - "$w/b.ppm" "$w/big.ppm" <<'PY'
import sys, numpy as np
raw = open(sys.argv[1], 'rb').read()
parts = raw.split(maxsplit=4)
w, h = int(parts[1]), int(parts[2])
img = np.frombuffer(parts[4], np.uint8)[: w * h * 3].reshape(h, w, 3)
big = np.tile(img, (4096 // h + 1, 4096 // w + 1, 1))[:4096, :4096]
open(sys.argv[2], 'wb').write(b'P6 4096 4096 255\n' + big.tobytes())
PY
  "$bin/cbi-filter" "$w/big.ppm" --blur 1 --device cpu -o "$w/big.png"
  # Seconds of one whole process (awk: the GPU host has no bc).
  t() { local s e; s=$(date +%s%N); "$@" > /dev/null 2>&1 || echo "failed: $*" >&2; e=$(date +%s%N); awk "BEGIN {print ($e - $s) / 1e9}"; }
  printf '%-14s %10s %10s %10s  %s\n' filter default_s auto_first_s auto_warm_s "schedules"
  for f in "--blur 9" "--gaussian 9" "--sobel x" "--color sepia"; do
    five=($f $f $f $f $f)
    d=() a1=() a2=()
    for r in 1 2 3; do
      d+=("$(t "$bin/cbi-filter" "$w/big.png" "${five[@]}" --device cuda -o "$w/o.png")")
      rm -f "$w/tc.json"
      a1+=("$(t "$bin/cbi-filter" "$w/big.png" "${five[@]}" --device cuda --schedule auto --tuning-cache "$w/tc.json" -o "$w/o.png")")
      a2+=("$(t "$bin/cbi-filter" "$w/big.png" "${five[@]}" --device cuda --schedule auto --tuning-cache "$w/tc.json" -o "$w/o.png")")
    done
    med() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
    which=$("$bin/cbi-filter" "$w/big.png" $f --device cuda --print-pipeline | sed -n 2p | sed 's/.*@\([^ ]*\).*/\1/')
    printf '%-14s %10.3f %10.3f %10.3f  default %s, auto %s\n' "$f" "$(med "${d[@]}")" "$(med "${a1[@]}")" "$(med "${a2[@]}")" \
      "$which" "$(grep -o '"[a-z]*:[0-9x]*"' "$w/tc.json" | head -1)"
  done | tee "$out/cli17.txt"
  echo "cli: $((SECONDS - start)) s"
fi

if has orders; then
  CBI_ORDERS_BUDGET_S=${CBI_ORDERS_BUDGET_S:-120} apps/bench/orders.sh "$bundle" || status=1
  echo "orders: $((SECONDS - start)) s"
fi
exit $status
