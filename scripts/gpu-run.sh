#!/usr/bin/env bash
# Runs on the GPU host from a bundle made by scripts/gpu-bundle.sh.
#   run.sh tests      GPU test suites (plus the CPU suites, as a cross-check);
#                     the GPU matrix in CBI_TEST_SHARDS (8) processes
#   run.sh sanitize   compute-sanitizer memcheck / racecheck / initcheck
#   run.sh sanitize-matrix  the same tools over the whole GPU matrix, in parallel parts
#   run.sh bench      cbi-bench baseline table (CSV/JSON to $OUT or ./)
#   run.sh cli        cbi-filter on a photo, CUDA vs CPU
#   run.sh batch      batch mode: 200 generated 2048x2048 RGB PNGs, --device cuda, overlap vs --no-overlap
#   run.sh scale      batch scaling: 400 generated 2048x2048 JPEGs (q90) with
#                     --codec cpu, auto and gpu (CBI_SCALE_QUICK=1: only these),
#                     --device cuda:0 and cuda:0,0, then mpirun -n 1 and -n 2;
#                     outputs compared byte for byte, images/s beside
#                     OpenCV's decode+encode alone on all cores
#   run.sh gpus       batch on every GPU of the host: 800 JPEGs and 200
#                     PNGs (2048x2048), --blur 9 and a three-stage pipeline,
#                     --device cuda:0, cuda:all and mpirun -n GPUs, --stats,
#                     beside OpenCV's decode+encode alone; a rank killed and
#                     the job completed with --skip-existing
#   run.sh single     one 24-megapixel JPEG, whole process: --codec cpu and gpu
#                     against OpenCV (Python) doing the same
#   run.sh device     one image, --device auto (the default) against --device
#                     cuda: which device auto picks (--stats) and the whole
#                     process, best of 3, for 2/24/48 MP JPEGs and a 24 MP float
#                     TIFF at 2, 4 and 16 threads
#   run.sh small      small batches (2/8/32/128 generated 2048x2048 JPEGs,
#                     --blur 9): --device cpu against the default, whole
#                     process, best of 3; every run must exit 0
#   run.sh fusion     fused pipelines: test_fusion, its stream-pair and
#                     blend tests under memcheck and racecheck, then cbi-bench
#                     --pipeline at 4096² and 8192² 8u:3 (fused, default, no-pairs,
#                     unfused; apps/bench/pipelines/*.json: unsharp mask and
#                     difference of Gaussians; the gray pipeline on taller
#                     strips too) beside the floor; fusion.csv to $OUT. Each
#                     part runs when the bundle has its binary;
#                     CBI_FUSION_BENCH=PATH times another build's cbi-bench.
#   run.sh blend      one 24-megapixel JPEG through apps/bench/pipelines/unsharp.json:
#                     the default (fused) against --no-fuse, byte for byte, and
#                     OpenCV (Python) doing the same; whole process, 3 runs each
#   run.sh codecs     cbi-codec-bench on 400 generated 2048x2048 JPEGs: OpenCV's
#                     and nvJPEG's decode and encode alone, and start-up costs;
#                     then the hardware decoder alone by batch size (--batches)
#   run.sh hostile    scripts/hostile-sweep.sh with --device cuda (from the
#                     repository the bundle sits in)
#   run.sh all        tests, cli, sanitize, bench
#   run.sh bench-all  cbi-bench suites (filters, thesis sweeps, matmul,
#                     CPU vs OpenCV) plus the NPP and CuPy peers on the same
#                     inputs; $OUT gets bench.csv (all rows), cbi.json, logs.tgz
# Logs go to /tmp/cbi-out; at the end they are packed into $OUT/logs.tgz
# (the device tool brings back at most 8 files), and the benchmark's CSV and
# JSON are copied to $OUT beside it. Without $OUT they stay in /tmp/cbi-out.
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
out=/tmp/cbi-out
rm -rf "$out" && mkdir -p "$out"
unpacked=/tmp/cbi-bundle
rm -rf "$unpacked" && mkdir -p "$unpacked"
tar -C "$unpacked" -xJf "$bundle/libs.tar.xz" && tar -C "$unpacked" -xJf "$bundle/bin.tar.xz" || exit 1
export PATH=$PATH:/usr/local/cuda/bin
# cuBLAS does not travel in the bundle: the host's CUDA toolkit provides it (and NPP).
cuda_lib=$(dirname "$(find /usr/local/cuda/ /usr/local/cuda/targets/ -maxdepth 3 -name 'libcublas.so.*' 2>/dev/null | head -1)")
[ "$cuda_lib" = . ] && cuda_lib=/usr/local/cuda/lib64
export LD_LIBRARY_PATH="$unpacked/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CBI_SAMPLES_DIR="$bundle/samples"
bin=$unpacked/bin
status=0

