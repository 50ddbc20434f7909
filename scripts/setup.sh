#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: installs what is
# missing, builds Release into build/, then
#   scripts/setup.sh demo   runs cbi-filter on a sample photo (build/butterfly-blur9.png)
#   scripts/setup.sh test   runs the whole test suite through ctest, then
#                           (what CI runs, .ci/run) the same suite built with
#                           ASan+UBSan in build-asan, and each libFuzzer target
#                           in build-fuzz: CBI_FUZZ_RUNS (default 200000)
#                           and at most CBI_FUZZ_MAX_SECONDS (default 60)
#                           inputs from a fixed seed, so a run is repeatable
#                           for a commit and CI passes or fails the same on
#                           every machine (a code change changes what it explores);
#                           CBI_FUZZ_SECONDS=N fuzzes N s per target with a
#                           random seed instead (to explore, not for CI)
# Idempotent: a second run installs nothing and rebuilds only what changed.
# CBI_TEST_PARTS picks parts of `test` while developing (default
# "main asan fuzz"; e.g. CBI_TEST_PARTS=fuzz CBI_FUZZ_SECONDS=600). CI runs all.
# The CUDA backend is built when nvcc is found (PATH or /usr/local/cuda);
# set CBI_WITH_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ "$mode" != demo ] && [ "$mode" != test ]; then
  echo "usage: scripts/setup.sh demo|test" >&2
  exit 2
fi

packages=(build-essential cmake pkg-config libopencv-dev libtbb-dev libcli11-dev libgtest-dev nlohmann-json3-dev libexiv2-dev zlib1g-dev libjpeg-dev
          libopenmpi-dev openmpi-bin openssh-client  # mpirun looks for ssh even on one host
          python3-dev pybind11-dev python3-numpy python3-pytest python3-opencv python3-dask python3-distributed)  # the Python module and its tests
# test: clang and its runtimes build the fuzz targets (libFuzzer); llvm-14
# brings llvm-symbolizer, so sanitizer reports name files and lines.
[ "$mode" = test ] && packages+=(clang-14 libclang-rt-14-dev llvm-14)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing packages; run this first:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=$PATH:/usr/local/cuda/bin; fi
jobs=$(nproc)
parts=${CBI_TEST_PARTS:-main asan fuzz}
has_part() { [ "$mode" = demo ] || [[ " $parts " == *" $1 "* ]]; }
timing=()
timed() {  # timed LABEL COMMAND...: runs it, records its wall time, returns its status
  local label=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  timing+=("$(printf '%-20s %5d s' "$label" $((SECONDS - start)))")
  return $rc
}
if has_part main; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA="${CBI_WITH_CUDA:-AUTO}"
  timed "build: build" cmake --build build -j"$jobs"
fi

if [ "$mode" = demo ]; then
  ./build/cbi-filter samples/butterfly.jpg --blur 9 --schedule column:32 -o build/butterfly-blur9.png
  echo "setup: wrote build/butterfly-blur9.png"
  exit 0
fi

# The time of each part, also when one fails.
trap 'echo "setup: times"; printf "  %s\n" "${timing[@]}"' EXIT
if has_part main; then
  timed "build: ctest" ctest --test-dir build --output-on-failure -j"$jobs"
fi

