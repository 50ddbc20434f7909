#!/usr/bin/env bash
# Traversal orders over tiles (sep:128x32+column:4, stream:256x16+column:2:
# the order blocks take tiles or strips in) against row-major, and the
# per-pixel kernel's own orders, on the GPU host, from a bundle made by
# scripts/gpu-bundle.sh. From the repository root:
#   apps/bench/orders.sh [BUNDLE] [bench] [ncu]     (default: bundle, bench and ncu)
# bench: cbi-bench at 4096x4096 and 8192x8192 (reflect101 border), 50 timed runs each:
#   gaussian:9 32f:1 on sep:128x32, +column:2, +column:4, +column:8, +zigzag:4, +tile:4x4;
#   blur:9 8u:3 on stream:256x16, +column:2, +column:8 (the 8-bit stream kernel);
#   blur:9 32f:1 per pixel: naive, column:32, column:256.
# ncu (when Nsight Compute is on the host): L1 and L2 sector hit rates, DRAM
#   bytes read and duration of one launch (the first timed one) of seven of
#   those at CBI_ORDERS_NCU_SIZE (default 8192x8192), one cbi-bench process
#   each (about 8 s); skipped once the script has run CBI_ORDERS_BUDGET_S
#   (default 170) seconds, so the whole stays under 4 minutes.
# $OUT (or /tmp/cbi-out) gets orders.csv (every cbi-bench row, cbi-bench's
# CSV header), orders-ncu.csv (label,metric,unit,value) and orders.log.
set -uo pipefail
bundle=bundle
[ $# -gt 0 ] && [ -d "$1" ] && { bundle=$1; shift; }
do_bench=0; do_ncu=0
[ $# -eq 0 ] && { do_bench=1; do_ncu=1; }
for a in "$@"; do case $a in bench) do_bench=1 ;; ncu) do_ncu=1 ;; *) echo "orders.sh: unknown part '$a' (bench, ncu)" >&2; exit 2 ;; esac; done
out=${OUT:-/tmp/cbi-out}
mkdir -p "$out"
log=$out/orders.log
: > "$log"
budget=${CBI_ORDERS_BUDGET_S:-170}
status=0

bin=/tmp/cbi-bundle/bin
# Unpacked once per bundle (bundle/run.sh unpacks to the same place and drops the stamp).
if [ ! -x "$bin/cbi-bench" ] || [ "$bundle/bin.tar.xz" -nt /tmp/cbi-bundle/.orders-stamp ]; then
  mkdir -p /tmp/cbi-bundle && tar -C /tmp/cbi-bundle -xJf "$bundle/libs.tar.xz" && tar -C /tmp/cbi-bundle -xJf "$bundle/bin.tar.xz" || exit 1
  touch /tmp/cbi-bundle/.orders-stamp
fi
export LD_LIBRARY_PATH=/tmp/cbi-bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$log"

# bench NAME FILTER IMAGE SCHEDULE...: one cbi-bench process, both sizes.
bench() {
  local name=$1 filter=$2 image=$3; shift 3
  local args=()
  for s in "$@"; do args+=(--schedule "$s"); done
  echo "== $name: $filter $image $*" | tee -a "$log"
  timeout 100 "$bin/cbi-bench" --suite filters --size 4096x4096 --size 8192x8192 --filter "$filter" --image "$image" \
    "${args[@]}" --runs 50 --warmup 5 --csv "/tmp/cbi-orders-$name.csv" 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || { status=1; echo "# $name: cbi-bench failed" | tee -a "$log"; }
}

if [ $do_bench = 1 ]; then
  rm -f /tmp/cbi-orders-*.csv
  bench sep gaussian:9 32f:1 sep:128x32 sep:128x32+column:2 sep:128x32+column:4 sep:128x32+column:8 \
    sep:128x32+zigzag:4 sep:128x32+tile:4x4
  bench stream blur:9 8u:3 stream:256x16 stream:256x16+column:2 stream:256x16+column:8
  bench pixel blur:9 32f:1 naive column:32 column:256
  first=1
  for name in sep stream pixel; do
    f=/tmp/cbi-orders-$name.csv
    [ -f "$f" ] || continue
    if [ $first = 1 ]; then cat "$f"; first=0; else tail -n +2 "$f"; fi
  done > "$out/orders.csv"
  echo "bench: $(($(wc -l < "$out/orders.csv") - 1)) rows in orders.csv after ${SECONDS} s" | tee -a "$log"
fi

if [ $do_ncu = 1 ]; then
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then
    echo "ncu: not on this machine" | tee -a "$log"
  else
    size=${CBI_ORDERS_NCU_SIZE:-8192x8192}
    echo "label,metric,unit,value" > "$out/orders-ncu.csv"
    # prof LABEL KERNEL_REGEX FILTER IMAGE SCHEDULE: launches 0 (validation)
    # and 1 (warm-up) of the kernel run unprofiled, launch 2 is measured.
    prof() {
      local label=$1 kernel=$2 filter=$3 image=$4 schedule=$5
      if [ "$SECONDS" -ge "$budget" ]; then echo "ncu $label: skipped (${SECONDS} s used)" | tee -a "$log"; return; fi
      local raw=/tmp/cbi-ncu-$label.txt
      timeout 40 "$ncu" --kernel-name regex:"$kernel" --launch-skip 2 --launch-count 1 --csv \
        --metrics l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum \
        "$bin/cbi-bench" --suite filters --size "$size" --filter "$filter" --image "$image" --schedule "$schedule" \
        --runs 20 --warmup 1 > "$raw" 2>&1 || status=1
      cat "$raw" >> "$log"
      # ncu's CSV rows start with the result ID ("0",...) and end with
      # "Metric Name","Metric Unit","Metric Value"; cbi-bench's own lines do not start with a quote.
      grep -E '^"[0-9]+",' "$raw" |
        awk -F'","' -v l="$label" '{ n = NF; v = $n; gsub(/"/, "", v); gsub(/,/, "", v); print l "," $(n-2) "," $(n-1) "," v }' \
        >> "$out/orders-ncu.csv"
      echo "ncu $label: $(grep -c "^$label," "$out/orders-ncu.csv") metrics (${SECONDS} s)" | tee -a "$log"
      grep -E 'ERR_NVGPUCTRPERM|==ERROR==' "$raw" | head -3
    }
    prof sep-gauss9-32f1 sep_stencil gaussian:9 32f:1 sep:128x32
    prof sep-gauss9-32f1-column4 sep_stencil gaussian:9 32f:1 sep:128x32+column:4
    prof sep-gauss9-32f1-tile4x4 sep_stencil gaussian:9 32f:1 sep:128x32+tile:4x4
    prof stream-blur9-8u3 stream8_stencil blur:9 8u:3 stream:256x16
    prof stream-blur9-8u3-column8 stream8_stencil blur:9 8u:3 stream:256x16+column:8
    prof pixel-blur9-32f1-naive apply_schedule blur:9 32f:1 naive
    prof pixel-blur9-32f1-column32 apply_schedule blur:9 32f:1 column:32
    column -s, -t "$out/orders-ncu.csv" 2>/dev/null || cat "$out/orders-ncu.csv"
  fi
fi
echo "orders.sh: done in ${SECONDS} s, status $status" | tee -a "$log"
exit $status