run_tests() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  # test_tuning's CLI test needs the build tree's cbi-filter: left out here.
  # The GPU matrix checks every schedule, border and size against the CPU and
  # OpenCV: minutes in one process, so it runs in shards, one process per
  # shard on the same GPU (CBI_TEST_SHARDS, default 8).
  local shards=${CBI_TEST_SHARDS:-8}
  for t in test_schedules test_filters_cpu test_graph test_tuning test_fusion test_defaults test_devices test_filters_cuda test_cuda_errors test_cuda_wait test_jpeg_gpu; do
    [ -x "$bin/$t" ] || { echo "$t: not in this bundle"; continue; }
    if [ "$t" = test_filters_cuda ] && [ "$shards" -gt 1 ]; then
      local pids=() i
      for ((i = 0; i < shards; i++)); do
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin/$t" --gtest_brief=1 --gtest_filter=-*Cli* > "$out/$t.$i.log" 2>&1 &
        pids+=($!)
      done
      for i in "${pids[@]}"; do wait "$i" || status=1; done
      cat "$out/$t".*.log > "$out/$t.log"
      echo "$t ($shards shards): $(awk '/^\[  PASSED  \]/ {p += $4} /^\[  SKIPPED \]/ {s += $4} /^\[  FAILED  \] [0-9]/ {f += $4}
        END {printf "passed %d, skipped %d, failed %d", p, s, f}' "$out/$t.log")"
      continue
    else
      "$bin/$t" --gtest_brief=1 --gtest_filter=-*Cli* > "$out/$t.log" 2>&1 || status=1
    fi
    echo "$t: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \]' "$out/$t.log" | tr '\n' ' ')"
  done
}

run_sanitize() {
  # The sticky-error test makes an illegal access on purpose: not sanitised.
  # The out-of-memory test's failed cudaMalloc is deliberate (sanitizers count it as an API error).
  local subset=${CBI_SANITIZE_FILTER:-'Matrix/*_8u_c3:Matrix/*_32f_c1:Cuda.*-Cuda.OutOfMemoryIsReportedAndRecoverable'}
  # CBI_TEST_SCHEDULES (e.g. stream:13x40,vec:4) narrows the matrix tests to a
  # few schedules, CBI_SANITIZE_TOOLS to some of the tools, so a run fits a device call.
  local pids=() tools=${CBI_SANITIZE_TOOLS:-memcheck racecheck initcheck}
  for tool in $tools; do  # in parallel: one process each on the same GPU
    local extra=""
    [ "$tool" = memcheck ] && extra="--leak-check full"
    compute-sanitizer --tool "$tool" $extra --error-exitcode 99 \
      "$bin/test_filters_cuda" --gtest_brief=1 --gtest_filter="$subset" > "$out/sanitize-$tool.log" 2>&1 &
    pids+=($!)
  done
  # Fusion and auto on the GPU (test_fusion, test_tuning's CUDA test) under memcheck.
  compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/test_fusion" --gtest_brief=1 --gtest_filter='*Gpu*' \
    > "$out/sanitize-memcheck-fusion.log" 2>&1 &
  pids+=($!)
  compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/test_tuning" --gtest_brief=1 --gtest_filter='*Cuda*' \
    > "$out/sanitize-memcheck-tuning.log" 2>&1 &
  pids+=($!)
  # nvJPEG decoding and encoding (test_jpeg_gpu, where the bundle has it).
  if [ -x "$bin/test_jpeg_gpu" ]; then
    compute-sanitizer --tool memcheck --error-exitcode 99 "$bin/test_jpeg_gpu" --gtest_brief=1 \
      > "$out/sanitize-memcheck-jpeg.log" 2>&1 &
    pids+=($!)
  fi
  # Fused stencil pairs share a tile in shared memory between barriers: racecheck them.
  compute-sanitizer --tool racecheck --error-exitcode 99 "$bin/test_fusion" --gtest_brief=1 \
    --gtest_filter='Fusion.StencilPairs*Gpu*' > "$out/sanitize-racecheck-fusion.log" 2>&1 &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  for tool in $tools memcheck-fusion memcheck-tuning racecheck-fusion $([ -x "$bin/test_jpeg_gpu" ] && echo memcheck-jpeg); do
    echo "$tool: $(grep -E 'SUMMARY|^\[  PASSED|^\[  FAILED|^\[  SKIPPED' "$out/sanitize-$tool.log" | tr '\n' ' ')"
  done
}

# The whole GPU matrix under memcheck (with leak check), racecheck and
# initcheck: one process per tool and part, all at once on the one GPU (the
# host has 16 cores), each under CBI_SANITIZE_SECONDS (default 480) so that
# the call ends in time; a part cut off says so. CBI_SANITIZE_PARTS names the
# parts (gtest filters, space-separated; default: the matrix by depth, then
# the other GPU tests), run under each of CBI_SANITIZE_TOOLS; or
# CBI_SANITIZE_PLAN names a file of "TOOL FILTER [VAR=VALUE ...]" lines (to
# spread the whole matrix over several calls; e.g. racecheck with
# CBI_TEST_SCHEDULES set to the schedules that use shared memory). Counts per
# log: tests passed, errors, hazards.
run_sanitize_matrix() {
  local -; set -f  # the parts are gtest globs, not file names
  local parts=${CBI_SANITIZE_PARTS:-'Matrix/*_8u_* Matrix/*_16u_* Matrix/*_32f_* Cuda.*-Cuda.OutOfMemoryIsReportedAndRecoverable'}
  local tools=${CBI_SANITIZE_TOOLS:-memcheck racecheck initcheck} limit=${CBI_SANITIZE_SECONDS:-480}
  local plan=() pids=() names=() n=0
  if [ -n "${CBI_SANITIZE_PLAN:-}" ]; then
    mapfile -t plan < "$CBI_SANITIZE_PLAN"
  else
    for tool in $tools; do for part in $parts; do plan+=("$tool $part"); done; done
  fi
  for line in "${plan[@]}"; do
    local fields=($line)
    local tool=${fields[0]} part=${fields[1]} extra=""
    [ "$tool" = memcheck ] && extra="--leak-check full"
    local name="san-$tool-$((n++))"
    echo "$part" > "$out/$name.filter"
    env "${fields[@]:2}" timeout "$limit" compute-sanitizer --tool "$tool" $extra --error-exitcode 99 \
      "$bin/test_filters_cuda" --gtest_filter="$part" > "$out/$name.log" 2>&1 &
    pids+=($!); names+=("$name")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; local rc=$?
    local log="$out/${names[$i]}.log"
    [ $rc -ne 0 ] && status=1
    echo "${names[$i]}: rc $rc, $(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \]' "$log") failed lines," \
         "$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$log" | tr '\n' ' ')$([ $rc -eq 124 ] && echo ' CUT OFF by the time limit')"
  done
}

