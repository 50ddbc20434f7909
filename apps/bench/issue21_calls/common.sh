# Sourced from the repository root by this folder's call scripts: unpacks
# bundle/ (its libraries, and its binaries or those of the tarball BIN names)
# into $u, and points the loader, the tests' samples and PATH at them and at
# the host's CUDA toolkit.
u=/tmp/cbi-bundle; rm -rf $u && mkdir -p $u && tar -C $u -xJf bundle/libs.tar.xz && tar -C $u -xJf "${BIN:-bundle/bin.tar.xz}"
cuda_lib=$(dirname "$(find /usr/local/cuda/ /usr/local/cuda/targets/ -maxdepth 3 -name 'libcublas.so.*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$u/lib:$cuda_lib CBI_SAMPLES_DIR=$PWD/bundle/samples PATH=$PATH:/usr/local/cuda/bin

# suites NAME...: each test binary of $u, one line of counts (the log in /tmp/NAME.log).
suites() {
  for t in "$@"; do
    "$u/bin/$t" --gtest_brief=1 > "/tmp/$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|SKIPPED \]' "/tmp/$t.log" | tr '\n' ' ') ${SECONDS}s"
  done
}
# sanitize FILTER: test_fusion's tests matching FILTER under memcheck, then racecheck.
sanitize() {
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 99 "$u/bin/test_fusion" --gtest_brief=1 --gtest_filter="$1" > "/tmp/$tool.log" 2>&1
    echo "$tool test_fusion rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "/tmp/$tool.log" | tr '\n' ' ') ${SECONDS}s"
  done
}
# gpu_line: the GPU, its clocks and temperature; the call's clock (SECONDS) starts.
gpu_line() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
  SECONDS=0
}
# checks FILTER NAME...: the test binaries' counts and first failure lines, then sanitize FILTER.
checks() {
  local filter=$1; shift
  suites "$@"
  for t in "$@"; do grep -hE "Failure|FAILED|Expected|Which is" "/tmp/$t.log" | head -10; done
  sanitize "$filter"
}
# gpu_suites: every GPU suite of the bundle, test_tuning's and test_devices'
# *Cli* tests left out as bundle/run.sh does (they run the build tree's
# cbi-filter), then final_checks.
gpu_suites() {
  for t in test_tuning test_devices; do
    "$u/bin/$t" --gtest_brief=1 --gtest_filter=-*Cli* > "/tmp/$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' "/tmp/$t.log" | tr '\n' ' ')"
  done
  suites test_cuda_errors test_cuda_wait test_jpeg_gpu test_graph test_schedules
  final_checks
}
# final_checks: the fusion suites and their sanitizers that the last calls of a session run.
final_checks() {
  checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.PairsMeasuredFaster*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" \
    test_fusion test_defaults test_filters_cuda
}
# unpack NAME: a build's cbi-bench, bundle-extra/NAME-bin.tar.xz, as /tmp/NAME/bin/cbi-bench.
unpack() { mkdir -p "/tmp/$1" && tar -C "/tmp/$1" -xJf "bundle-extra/$1-bin.tar.xz"; }
# builds NAME ARCHIVE: the builds in bundle-extra/ARCHIVE (NAME2/bin/cbi-bench
# each) under /tmp, and the bundle's own binaries as /tmp/NAME/bin.
builds() { tar -C /tmp -xJf "bundle-extra/$2" && mkdir -p "/tmp/$1" && ln -sfn "$u/bin" "/tmp/$1/bin"; }
# The issue's gray pipelines, as cbi-bench arguments.
gray_pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag"
            --pipeline "color:gray | gaussian:5 | gaussian:5")
