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
# unpack NAME: a build's cbi-bench, bundle-extra/NAME-bin.tar.xz, as /tmp/NAME/bin/cbi-bench.
unpack() { mkdir -p "/tmp/$1" && tar -C "/tmp/$1" -xJf "bundle-extra/$1-bin.tar.xz"; }
# The issue's gray pipelines, as cbi-bench arguments.
gray_pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag"
            --pipeline "color:gray | gaussian:5 | gaussian:5")