run_bench() {
  "$bin/cbi-bench" --image 32f:1 --image 32f:3 --image 8u:3 --csv "$out/baseline.csv" --json "$out/baseline.json" \
    "$@" | tee "$out/baseline.txt" || status=1
}

# Every benchmark suite and peer in one go (about 5 minutes on an H100). Extra
# arguments go to the GPU part of cbi-bench (e.g. --quick for a smoke test).
run_bench_all() {
  local dump=/tmp/cbi-dump t0=$SECONDS
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv > "$out/nvidia-smi.csv" 2>&1
  "$bin/cbi-bench" --suite filters --suite thesis-stencil --suite thesis-sizes --suite matmul --border replicate \
    --image 32f:1 --image 8u:3 --image 32f:3 \
    --filter blur:9 --filter gaussian:9 --filter sobel:x:3 --filter sobel:mag:3 --filter color:sepia \
    --schedule naive --schedule column:16 --schedule column:32 --schedule column:64 --schedule column:128 \
    --schedule zigzag:32 --schedule tile:32x8 --schedule tile:64x4 --schedule tile:16x16 \
    --block 128 --block 256 --block 512 --dump-dir "$dump" --csv "$out/cbi.csv" --json "$out/cbi.json" "$@" \
    > "$out/cbi.txt" 2>&1 || status=1
  grep -E '^#|error|DIFFERS' "$out/cbi.txt"; echo "cbi-bench GPU suites done at $((SECONDS - t0)) s"
  # NPP: compiled here with the host's nvcc, against the host's NPP.
  if nvcc -O3 -std=c++17 -arch=sm_90 "$bundle/bench/npp_peer.cu" -o /tmp/npp_peer \
       -Xlinker -rpath="$cuda_lib" -lnppif -lnppicc -lnppim -lnppc > "$out/npp-build.log" 2>&1; then
    /tmp/npp_peer "$dump" "$out/npp.csv" > "$out/npp.txt" 2>&1 || status=1
  else echo "npp_peer did not build (see npp-build.log)"; status=1; fi
  tail -1 "$out/npp.txt" 2>/dev/null; echo "NPP done at $((SECONDS - t0)) s"
  PYTHONUNBUFFERED=1 python3 "$bundle/bench/cupy_peer.py" "$dump" "$out/cupy.csv" > "$out/cupy.txt" 2>&1 || status=1
  tail -1 "$out/cupy.txt"; echo "CuPy done at $((SECONDS - t0)) s"
  "$bin/cbi-bench" --suite cpu --border replicate --image 32f:1 --image 8u:3 --image 32f:3 \
    --filter blur:9 --filter gaussian:9 --filter sobel:x:3 --filter sobel:mag:3 --filter color:sepia \
    --cpu-threads "$(nproc)" --csv "$out/cpu.csv" --json "$out/cpu.json" > "$out/cpu.txt" 2>&1 || status=1
  echo "CPU done at $((SECONDS - t0)) s"
  { cat "$out/cbi.csv"; for f in npp cupy cpu; do [ -f "$out/$f.csv" ] && tail -n +2 "$out/$f.csv"; done; } > "$out/bench.csv"
  rm -rf "$dump"
  python3 "$bundle/bench/plot.py" --summary "$out/bench.csv" || status=1
}

# Filter kinds at 4096x4096 on 8u:1, 8u:3 and 32f:1, default schedules, against
# the floor and NPP (where npp_peer has the kind) in one run:
#   run.sh bench-kinds erode:3 erode:61 median:5 ...
run_bench_kinds() {
  local dump=/tmp/cbi-dump-kinds args=()
  for f in "$@"; do args+=(--filter "$f"); done
  "$bin/cbi-bench" --suite filters --size 4096x4096 --image 8u:1 --image 8u:3 --image 32f:1 --border replicate \
    --schedule default --block 256 "${args[@]}" --dump-dir "$dump" --csv "$out/kinds.csv" > "$out/kinds.txt" 2>&1 || status=1
  grep -E 'filters|error|DIFFERS|skipped' "$out/kinds.txt"
  if nvcc -O3 -std=c++17 -arch=sm_90 "$bundle/bench/npp_peer.cu" -o /tmp/npp_peer \
       -Xlinker -rpath="$cuda_lib" -lnppif -lnppicc -lnppim -lnppc > "$out/npp-build.log" 2>&1; then
    /tmp/npp_peer "$dump" "$out/npp-kinds.csv" 2>&1 | grep -vE 'matches' || status=1
  else echo "npp_peer did not build:"; tail -5 "$out/npp-build.log"; status=1; fi
  rm -rf "$dump"
}