# Sanitizer reports must fail the run even where a program's stderr goes
# nowhere (cbi-filter silences its fd 2; a test may expect exit 1): ASan and
# LeakSanitizer reports go to files under $san_logs, checked after the run.
# gcc's libubsan ignores log_path (it always writes to stderr), so a UBSan
# report is caught by its exit status instead: 86, never cbi's 0/1/2.
symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[ -x "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH=$symbolizer
# ASan warns once in each process that swaps contexts (TBB's suspended
# tasks do: a batch's images waiting for a capped device's processor). The
# warning reports nothing: a log holding only it is dropped.
check_sanitizer_logs() {  # check_sanitizer_logs DIR WHAT
  local f
  for f in "$1"/*; do
    [ -f "$f" ] && ! grep -qv "WARNING: ASan doesn't fully support makecontext/swapcontext functions" "$f" && rm -f "$f"
  done
  if compgen -G "$1/*" >/dev/null; then
    echo "setup: sanitizer reports from $2:" >&2
    for f in "$1"/*; do echo "== $f" >&2; cat "$f" >&2; done
    return 1
  fi
}

if has_part asan; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA=OFF -DCBI_WITH_MPI=OFF -DCBI_SANITIZE=ON
  timed "build-asan: build" cmake --build build-asan -j"$jobs"
  san_logs=$PWD/build-asan/sanitizer-logs
  rm -rf "$san_logs" && mkdir -p "$san_logs"
  ctest_rc=0
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:exitcode=86:log_path=$san_logs/asan"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86:log_path=$san_logs/ubsan"
  timed "build-asan: ctest" ctest --test-dir build-asan --output-on-failure -j"$jobs" || ctest_rc=$?
  unset ASAN_OPTIONS UBSAN_OPTIONS
  check_sanitizer_logs "$san_logs" "the ASan+UBSan test suite (build-asan)"
  [ "$ctest_rc" -eq 0 ] || exit "$ctest_rc"
fi

if has_part fuzz; then
  if [ -n "${CBI_FUZZ_SECONDS:-}" ]; then
    budget=(-max_total_time="$CBI_FUZZ_SECONDS") what="$CBI_FUZZ_SECONDS s per target, random seed"
  else
    # The inputs are fixed (repeatable for a commit); the time cap bounds a
    # slow target (fuzz_image) on a slow machine, so CI's time stays bounded.
    runs=${CBI_FUZZ_RUNS:-200000} cap=${CBI_FUZZ_MAX_SECONDS:-60}
    budget=(-runs="$runs" -seed=1 -max_total_time="$cap") what="$runs inputs per target, seed 1, at most $cap s each"
  fi
  targets=(fuzz_pipeline fuzz_json fuzz_schedule fuzz_filter_args fuzz_image)
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DCBI_WITH_CUDA=OFF -DCBI_WITH_MPI=OFF \
    -DCBI_FUZZ=ON -DBUILD_TESTING=OFF
  timed "build-fuzz: build" cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"
  # The fuzzer adds what it finds to a scratch corpus (the committed seeds
  # and regressions are read only); crashes, leaks, timeouts and
  # out-of-memory inputs go to build-fuzz/findings/TARGET/.
  summary=()
  failed=0
  fuzz_start=$SECONDS
  for t in "${targets[@]}"; do
    work=build-fuzz/corpus/$t findings=build-fuzz/findings/$t log=build-fuzz/logs/$t.log
    mkdir -p "$work" "$findings" build-fuzz/logs
    start=$SECONDS rc=0 dict=()
    [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
    "build-fuzz/fuzz/$t" "$work" "fuzz/corpus/$t" "fuzz/regressions/$t" "${dict[@]}" \
      "${budget[@]}" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=512 \
      -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    result=ok
    if [ "$rc" -ne 0 ]; then
      result="FAILED (exit $rc)"
      failed=1
      echo "setup: $t failed; the end of $log:" >&2
      tail -n 60 "$log" >&2
      echo "setup: keep the input as a regression: cp $findings/* fuzz/regressions/$t/" >&2
    fi
    summary+=("$(printf '%-18s %6d s %12s %8d  %s' "$t" $((SECONDS - start)) "${execs:-?}" \
      "$(find "$work" -type f | wc -l)" "$result")")
  done
  timing+=("$(printf '%-20s %5d s' "fuzz: run" $((SECONDS - fuzz_start)))")
  echo "setup: fuzzing, $what"
  printf '%-18s %8s %12s %8s  %s\n' target time executions new-corp result
  printf '%s\n' "${summary[@]}"
  [ "$failed" -eq 0 ] || exit 1
fi