# ncu_gray BIN SIZE FILE [SECTION...]: Nsight Compute on the pair kernel of
# the gray pipeline at SIZE (e.g. 8192x8192), its report in FILE, then the
# counts the notes quote.
ncu_gray() {
  local bin=$1 size=$2 file=$3; shift 3
  local sections=(--section SpeedOfLight --section Occupancy --section InstructionStats --section SchedulerStats --section LaunchStats)
  for s in "$@"; do sections+=(--section "$s"); done
  timeout 60 ncu -k regex:chain_stream -c 1 "${sections[@]}" "$bin" --suite filters --image 8u:3 --size "$size" \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > "$file" 2>&1
  echo "ncu $size rc=$? ${SECONDS}s"
  grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per|DRAM Throughput|Executed Instructions  |Waves Per SM|SM Active Cycles|Elapsed Cycles|Warp Cycles Per Issued" "$file" | head -16
}
# sass_gray BIN FILE: the SASS of the gray pipeline's pair kernel (border 0
# on both stencils, 3x3 Sobel magnitude) in FILE, and its instruction count.
gray_pair_kernel=_ZN3cbi4cuda12chain_streamINS_10GaussianOpIhLNS_10BorderModeE0ENS_20AnyBorderColorSourceIhEEEENS_7SobelOpIhLS3_0ENS_15AnyBorderSourceIhEEEELi3ELi1ELi2ELb1ELb1ELb1EEEvT_T0_NS0_9ChainTapsILi1ELi5EEENSD_IXT3_EXT1_EEENS0_9ChainGrayEiiNS_9TileOrderE
sass_gray() { cuobjdump -sass -fun "$gray_pair_kernel" "$1" > "$2" 2>&1; echo "sass $1 rc=$? $(grep -cE '^\s+/\*[0-9a-f]+\*/' "$2") instructions"; }
# builds_in_turn DIR LIMIT BUILD...: each build's cbi-bench (/tmp/BUILD/bin)
# with the arguments in three_run (on 8u:3) and one_run (on 8u:1), 20 runs,
# in turn, twice, until SECONDS passes LIMIT; CSVs DIR/BUILD-threeR.csv and
# DIR/BUILD-oneR.csv; then any failure lines and the builds side by side
# (builds_table.py, the plans table_variants names).
builds_in_turn() {
  local dir=$1 limit=$2; shift 2
  for round in 1 2; do
    for b in "$@"; do
      [ $SECONDS -gt "$limit" ] && break 2
      /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${three_run[@]}" --runs 20 --csv "$dir/$b-three$round.csv" > /tmp/$b-t$round.txt 2>&1
      echo "$b three $round rc=$? ${SECONDS}s"
      /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${one_run[@]}" --runs 20 --csv "$dir/$b-one$round.csv" > /tmp/$b-o$round.txt 2>&1
      echo "$b one $round rc=$? ${SECONDS}s"
    done
  done
  grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt /tmp/*-o?.txt | head
  python3 apps/bench/issue21_calls/builds_table.py "$dir" "$table_variants" "$@"
}
# in_turn DIR LIMIT BUILD...: builds_in_turn on the pairs: three_args (8u:3,
# 1920x1080 to 8192^2) and one_args (8u:1, 4096^2); the plans VARIANTS
# names: fused and default unless set.
three_args=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag")
one_args=(--pipeline "gaussian:5 | sobel:mag")
in_turn() {
  three_run=(--size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 "${three_args[@]}")
  one_run=(--size 4096x4096 --filter sobel:mag --schedule stream:256x16 "${one_args[@]}")
  table_variants=${VARIANTS:-fused,default} builds_in_turn "$@"
}
# issue_pipes DIR: the bundle's cbi-bench on the issue's pipelines (the gray
# pipeline and gaussian:5 | sobel:mag, 640x480 to 8192^2; unsharp mask and
# difference of Gaussians at 4096^2 and 8192^2), CSVs DIR/final-pipes.csv
# and DIR/final-blends.csv, then their table with the floors (pipes_table.py).
issue_pipes() {
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 8192x8192 \
    --filter sobel:mag --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
    --runs 20 --csv "$1/final-pipes.csv" > /tmp/p.txt 2>&1; echo "pipes rc=$? ${SECONDS}s"
  $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
    --runs 20 --csv "$1/final-blends.csv" > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
  grep -hE "DIFFERS|error|FAIL" /tmp/p.txt /tmp/b.txt | head
  python3 apps/bench/issue21_calls/pipes_table.py "$1" final-pipes final-blends
}
# blends_in_turn DIR LIMIT BUILD...: builds_in_turn on the unsharp mask and
# the difference of Gaussians (8u:3 at 1920x1080, 4096^2 and 8192^2; 8u:1
# at 4096^2); the plans VARIANTS names: default unless set.
blend_args=(--filter gaussian:9 --schedule stream:256x16 --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json)
blends_in_turn() {
  three_run=(--size 1920x1080 --size 4096x4096 --size 8192x8192 "${blend_args[@]}")
  one_run=(--size 4096x4096 "${blend_args[@]}")
  table_variants=${VARIANTS:-default} builds_in_turn "$@"
}
# ncu_blend BIN PIPELINE SIZE FILE: Nsight Compute on the fused blend kernel
# of PIPELINE (a JSON file) at SIZE, 8u:3, its report in FILE, then the
# counts the notes quote.
ncu_blend() {
  timeout 90 ncu --kernel-name-base mangled -k regex:BlendedStencils -c 1 --section SpeedOfLight --section Occupancy \
    --section InstructionStats --section SchedulerStats --section LaunchStats "$1" --suite filters --image 8u:3 --size "$3" \
    --filter gaussian:9 --schedule stream:256x16 --pipeline "$2" --runs 20 > "$4" 2>&1
  echo "ncu $2 $3 rc=$? ${SECONDS}s"
  grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per|DRAM Throughput|Executed Instructions  |Waves Per SM|Block Limit|Warp Cycles Per Issued" "$4" | head -18
}
# pairs_in_turn DIR BUILD...: each build's cbi-bench (/tmp/BUILD/bin) on the
# pair pipelines (the gray pipeline and gaussian:5 | sobel:mag on 8u:3, the
# latter on 8u:1 too; 1920x1080, 4096^2 and 8192^2; BORDER if set), in turn,
# twice; CSVs DIR/BUILD-ROUND-CHANNELS.csv, then any failure lines and
# the first two builds side by side (pair_table.py).
pairs_in_turn() {
  local dir=$1; shift
  local sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192) border=()
  [ -n "${BORDER:-}" ] && border=(--border "$BORDER")
  for round in 1 2; do
    for b in "$@"; do
      /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${border[@]}" \
        --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $dir/$b-$round-3.csv > /tmp/$b-$round-3.txt 2>&1
      echo "$b $round 3 rc=$? ${SECONDS}s"
      /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${border[@]}" \
        --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $dir/$b-$round-1.csv > /tmp/$b-$round-1.txt 2>&1
      echo "$b $round 1 rc=$? ${SECONDS}s"
    done
  done
  grep -hE "DIFFERS|error|FAIL" /tmp/*-[12]-[13].txt | head
  python3 apps/bench/issue21_calls/pair_table.py "$dir" "$1" "$2"
}
# sass_pairs BUILD...: per build, the instruction and opcode counts of the
# 3x3 Sobel magnitude pair kernels in its cbi-bench (cuobjdump: minutes).
sass_pairs() {
  for b in "$@"; do
    cuobjdump -sass /tmp/$b/bin/cbi-bench > /tmp/$b-all.sass 2>/dev/null
    python3 - /tmp/$b-all.sass $b <<'PY'
import re, sys, collections
cur = None; funcs = collections.OrderedDict()
for l in open(sys.argv[1]):
    m = re.match(r"\s+Function : (\S+)", l)
    if m: cur = m.group(1); funcs[cur] = collections.Counter(); continue
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", l)
    if m and cur: funcs[cur][m.group(1)] += 1
for f, c in funcs.items():
    if "chain_stream" in f and "Li3ELi" in f and "Li2ELb" in f and "Lb1ELb1EE" in f:
        tag = ("gray " if "ColorSource" in f else "") + re.search(r"Li3ELi(\d)ELi2E", f).group(0)
        print(sys.argv[2], tag, sum(c.values()), "ISETP", c["ISETP"], "SHFL", c["SHFL"], "LDS", c["LDS"], "BSSY", c["BSSY"],
              "P2R", c["P2R"], "STL+LDL", c["STL"] + c["LDL"])
PY
  done
}
# photos4096 DIR: 32 JPEGs (q92) of butterfly.jpg upscaled to 4096^2, some
# flipped, as DIR/img000.jpg ... img031.jpg.
photos4096() {
  mkdir -p "$1"
  python3 - "$1" <<'PY'
import sys, cv2
from multiprocessing import Pool
m = cv2.imread('bundle/samples/butterfly.jpg'); out = sys.argv[1]
big = cv2.resize(m, (4096, 4096), interpolation=cv2.INTER_CUBIC)
def make(i):
    img = cv2.flip(big, i % 3 - 1) if i % 4 else big
    assert cv2.imwrite(f"{out}/img{i:03d}.jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 92])
with Pool() as p: p.map(make, range(32))
PY
}
# codec_only DIR EXT: the codec-only bound of a batch of DIR's files, twice:
# OpenCV decodes each and encodes it as EXT (JPEG at quality 95), one
# process per core, one thread each.
codec_only() {
  python3 - "$1" "$2" <<'PY'
import sys, os, time, glob
from multiprocessing import Pool
import cv2
cv2.setNumThreads(1)
files = sorted(glob.glob(sys.argv[1] + "/*")); ext = "." + sys.argv[2]
def work(f):
    img = cv2.imread(f, cv2.IMREAD_UNCHANGED)
    ok, buf = cv2.imencode(ext, img, [cv2.IMWRITE_JPEG_QUALITY, 95] if ext == ".jpg" else [])
    return len(buf)
for r in (1, 2):
    with Pool(os.cpu_count()) as p:
        t = time.time(); p.map(work, files, chunksize=1); t = time.time() - t
    print(f"  codec-only (OpenCV decode + {ext} encode, {os.cpu_count()} processes): {len(files)} files in {t:.2f} s = {len(files) / t:.2f} images/s")
PY
}
# photos4096_x4 DIR32 DIR128: photos4096 into DIR32, and each of them four
# times over into DIR128 (img000.jpg ... img127.jpg).
photos4096_x4() {
  photos4096 "$1"
  mkdir -p "$2"
  for i in $(seq 0 127); do cp "$1/img$(printf %03d $((i % 32))).jpg" "$2/img$(printf %03d $i).jpg"; done
}
# blend_tests: test_fusion's blend cases, one line of counts, then its failure lines counted.
blend_tests() {
  "$u/bin/test_fusion" --gtest_brief=1 --gtest_filter='Fusion.Blends*' > /tmp/tf.log 2>&1
  echo "test_fusion Blends rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/tf.log | tr '\n' ' ')"
  grep -E 'Failure|Expected|Which is|norm|actual' /tmp/tf.log | sort | uniq -c | sort -rn | head -12
}