run_cli() {
  local photo=$bundle/samples/butterfly.jpg
  "$bin/cbi-filter" "$photo" --device cuda --blur 9 --schedule column:32 -o "$out/butterfly-cuda.png" || status=1
  "$bin/cbi-filter" "$photo" --device cpu --blur 9 --schedule column:32 -o "$out/butterfly-cpu.png" || status=1
  if cmp -s "$out/butterfly-cuda.png" "$out/butterfly-cpu.png"; then echo "cli: CUDA and CPU outputs are identical files"
  else echo "cli: CUDA and CPU outputs DIFFER"; status=1; fi
  # Pipelines: a DAG from a file and a chain with a stencil-only default schedule.
  local dev
  for dev in cuda cpu; do
    "$bin/cbi-filter" "$photo" --device $dev --pipeline-file "$bundle/samples/pipelines/dog.json" -o "$out/dog-$dev.png" || status=1
    "$bin/cbi-filter" "$photo" --device $dev --schedule smem:32x8 --pipeline "color:gray | gaussian:5 | sobel:mag@tile:32x8" \
      -o "$out/edges-$dev.png" || status=1
  done
  "$bin/cbi-filter" "$photo" --device cuda --pipeline-file "$bundle/samples/pipelines/dog.json" --print-pipeline
  local f
  for f in dog dog.sharp edges; do  # the second output of dog.json is written as dog-DEV.sharp.png
    if cmp -s "$out/${f%%.*}-cuda${f#"${f%%.*}"}.png" "$out/${f%%.*}-cpu${f#"${f%%.*}"}.png"; then
      echo "cli: pipeline output $f: CUDA and CPU identical"
    else echo "cli: pipeline output $f: CUDA and CPU DIFFER"; status=1; fi
  done
}

# Batch mode on the GPU host. The images are made here with Python's cv2 (the
# bundle has no generator): gradients plus noise, like the CPU measurement's.
run_batch() {
  local dir=/tmp/cbi-batch n=${CBI_BATCH_IMAGES:-200}
  rm -rf "$dir" && mkdir -p "$dir/in"
  python3 - "$dir/in" "$n" <<'PY' || { echo "batch: cannot generate the images (needs python3 with numpy and cv2)"; status=1; return; }
import sys
from multiprocessing import Pool
import numpy as np, cv2
out, n, w, h = sys.argv[1], int(sys.argv[2]), 2048, 2048
x, y = np.meshgrid(np.arange(w), np.arange(h))
base = np.dstack([x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h)]).astype(np.int32)
def make(i):
    noise = np.clip(np.rint(np.random.default_rng(i).normal(0, 12, base.shape)), 0, 255).astype(np.int32)
    assert cv2.imwrite(f"{out}/img{i:04d}.png", np.clip(base + noise, 0, 255).astype(np.uint8))
with Pool() as p:
    p.map(make, range(n))
PY
  echo "batch: $n images, $(du -sh "$dir/in" | cut -f1), $(nproc) cores"
  for mode in overlap no-overlap; do
    local flag=""
    [ "$mode" = no-overlap ] && flag=--no-overlap
    rm -rf "$dir/out"
    echo "== cbi-filter --input-dir IN --output-dir OUT --device cuda --blur 9 --stats $flag"
    "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/out" --device cuda --blur 9 --stats $flag \
      > "$out/batch-$mode.txt" 2> "$out/batch-$mode.err" || status=1
    cat "$out/batch-$mode.txt"
    tail -n 1 "$out/batch-$mode.err"
  done
  rm -rf "$dir"
}

# Images for the batch measurements, made with Python's cv2 (the bundle has no
# generator): gradients plus noise. make_images DIR N EXT
make_images() {
  mkdir -p "$1"
  python3 - "$@" <<'PY'
import sys
from multiprocessing import Pool
import numpy as np, cv2
out, n, ext, w, h = sys.argv[1], int(sys.argv[2]), sys.argv[3], 2048, 2048
x, y = np.meshgrid(np.arange(w), np.arange(h))
base = np.dstack([x * 255 // w, y * 255 // h, (x + y) * 127 // (w + h)]).astype(np.int32)
def make(i):
    noise = np.clip(np.rint(np.random.default_rng(i).normal(0, 12, base.shape)), 0, 255).astype(np.int32)
    assert cv2.imwrite(f"{out}/img{i:04d}.{ext}", np.clip(base + noise, 0, 255).astype(np.uint8),
                       [cv2.IMWRITE_JPEG_QUALITY, 90] if ext == "jpg" else [])
with Pool() as p:
    p.map(make, range(n))
PY
}

# The bound a batch cannot beat with CPU codecs: OpenCV decoding and encoding
# each file (JPEG quality 95, as cbi writes) in one process per core.
codec_bound() {
  python3 - "$1" <<'PY'
import sys, os, time, glob
from multiprocessing import Pool
import cv2
cv2.setNumThreads(1)
files = sorted(glob.glob(sys.argv[1] + "/*"))
def work(f):
    img = cv2.imread(f, cv2.IMREAD_UNCHANGED)
    ext = os.path.splitext(f)[1]
    ok, buf = cv2.imencode(ext, img, [cv2.IMWRITE_JPEG_QUALITY, 95] if ext == ".jpg" else [])
    return len(buf)
with Pool(os.cpu_count()) as p:
    t = time.time(); p.map(work, files, chunksize=1); t = time.time() - t
print(f"codec-only (OpenCV decode+encode, {os.cpu_count()} processes): {len(files)} files in {t:.2f} s = {len(files) / t:.1f} images/s")
PY
}

# timed LABEL CMD...: runs CMD, prints its wall time, images/s for $n files
# and the CPU time it and its children used (user + system: mpirun's ranks too).
timed() {
  local label=$1; shift
  local TIMEFORMAT="%R %U %S" rc=0
  { time "$@" > "$out/$label.txt" 2> "$out/$label.err" || rc=$?; } 2> "$out/$label.time"
  [ $rc = 0 ] || { echo "$label: exit $rc"; tail -3 "$out/$label.err"; status=1; }
  read -r real user sys < "$out/$label.time"
  awk -v l="$label" -v r="$real" -v u="$user" -v s="$sys" -v n="$n" -v c="$(nproc)" 'BEGIN {
    printf "%s: %.2f s, %.1f images/s; CPU %.1f s user + %.1f s system = %.1f of %d cores\n", l, r, n / r, u, s, (u + s) / r, c }'
  grep -v '^$' "$out/$label.txt" | sed 's/^/    /'
}

run_scale() {
  local dir=/tmp/cbi-scale n=${CBI_SCALE_IMAGES:-400}
  rm -rf "$dir"
  make_images "$dir/in" "$n" jpg || { echo "scale: cannot generate the images"; status=1; return; }
  echo "scale: $n JPEGs, $(du -sh "$dir/in" | cut -f1), $(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader)"
  codec_bound "$dir/in"
  local filters=(--blur 9 --stats)
  timed scale-cuda0-cpucodec "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/cpucodec" --device cuda:0 --codec cpu "${filters[@]}"
  timed scale-cuda0-auto "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/auto" --device cuda:0 "${filters[@]}"
  # --codec gpu: reproducible bytes (auto mixes in OpenCV while nvJPEG starts).
  filters+=(--codec gpu)
  timed scale-cuda0 "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/cuda0" --device cuda:0 "${filters[@]}"
  # CBI_SCALE_QUICK=1: the three codec choices only.
  if [ -n "${CBI_SCALE_QUICK:-}" ]; then codec_bound "$dir/in"; rm -rf "$dir"; return; fi
  timed scale-cuda00 "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/cuda00" --device cuda:0,0 "${filters[@]}"
  if diff -r -q "$dir/cuda0" "$dir/cuda00" >/dev/null; then echo "scale: cuda:0,0 wrote the same $n files as cuda:0, byte for byte"
  else echo "scale: cuda:0,0 and cuda:0 outputs DIFFER"; status=1; fi
  if command -v mpirun >/dev/null; then
    # As root, in a VM: shared memory without cross-process copies; no binding,
    # so that each rank's threads may use every core.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
           OMPI_MCA_btl_vader_single_copy_mechanism=none
    mpirun --version | head -1
    local r
    for r in 1 2; do
      timed "scale-mpi$r" mpirun -n $r --bind-to none "$bin/cbi-filter" --input-dir "$dir/in" --output-dir "$dir/mpi$r" \
        --device cuda "${filters[@]}"
      if diff -r -q "$dir/cuda0" "$dir/mpi$r" >/dev/null; then echo "scale: mpirun -n $r wrote the same $n files as one process"
      else echo "scale: mpirun -n $r outputs DIFFER from one process"; status=1; fi
    done
  else echo "scale: no mpirun on this host"; status=1; fi
  codec_bound "$dir/in"
  # PNG: the CPU codecs whatever --codec says.
  local m=${CBI_SCALE_PNGS:-100}
  make_images "$dir/png" "$m" png || { echo "scale: cannot generate the PNGs"; status=1; return; }
  n=$m
  timed scale-png "$bin/cbi-filter" --input-dir "$dir/png" --output-dir "$dir/pngout" --device cuda --blur 9 --stats
  codec_bound "$dir/png"
  rm -rf "$dir"
}

# One large photo, whole process: cbi-filter with the CPU codecs and the GPU
# ones against OpenCV's Python doing the same on the CPU.
# A 24-megapixel photo at $2: the sample $1 scaled up to 6000x4000 plus noise, JPEG q90.
make_photo() {
  python3 - "$1" "$2" <<'PY'
import sys, numpy as np, cv2
img = cv2.resize(cv2.imread(sys.argv[1], cv2.IMREAD_COLOR), (6000, 4000), interpolation=cv2.INTER_CUBIC)
noise = np.random.default_rng(1).normal(0, 6, img.shape)
cv2.imwrite(sys.argv[2], np.clip(img + noise, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])
PY
}

run_single() {
  local dir=/tmp/cbi-single
  rm -rf "$dir" && mkdir -p "$dir"
  make_photo "$bundle/samples/butterfly.jpg" "$dir/in.jpg" || { echo "single: cannot make the image"; status=1; return; }
  echo "single: $(python3 -c "import cv2; m = cv2.imread('$dir/in.jpg'); print(m.shape)") $(du -h "$dir/in.jpg" | cut -f1)"
  local codec i
  for codec in cpu gpu; do
    for i in 1 2 3; do
      local t0 t1; t0=$(date +%s.%N)
      "$bin/cbi-filter" "$dir/in.jpg" --gaussian 9 --sobel mag --device cuda --codec $codec -o "$dir/out-$codec.jpg" \
        ${CBI_SINGLE_STATS:+--stats} || status=1
      t1=$(date +%s.%N)
      awk -v c="$codec" -v a="$t0" -v b="$t1" 'BEGIN { printf "single: cbi-filter --gaussian 9 --sobel mag --device cuda --codec %s: %.3f s\n", c, b - a }'
    done
  done
  for i in 1 2 3; do
    python3 - "$dir/in.jpg" "$dir/out-opencv.jpg" <<'PY'
import sys, time
t0 = time.time()
import cv2, numpy as np
img = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR)
g = cv2.GaussianBlur(img, (9, 9), 0)
dx = cv2.Sobel(g, cv2.CV_32F, 1, 0); dy = cv2.Sobel(g, cv2.CV_32F, 0, 1)
cv2.imwrite(sys.argv[2], np.clip(cv2.magnitude(dx, dy), 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 95])
print(f"single: OpenCV (Python, imports included) GaussianBlur 9 + Sobel magnitude: {time.time() - t0:.3f} s")
PY
  done
  python3 - "$dir/out-cpu.jpg" "$dir/out-gpu.jpg" <<'PY'
import sys, cv2, numpy as np
a, b = cv2.imread(sys.argv[1]), cv2.imread(sys.argv[2])
d = cv2.absdiff(a, b)
print(f"single: CPU-codec vs GPU-codec outputs: max |diff| {d.max()}, mean {d.mean():.3f}, PSNR {cv2.PSNR(a, b):.1f} dB")
PY
  rm -rf "$dir"
}

# One 24-megapixel JPEG through the unsharp mask (apps/bench/pipelines/unsharp.json),
# whole process: the default (the blend fused with its Gaussian) against
# --no-fuse, outputs byte for byte, and OpenCV (Python) doing the same.
run_blend() {
  local dir=/tmp/cbi-blend repo; repo=$(cd "$bundle/.." && pwd)
  rm -rf "$dir" && mkdir -p "$dir"
  make_photo "$repo/samples/butterfly.jpg" "$dir/in.jpg" || { echo "blend: cannot make the image"; status=1; return; }
  local variant i
  for variant in default no-fuse; do
    local flag=""; [ "$variant" = no-fuse ] && flag=--no-fuse
    for i in 1 2 3; do
      local t0 t1; t0=$(date +%s.%N)
      "$bin/cbi-filter" "$dir/in.jpg" --pipeline-file "$repo/apps/bench/pipelines/unsharp.json" --device cuda --codec cpu $flag \
        -o "$dir/out-$variant.png" --png-compression 1 || status=1
      t1=$(date +%s.%N)
      awk -v v="$variant" -v a="$t0" -v b="$t1" 'BEGIN { printf "blend: cbi-filter unsharp.json --device cuda (%s): %.3f s\n", v, b - a }'
    done
  done
  "$bin/cbi-filter" "$dir/in.jpg" --pipeline-file "$repo/apps/bench/pipelines/unsharp.json" --device cuda --print-pipeline | sed 's/^/blend: /'
  cmp "$dir/out-default.png" "$dir/out-no-fuse.png" && echo "blend: default and --no-fuse outputs are byte-identical" || status=1
  for i in 1 2 3; do
    python3 - "$dir/in.jpg" "$dir/out-opencv.png" <<'PY'
import sys, time
t0 = time.time()
import cv2
img = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR)
sharp = cv2.addWeighted(img, 1.5, cv2.GaussianBlur(img, (9, 9), 0), -0.5, 0)
cv2.imwrite(sys.argv[2], sharp, [cv2.IMWRITE_PNG_COMPRESSION, 1])
print(f"blend: OpenCV (Python, imports included) GaussianBlur 9 + addWeighted: {time.time() - t0:.3f} s")
PY
  done
  python3 - "$dir/out-default.png" "$dir/out-opencv.png" <<'PY'
import sys, cv2
a, b = cv2.imread(sys.argv[1]), cv2.imread(sys.argv[2])
print(f"blend: cbi vs OpenCV: max |diff| {cv2.absdiff(a, b).max()}")
PY
  rm -rf "$dir"
}

# One image: where --device auto runs it, and how long the whole process
# takes there and with --device cuda (and cpu for the float crossover).
run_device() {
  local dir=/tmp/cbi-device
  rm -rf "$dir" && mkdir -p "$dir"
  python3 - "$bundle/samples/butterfly.jpg" "$dir" <<'PY' || { echo "device: cannot make the images"; status=1; return; }
import sys, numpy as np, cv2
src = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR)
rng = np.random.default_rng(1)
for name, (w, h) in {'p2': (1632, 1224), 'p24': (6000, 4000), 'p48': (9600, 5000)}.items():
    img = cv2.resize(src, (w, h), interpolation=cv2.INTER_CUBIC)
    img = np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)
    cv2.imwrite(f'{sys.argv[2]}/{name}.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if name == 'p24': cv2.imwrite(f'{sys.argv[2]}/{name}f.tif', img.astype(np.float32) / 255)
PY
  timed() {  # best of 3, whole process, and the device --stats names
    local best=99 dev="" i t0 t1 log
    for i in 1 2 3; do
      t0=$(date +%s.%N)
      log=$("$bin/cbi-filter" "$@" --stats 2>&1) || { echo "device: FAILED $*: $log"; status=1; }
      t1=$(date +%s.%N)
      best=$(awk -v a="$t0" -v b="$t1" -v c="$best" 'BEGIN { x = b - a; print (x < c) ? x : c }')
      dev=$(echo "$log" | grep -m1 '^device')
    done
    printf "device: %-62s %-14s best of 3 %.3f s\n" "${*#"$dir/"}" "$dev" "$best"
  }
  local img p th d
  local chain="blur:31|blur:31|blur:31|gaussian:15|sobel:mag"
  for img in p2 p24 p48; do
    for p in "--blur 9" "--gaussian 9 --sobel mag" "--pipeline $chain"; do
      # shellcheck disable=SC2086
      timed "$dir/$img.jpg" $p -o "$dir/out.jpg"
      # shellcheck disable=SC2086
      timed "$dir/$img.jpg" $p -o "$dir/out.jpg" --device cuda
    done
  done
  for th in 2 4 16; do
    for d in auto cpu cuda; do timed "$dir/p24f.tif" --pipeline "$chain" -o "$dir/out.tif" --threads $th --device $d; done
  done
  rm -rf "$dir"
}

# Small batches: the default device against the CPU, whole process. A run
# that does not exit 0 (a crash at exit, a hang cut by timeout) fails.
run_small() {
  local dir=/tmp/cbi-small n dev i
  rm -rf "$dir"
  make_images "$dir/all" 128 jpg || { echo "small: cannot generate the images"; status=1; return; }
  for n in ${CBI_SMALL_SIZES:-2 8 32 128}; do
    mkdir -p "$dir/in$n"
    find "$dir/all" -name '*.jpg' | sort | head -"$n" | xargs cp -t "$dir/in$n"
    for dev in cpu auto; do
      local best=99 t0 t1 rc
      for i in 1 2 3; do
        rm -rf "$dir/out"; t0=$(date +%s.%N)
        timeout -k 5 60 "$bin/cbi-filter" --input-dir "$dir/in$n" --output-dir "$dir/out" --blur 9 --device $dev --quiet
        rc=$?; t1=$(date +%s.%N)
        [ $rc = 0 ] || { echo "small: $n JPEGs --device $dev run $i: exit $rc"; status=1; }
        best=$(awk -v a="$t0" -v b="$t1" -v c="$best" 'BEGIN { x = b - a; print (x < c) ? x : c }')
      done
      awk -v n="$n" -v d="$dev" -v b="$best" 'BEGIN { printf "small: %3d JPEGs --blur 9 --device %-4s best of 3 %.3f s (%.1f images/s)\n", n, d, b, n / b }'
    done
  done
  rm -rf "$dir"
}

# Every GPU of the host: a batch of generated 2048x2048 JPEGs
# (CBI_GPUS_JPEGS, default 800, q90) and PNGs (CBI_GPUS_PNGS, 200) through
# --blur 9 and the three-stage pipeline, each with --device cuda:0, cuda:all
# and mpirun -n G (G = the host's GPUs: one rank a GPU), --stats, the JPEGs
# with each --codec of CBI_GPUS_CODECS (default: auto, the default only);
# OpenCV's decode+encode alone on all cores before and after each format's
# runs, and cbi-codec-bench (nvJPEG's too); the GPUs' utilisation sampled
# each second throughout (nvidia-smi dmon); PNG outputs (CPU codecs)
# compared byte for byte across the three; then one rank killed mid-run on
# the PNGs and the job completed with --skip-existing, every output decoded.
run_gpus() {
  local dir=/tmp/cbi-gpus gpus filt how fmt codec dmon
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
  rm -rf "$dir"
  nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null | head -4
  echo "gpus: $(nproc) cores, $gpus GPUs, $(mpirun --version 2>/dev/null | head -1)"
  make_images "$dir/jpg" "${CBI_GPUS_JPEGS:-800}" jpg && make_images "$dir/png" "${CBI_GPUS_PNGS:-200}" png ||
    { echo "gpus: cannot generate the images"; status=1; return; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
         OMPI_MCA_btl_vader_single_copy_mechanism=none
  nvidia-smi dmon -s u -o T > "$out/gpus-dmon.txt" 2>&1 &
  dmon=$!
  local -A filters=([blur]="--blur 9" [three]="--pipeline color:gray|gaussian:5|sobel:mag")
  for fmt in jpg png; do
    n=$(find "$dir/$fmt" -type f | wc -l)
    echo "gpus: $n ${fmt^^}s, $(du -sh "$dir/$fmt" | cut -f1)"
    codec_bound "$dir/$fmt"
    for filt in blur three; do
      for codec in $([ $fmt = jpg ] && echo "${CBI_GPUS_CODECS:-auto}" || echo auto); do
        [ $filt = three ] && [ $codec != auto ] && continue  # the codecs' effect: on the blur
        local args=(--input-dir "$dir/$fmt" ${filters[$filt]} --codec $codec --stats) tag=$fmt-$filt-$codec
        echo "== $(date +%T) $tag"
        timed "gpus-$tag-cuda0" "$bin/cbi-filter" "${args[@]}" --output-dir "$dir/out-$tag-cuda0" --device cuda:0
        timed "gpus-$tag-all" "$bin/cbi-filter" "${args[@]}" --output-dir "$dir/out-$tag-all" --device cuda:all
        timed "gpus-$tag-mpi$gpus" mpirun -n "$gpus" --bind-to none "$bin/cbi-filter" "${args[@]}" \
          --output-dir "$dir/out-$tag-mpi" --device cuda
        if [ "$fmt" = png ]; then
          for how in all mpi; do
            diff -r -q "$dir/out-$tag-cuda0" "$dir/out-$tag-$how" >/dev/null &&
              echo "gpus: $tag: $how wrote the same $n files as cuda:0, byte for byte" ||
              { echo "gpus: $tag: $how outputs DIFFER from cuda:0"; status=1; }
          done
        fi
        rm -rf "$dir"/out-$tag-*
      done
    done
    codec_bound "$dir/$fmt"
  done
  kill $dmon
  [ -x "$bin/cbi-codec-bench" ] && timeout 120 "$bin/cbi-codec-bench" "$dir/jpg" --threads "$(nproc)"
  # One rank killed (SIGKILL) once a few outputs are in; the rerun with --skip-existing completes the job.
  local killed=$dir/out-killed victim="" pid done_before launcher rc=0
  n=$(find "$dir/png" -type f | wc -l)
  mpirun -n "$gpus" --bind-to none "$bin/cbi-filter" --input-dir "$dir/png" --output-dir "$killed" --device cuda \
    --blur 9 --quiet 2> "$out/gpus-killed.err" &
  launcher=$!
  for _ in $(seq 1 3000); do
    [ -z "$victim" ] && for pid in $(pgrep -f "output-dir $killed" || true); do
      tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$pid
    done
    [ -n "$victim" ] && [ "$(find "$killed" -type f -not -name '.cbi-tmp-*' 2>/dev/null | wc -l)" -ge 20 ] && break
    sleep 0.01
  done
  [ -n "$victim" ] && kill -KILL "$victim"
  wait "$launcher" || rc=$?
  done_before=$(find "$killed" -type f -not -name '.cbi-tmp-*' | wc -l)
  echo "gpus: killed rank 1 (pid ${victim:-none}): mpirun exited $rc with $done_before of $n outputs written"
  tail -2 "$out/gpus-killed.err" | sed 's/^/    /'
  timed gpus-rerun mpirun -n "$gpus" --bind-to none "$bin/cbi-filter" --input-dir "$dir/png" --output-dir "$killed" \
    --device cuda --blur 9 --skip-existing
  python3 - "$killed" "$n" <<'PY' || status=1
import sys, glob, os, cv2
files = sorted(glob.glob(sys.argv[1] + "/*") + glob.glob(sys.argv[1] + "/.cbi-tmp*"))
bad = [f for f in files if os.path.basename(f).startswith(".cbi-tmp") or cv2.imread(f, cv2.IMREAD_UNCHANGED) is None]
print(f"gpus: after the rerun: {len(files)} files of {sys.argv[2]}, {len(bad)} that do not decode or are temporaries")
sys.exit(0 if len(files) == int(sys.argv[2]) and not bad else 1)
PY
  echo "gpus: utilisation each second (nvidia-smi dmon -s u; sm, mem, enc, dec, jpg %):"
  cat "$out/gpus-dmon.txt"
  rm -rf "$dir"
}

# The codecs alone (cbi-codec-bench), on the images `scale` uses.
run_codecs() {
  local dir=/tmp/cbi-codecs n=${CBI_SCALE_IMAGES:-400}
  rm -rf "$dir"
  make_images "$dir/in" "$n" jpg || { echo "codecs: cannot generate the images"; status=1; return; }
  "$bin/cbi-codec-bench" "$dir/in" --threads "$(nproc)" || status=1
  "$bin/cbi-codec-bench" "$dir/in" --batches || status=1
  rm -rf "$dir"
}

# The hostile sweep on the GPU: the same one-line errors, exit codes and
# untouched inputs as on the CPU, with JPEGs through the GPU decoder.
run_hostile() {
  local repo; repo=$(cd "$bundle/.." && pwd)
  CBI_SWEEP_DEVICE=cuda bash "$repo/scripts/hostile-sweep.sh" "$bin/cbi-filter" || status=1
}

run_fusion() {
  # A bundle may carry one binary: each part runs when its binary is there.
  if [ -x "$bin/test_fusion" ]; then
    "$bin/test_fusion" --gtest_brief=1 --gtest_filter=-*Cli* > "$out/test_fusion.log" 2>&1 || status=1
    echo "test_fusion: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/test_fusion.log" | tr '\n' ' ')"
    for tool in memcheck racecheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin/test_fusion" --gtest_brief=1 \
        --gtest_filter='Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.Blends*' > "$out/sanitize-$tool-fusion.log" 2>&1 || status=1
      echo "$tool: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/sanitize-$tool-fusion.log" | tr '\n' ' ')"
    done
  fi
  if [ -x "$bin/cbi-bench" ]; then
    local pipelines=$bundle/../apps/bench/pipelines
    local bench=${CBI_FUSION_BENCH:-$bin/cbi-bench}  # another build's cbi-bench, to compare in one call
    "$bench" --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 \
      --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" \
      --pipeline "color:gray | gaussian:5@stream:256x32 | sobel:mag@stream:256x32" \
      --pipeline "color:gray | gaussian:5@stream:256x64 | sobel:mag@stream:256x64" \
      --pipeline "$pipelines/unsharp.json" --pipeline "$pipelines/dog.json" \
      --pipeline "gaussian:5 | sobel:mag" --pipeline "blur:3 | gaussian:5" \
      --csv "$out/fusion.csv" > "$out/fusion.txt" 2>&1 || status=1
    grep -E '^#|pipeline|DIFFERS|error' "$out/fusion.txt" | head -60
    [ -n "${OUT:-}" ] && cp "$out/fusion.csv" "$OUT/"
  fi
}

case "${1:-all}" in
  tests) run_tests ;;
  sanitize) run_sanitize ;;
  sanitize-matrix) run_sanitize_matrix ;;
  bench) shift; run_bench "$@" ;;
  cli) run_cli ;;
  batch) run_batch ;;
  scale) run_scale ;;
  single) run_single ;;
  device) run_device ;;
  small) run_small ;;
  gpus) run_gpus ;;
  codecs) run_codecs ;;
  fusion) run_fusion ;;
  blend) run_blend ;;
  hostile) run_hostile ;;
  all) run_tests; run_cli; run_sanitize; run_bench ;;
  bench-all) shift; run_bench_all "$@" ;;
  bench-kinds) shift; run_bench_kinds "$@" ;;
  *) echo "usage: run.sh tests|sanitize|bench|cli|batch|scale|gpus|single|device|small|chain|blend|codecs|hostile|all|bench-all|bench-kinds" >&2; exit 2 ;;
esac
if [ -n "${OUT:-}" ]; then
  tar -C "$out" -czf "$OUT/logs.tgz" .
  for f in baseline.csv baseline.json butterfly-cuda.png bench.csv cbi.json kinds.csv npp-kinds.csv; do [ -f "$out/$f" ] && cp "$out/$f" "$OUT/"; done
fi
exit $status
